"""The NumPy reference backend: defines what every kernel means; other backends are tested on it."""

from __future__ import annotations

from typing import Any

from lowering.backends.numpy.executor import Executor
from tiledsl import registry
from tiledsl.config import Config, ConfigSpace
from tiledsl.ir.core import Function


class NumpyBackend:
    name = "numpy"

    def extend_space(self, space: ConfigSpace, fn: Function) -> ConfigSpace:
        return space  # no knobs: any block sizes run, only speed changes

    def run(self, fn: Function, args: list[Any], config: Config) -> list[Any]:
        return Executor(fn, config).run(args)


registry.register_backend(NumpyBackend())
