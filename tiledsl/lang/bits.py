"""Bit operations: `td.bitcast`. (`<<` and `>>` are TileValue's operators: the `shl` and `shr`
ops, arithmetic on signed ints and logical on unsigned ones, as NumPy; a shift by the bit width
or more, or by a negative amount, gives 0, or -1 for a negative signed int shifted right, as
NumPy's `np.left_shift` and `np.right_shift` define it.)"""

from __future__ import annotations

from typing import Any

from tiledsl.errors import DTypeError
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, as_dtype, to_value


def bitcast(x: Any, dtype: Any) -> TileValue:
    """The bits of `x` read as `dtype`, of the same width (`x.view(dtype)` in NumPy,
    `x.to(dtype, bitcast=True)` in Triton): `td.bitcast(f, td.uint32)` is a float32's bits."""
    tr = current("td.bitcast()")
    v = to_value(x)
    d = as_dtype(dtype, "td.bitcast")
    if v.weak:
        tr.fail(DTypeError, "td.bitcast() of a Python number, whose dtype is not fixed",
                hint="give it a dtype, e.g. np.float32(1.0)")
    if d.bits != v.dtype.bits or d.is_bool or v.dtype.is_bool:
        tr.fail(DTypeError, f"td.bitcast() from {v.dtype} ({v.dtype.bits} bits) to {d} "
                f"({d.bits} bits): a bitcast keeps the width", hint="convert values with "
                ".astype(...); a bitcast reads the same bits as a dtype of the same width "
                "(bool has no bit pattern of its own: use .astype)")
    if d == v.dtype:
        return v
    return TileValue(tr.emit("bitcast", [v.value], types=[v.type.with_dtype(d)])[0])


def _to(x: TileValue, dtype: Any, fp_downcast_rounding: str | None = None,
        bitcast: bool = False) -> TileValue:
    """`x.to(dtype)`, and Triton's `x.to(dtype, bitcast=True)`, which is `td.bitcast`, and
    `x.to(dtype, fp_downcast_rounding="rtz")` (see `rounded_cast`)."""
    if bitcast:
        return _bitcast(x, dtype)
    return rounded_cast(x, dtype, fp_downcast_rounding) if fp_downcast_rounding is not None \
        else _astype(x, dtype)


def rounded_cast(x: Any, dtype: Any, rounding: str | None) -> TileValue:
    """Triton's `fp_downcast_rounding=` of a cast to a narrower float: "rtne" (round to
    nearest even, every cast's) or "rtz" (toward zero: where the nearest value is farther from
    zero than x, the next one toward zero, found by stepping its bits down by one; past the
    largest finite value that is the largest finite value, as IEEE's rule gives). Any other
    cast with a rounding mode is Triton's error."""
    tr = current("x.to()")
    v = to_value(x)
    d = as_dtype(dtype, "x.to")
    if rounding not in ("rtne", "rtz"):
        tr.fail(DTypeError, f"fp_downcast_rounding={rounding!r}: Triton's modes are 'rtne' and "
                "'rtz'")
    if d == v.dtype:  # (Triton's cast returns x itself first: fla's solve_tril in float32)
        return v
    if not (v.dtype.is_float and d.is_float and d.bits < v.dtype.bits):
        tr.fail(DTypeError, f"fp_downcast_rounding is for casts to a narrower float (Triton's "
                f"rule), not {v.dtype} to {d}", hint="leave it out: other casts round as "
                "NumPy's astype")
    near = _astype(v, d)
    if rounding == "rtne":
        return near
    from tiledsl.frontend.td_names import FUNCTIONS
    bits = as_dtype(f"int{d.bits}", "x.to")
    away = abs(_astype(near, v.dtype)) > abs(v)  # (a NaN compares False: kept)
    return FUNCTIONS["where"](away, _bitcast(_bitcast(near, bits) - 1, d), near)


_bitcast, _astype = bitcast, TileValue.to
TileValue.to = _to  # type: ignore[method-assign,assignment]
