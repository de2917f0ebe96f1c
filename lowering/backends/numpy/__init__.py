"""The NumPy reference backend: defines what every kernel means; other backends are tested on it."""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy import memory
from lowering.backends.numpy.executor import Executor
from tiledsl import registry
from tiledsl.config import Config, ConfigSpace
from tiledsl.errors import BackendError, ShapeError
from tiledsl.ir.core import Function, Op
from tiledsl.ir.types import TensorType


# Every grid program runs at once, so only loop iterations cost Python overhead: big tiles
# (few iterations, large BLAS calls) are fastest. Capped to keep tiles of memory-friendly size.
DEFAULT_BLOCK = 1024


class NumpyBackend:
    name = "numpy"

    def extend_space(self, space: ConfigSpace, fn: Function, **_: Any) -> ConfigSpace:
        """No knobs (any block sizes run, only speed changes); big default blocks."""
        for p in space.params:
            if p.name.startswith("block_sizes["):
                space = space.with_default(p.name, min(max(p.choices), DEFAULT_BLOCK))
        return space

    def run(self, fn: Function, args: list[Any], config: Config, **_: Any) -> list[Any]:
        for v, a in zip(fn.args, args):
            if isinstance(v.type, TensorType) and not isinstance(a, np.ndarray):
                raise BackendError(f"backend 'numpy' runs on NumPy arrays; argument '{v.hint}' "
                                   f"is a {type(a).__module__}.{type(a).__qualname__}")
        outputs = Executor(fn, config).run(args)
        for i, (v, out) in enumerate(zip(fn.outputs, outputs)):
            if v.owner is not None and v.owner.name == "tensor.empty":
                _check_written(fn, config, i, v.owner, out)
        return outputs


def _check_written(fn: Function, config: Config, i: int, alloc: Op, out: np.ndarray) -> None:
    """Every element of a returned td.empty tensor was stored (floats only: see
    memory.unwritten); what no store writes would be garbage on a GPU."""
    mask = memory.unwritten(out)
    if mask is None or not mask.any():
        return
    first = tuple(int(j) for j in np.argwhere(mask)[0])
    raise ShapeError(f"output {i} ({out.dtype}{list(out.shape)}): no store writes "
                     f"{int(mask.sum())} of its {out.size} elements under {config}, the first "
                     f"at index {first}; on a GPU they would hold garbage", kernel=fn.name,
                     loc=alloc.loc, hint="make the stores cover the whole tensor under every "
                     "block size, or allocate it with td.zeros(...) or td.full(...)")


registry.register_backend(NumpyBackend())
