"""`k.source(..., target="triton")`: the generated module's text."""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.triton.codegen import generate_cached
from tiledsl import registry
from tiledsl.config import Config
from tiledsl.ir.core import Function
from tiledsl.ir.types import TensorType


def numpy_strides(fn: Function, args: list[Any]) -> dict:
    return {a: tuple(s // x.itemsize for s in x.strides) for a, x in zip(fn.args, args)
            if isinstance(a.type, TensorType) and isinstance(x, np.ndarray)}


@registry.register_target("triton", backend="triton-interpret")
def triton_source(fn: Function, config: Config, args: list[Any]) -> str:
    return generate_cached(fn, config, numpy_strides(fn, args)).source
