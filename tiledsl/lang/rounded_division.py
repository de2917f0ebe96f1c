"""`td.div_rz(x, y)`: libdevice's `div_rz`, `x / y` rounded toward zero (FlagGems' trunc_divide
computes `trunc(div_rz(x, y))`, which `trunc(x / y)` gets wrong where the nearest quotient
rounds up to an integer: 2.9999999 rounding to 3.0).

It is built of ops every backend has, so the NumPy backend and the generated Triton agree to
the bit:

- float32 operands (and 16-bit ones, which compute in float32 and give it, as Triton's `/`
  does): the quotient in float64, then to float32 toward zero. A float32 quotient lies at
  least 2**-48 of itself from a float32 value unless it is one, so the float64 quotient
  (within 2**-53) rounds toward zero as the exact one does.
- float64 operands: the nearest quotient q, stepped one value toward zero where it is past
  the exact one, which the sign of the exact remainder `x - q * y` tells (Dekker's product
  makes it exact: no fused multiply-add needed).

Where the nearest quotient is past the exact one, the next value toward zero is its bits
minus one (sign and magnitude): an infinity from a finite quotient becomes the largest finite
value, as rounding toward zero gives.
"""

from __future__ import annotations

from typing import Any

from tiledsl import dtypes
from tiledsl.errors import DTypeError
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, cast, coerce
from tiledsl.lang.bits import bitcast
from tiledsl.lang.language import where
from tiledsl.lang.mathlib import isfinite, isinf

_SPLIT = 134217729.0  # 2**27 + 1: Dekker's split of a float64 into two halves


def div_rz(x: Any, y: Any) -> TileValue:
    """`x / y` rounded toward zero (see the module's docstring)."""
    tr = current("td.div_rz()")
    (a, b), _ = coerce([x, y])
    if not a.dtype.is_float:
        tr.fail(DTypeError, f"td.div_rz() divides floats, got {a.dtype}",
                hint="cast first: td.div_rz(x.to(td.float32), y.to(td.float32))")
    if a.dtype == dtypes.float64:
        q = a / b
        overflow = isinf(q) & isfinite(a) & isfinite(b) & (b != 0)
        return _toward_zero(q, _past(a, b, q) | overflow)
    a, b = cast(a, dtypes.float32), cast(b, dtypes.float32)
    wide = cast(a, dtypes.float64) / cast(b, dtypes.float64)
    q = cast(wide, dtypes.float32)
    return _toward_zero(q, abs(cast(q, dtypes.float64)) > abs(wide))


def _past(x: TileValue, y: TileValue, q: TileValue) -> TileValue:
    """Whether the nearest quotient q of float64s is past x / y: the exact remainder
    x - q * y (x - p exact, p = q * y rounded, e its error by Dekker's product) has the sign
    opposite to x's."""
    qh, ql = _halves(q)
    yh, yl = _halves(y)
    p = q * y
    e = ((qh * yh - p) + qh * yl + ql * yh) + ql * yl
    r = (x - p) - e
    return (r != 0) & ((r < 0) == (x > 0))


def _halves(v: TileValue) -> tuple[TileValue, TileValue]:
    c = v * _SPLIT
    high = c - (c - v)
    return high, v - high


def _toward_zero(q: TileValue, past: TileValue) -> TileValue:
    """q, or the next value toward zero where `past` holds."""
    bits = dtypes.int64 if q.dtype == dtypes.float64 else dtypes.int32
    return where(past, bitcast(bitcast(q, bits) - 1, q.dtype), q)
