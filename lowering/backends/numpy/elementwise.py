"""NumPy implementations of the IR's elementwise ops: the reference semantics of each one.

16-bit floats are computed in float32 and rounded once at the end, as GPUs do.
Constant folding uses the same table, so a folded constant equals the computed value.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _erf_array(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf(np.asarray(x, dtype=np.float64)), dtype=np.float64)  # 0-d: a float


def _power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """np.power, elementwise as C's pow: NumPy computes a power whose exponent is one broadcast
    0.5 as a square root ((-inf) ** 0.5 is then NaN, not inf), so a tile exponent is
    materialized, and layouts cannot change results. (A constant `x ** 0.5` is a square root:
    executor.py.)"""
    shape = np.broadcast_shapes(np.shape(x), np.shape(y))
    return np.power(x, np.array(np.broadcast_to(y, shape)))


def _fma(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """x * y + z rounded once: computed in float64 (exact products of 16- and 32-bit floats),
    then rounded to the result dtype; float64 rounds the product and the sum (NumPy has no
    fused multiply-add: a GPU's fma can differ by an ulp)."""
    wide = np.promote_types(x.dtype, np.float64)
    return x.astype(wide) * y.astype(wide) + z.astype(wide)


BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.mod, "pow": _power,
    "maximum": np.maximum, "minimum": np.minimum,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
    # NumPy's shifts: by the bit width or more (or a negative amount) give 0, and -1 for a
    # negative signed int shifted right (math_rules.py writes the same rule in Triton)
    "shl": np.left_shift, "shr": np.right_shift, "atan2": np.arctan2,
    "hypot": np.hypot, "copysign": np.copysign, "fmod": np.fmod,
}

UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "neg": np.negative, "abs": np.abs, "not": np.invert, "exp": np.exp, "exp2": np.exp2,
    "log": np.log, "sqrt": np.sqrt, "rsqrt": _rsqrt, "tanh": np.tanh, "sigmoid": _sigmoid,
    "erf": _erf_array,
    "log2": np.log2, "log1p": np.log1p, "expm1": np.expm1, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "log10": np.log10, "cbrt": np.cbrt, "floor": np.floor, "ceil": np.ceil, "round": np.rint,
    "trunc": np.trunc,
    "sign": np.sign, "isnan": np.isnan, "isinf": np.isinf,
}

TERNARY: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {"fma": _fma}


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """16-bit floats (float16, bfloat16) compute in float32."""
    return np.dtype(np.float32) if dtype.kind in "fV" and dtype.itemsize == 2 else dtype


def apply(name: str, operands: list[np.ndarray], out_dtype: np.dtype) -> np.ndarray:
    """Evaluate elementwise op `name` and return an array of `out_dtype`."""
    with np.errstate(all="ignore"):
        return compute(name, operands, out_dtype)


def compute(name: str, operands: list[np.ndarray], out_dtype: np.dtype) -> np.ndarray:
    """`apply` for a caller that already ignores floating-point errors (the executor)."""
    return evaluate(function_of(name), operands, out_dtype)


def function_of(name: str) -> Callable[..., Any]:
    """The NumPy function of elementwise op `name`."""
    return TERNARY.get(name) or BINARY.get(name) or UNARY[name]


def evaluate(f: Callable[..., Any], operands: list[np.ndarray], out_dtype: np.dtype
             ) -> np.ndarray:
    """`f` of the operands, computed in the first one's compute dtype, as `out_dtype`."""
    work = compute_dtype(operands[0].dtype)
    return np.asarray(f(*[o.astype(work, copy=False) for o in operands])).astype(
        out_dtype, copy=False)


ELEMENTWISE = frozenset(BINARY) | frozenset(UNARY) | frozenset(TERNARY)
