"""NumPy rule of `assert` (tiledsl/lang/asserts.py): every lane of every active program must
hold, or a DeviceAssertionError names the kernel's line and the assertion's message."""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy.executor import Executor, rule
from tiledsl.errors import DeviceAssertionError
from tiledsl.ir.core import Op


@rule("assert")
def _assert(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    failed = ~np.asarray(xs[0], dtype=bool)
    if ex.active is not None:  # programs inside a runtime `if` or loop stop (branches.py)
        active = ex.active.reshape(ex.active.shape + (1,) * max(0, failed.ndim - ex.active.ndim))
        failed = failed & active
    if failed.any():
        raise DeviceAssertionError(f"device assertion failed: {op.attrs['msg'] or '(no message)'}",
                                   kernel=ex.fn.name, loc=op.loc)
    return []
