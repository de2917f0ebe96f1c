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


def _to(x: TileValue, dtype: Any, bitcast: bool = False) -> TileValue:
    """`x.to(dtype)`, and Triton's `x.to(dtype, bitcast=True)`, which is `td.bitcast`."""
    return _bitcast(x, dtype) if bitcast else _astype(x, dtype)


_bitcast, _astype = bitcast, TileValue.to
TileValue.to = _to  # type: ignore[method-assign,assignment]
