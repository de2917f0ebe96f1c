"""`k.source(..., target="triton" | "ptx")`: the generated module, or its PTX for an arch."""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.triton.codegen import generate_cached
from lowering.backends.triton.compile import compile_module
from tiledsl.runtime import registry
from tiledsl.runtime.config import Config
from tiledsl.ir.core import Function
from tiledsl.ir.types import TensorType


def array_strides(fn: Function, args: list[Any]) -> dict:
    """Element strides of the tensor arguments (NumPy, CuPy or torch)."""
    out = {}
    for v, x in zip(fn.args, args):
        if not isinstance(v.type, TensorType):
            continue
        if hasattr(x, "stride") and callable(x.stride):
            out[v] = tuple(int(s) for s in x.stride())
        else:
            out[v] = tuple(int(s) // np.dtype(x.dtype).itemsize for s in x.strides)
    return out


@registry.register_target("triton", backend="triton")
def triton_source(fn: Function, config: Config, args: list[Any], arch: Any = None) -> str:
    return generate_cached(fn, config, array_strides(fn, args)).source


@registry.register_target("ptx", backend="triton")
def ptx_source(fn: Function, config: Config, args: list[Any], arch: Any = "sm_90") -> str:
    module = generate_cached(fn, config, array_strides(fn, args))
    return "\n".join(c.ptx for c in compile_module(module, arch))
