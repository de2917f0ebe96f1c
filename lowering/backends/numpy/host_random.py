"""The NumPy rule of `tensor.random` (torch.randint / rand / randn in host code): a new array
drawn on every call. With torch imported, from torch's default CPU generator as torch draws
them (`random_(low, high)`, `uniform_()`, `normal_()` of an empty tensor: what torch.randint,
rand and randn do), so `torch.manual_seed` gives torch's own numbers; without it, from NumPy's
global generator (`np.random.seed` holds)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from lowering.backends.numpy.executor import Executor, rule
from lowering.backends.numpy.room import check_room
from tiledsl.dtypes import DType
from tiledsl.runtime import draws
from tiledsl.ir.core import Op
from tiledsl.ir.types import TensorType


def draw(kind: str, shape: tuple[int, ...], dtype: DType, low: int = 0, high: int = 1
         ) -> np.ndarray:
    """A new array of `kind` ("randint" in [low, high), "rand" in [0, 1), "randn", and
    "pyrandint", Python's random.randrange(low, high))."""
    torch = sys.modules.get("torch")
    if torch is not None and kind != "pyrandint":
        t = torch.empty(shape, dtype=torch.bool if dtype.is_bool else getattr(torch, dtype.name))
        fill_torch(t, kind, low, high)
        if dtype.name == "bfloat16":  # NumPy has no bfloat16: the bits, viewed as ml_dtypes'
            return t.view(torch.int16).numpy().view(dtype.np)
        return t.numpy()
    return draws.draw(np, kind, shape, dtype.np, low, high)


def fill_torch(t: Any, kind: str, low: int, high: int) -> Any:
    """Tensor `t` filled in place as torch.randint / rand / randn fill theirs."""
    if kind == "randint":
        return t.random_(low, high)
    return t.uniform_() if kind == "rand" else t.normal_()


@rule("tensor.random")
def _tensor_random(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    t = op.result.type
    assert isinstance(t, TensorType)
    check_room(t.shape, t.dtype.np, op.loc)
    out = draw(op.attrs["kind"], t.shape, t.dtype, op.attrs.get("low", 0),
               op.attrs.get("high", 1))
    if ex.drawn is not None:  # (a second run of the kernel reads the same numbers)
        ex.drawn[op.result] = out.copy()
    return [out]
