"""The NumPy reference backend: defines what every kernel means; other backends are tested on it."""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy.executor import Executor
from tiledsl import registry
from tiledsl.config import Config, ConfigSpace
from tiledsl.errors import BackendError
from tiledsl.ir.core import Function
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
        return Executor(fn, config).run(args)


registry.register_backend(NumpyBackend())
