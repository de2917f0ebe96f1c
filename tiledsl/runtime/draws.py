"""Random arrays for `tensor.random` (torch.randint / rand / randn in host code) drawn from an
array module's global generator: NumPy's (`np.random.seed` holds) where torch is not there to
draw them as torch does, and CuPy's in an exported package; Python's `random.randint` in host
code from Python's own."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np

# the significand's bits: rand's values are multiples of 2**-bits, exact and below 1
_SIGNIFICAND = {"float16": 11, "bfloat16": 8, "float32": 24}


def draw(xp: Any, kind: str, shape: tuple[int, ...], dtype: np.dtype, low: int = 0,
         high: int = 1) -> Any:
    """An `xp` array (`xp` is numpy or cupy) of `kind`: "randint" in [low, high), "rand" in
    [0, 1), "randn" standard normal, of `dtype`."""
    if kind == "pyrandint":  # Python's generator (`random.seed` holds)
        return xp.asarray([random.randrange(low, high) for _ in range(math.prod(shape))],
                          dtype=dtype).reshape(shape)
    if kind == "randint":
        wide = np.uint64 if high > 2**63 else np.int64
        return xp.random.randint(low, high, size=shape, dtype=wide).astype(dtype)
    if kind == "randn":
        return xp.random.standard_normal(shape).astype(dtype)
    bits = _SIGNIFICAND.get(np.dtype(dtype).name)
    if bits is None:  # float64
        return xp.random.random_sample(shape).astype(dtype)
    return (xp.random.randint(0, 2**bits, size=shape, dtype=np.int64) * 2.0**-bits
            ).astype(dtype)
