"""Shifted tiles: a tile moved by an integer as a tensor index, `x[tm + 1, tn]`, `x[th + r, :]`.

`tm + k` (k a Python int or an integer scalar: a kernel argument, a loaded value) is a tile of
tm's block size whose lane i indexes element `tm.index[i] + k`. Lanes that fall outside the
tensor's dimension (below 0, or at or past its size) are masked: a load reads 0 there (the
zero padding of a stencil or a 'same' convolution), a store drops them. Lanes past the tile's own
range (its ragged edge) stay masked as for the unshifted tile. A shift states the intent to move
the window, so a shifted tile may index a dimension of another size than the one it was made
for (`out[tm, tn + n1]` with tn over n1 < out.shape[1]; `tn + 0` indexes without moving); an
unshifted tile must still match its dimension exactly, and a static shift whose window misses
the dimension entirely is an error.

values.py makes shifted tiles (`Tile.__add__`), so this module does not import it: it computes
with tile values through their operators and tells them by their IR type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tiledsl import dtypes
from tiledsl.errors import TraceError
from tiledsl.ir.core import Value
from tiledsl.ir.types import RangeType, TileType, Type
from tiledsl.frontend.tracer import current

if TYPE_CHECKING:
    from tiledsl.frontend.values import Tile, TileValue


class ShiftedTile:
    """`tile + static + dynamic`: only a tensor index (and `.index`, the indices it covers)."""

    __slots__ = ("tile", "static", "dynamic")

    def __init__(self, tile: Tile, static: int = 0, dynamic: TileValue | None = None) -> None:
        self.tile = tile
        self.static = static
        self.dynamic = dynamic

    @property
    def label(self) -> str:
        return self.tile.label

    def __repr__(self) -> str:
        moved = f"{self.static:+d}" + (" + a runtime scalar" if self.dynamic is not None else "")
        return f"ShiftedTile({self.tile.label} {moved})"

    def moved(self, amount: Any, sign: int, what: str) -> ShiftedTile:
        """This tile moved by `sign * amount` (a Python int or an integer scalar)."""
        if isinstance(amount, (int, np.integer)) and not isinstance(amount, (bool, np.bool_)):
            return ShiftedTile(self.tile, self.static + sign * int(amount), self.dynamic)
        t = _traced_type(amount)
        if isinstance(t, TileType) and t.shape == () and t.dtype.is_int:
            if self.dynamic is None:
                dynamic = amount if sign > 0 else 0 - amount
            else:
                dynamic = self.dynamic + amount if sign > 0 else self.dynamic - amount
            return ShiftedTile(self.tile, self.static, dynamic)
        _refuse(self.label, what, amount)

    def __add__(self, o: Any) -> ShiftedTile: return self.moved(o, 1, "+")
    def __radd__(self, o: Any) -> ShiftedTile: return self.moved(o, 1, "+")
    def __sub__(self, o: Any) -> ShiftedTile: return self.moved(o, -1, "-")

    def _no_math(self, *_: Any) -> Any:
        current().fail(TraceError, f"a shifted tile ({self.label} plus an offset) only indexes "
                       "tensors", hint=f"for the indices it covers use {self.label}.index plus "
                                       "the offset")

    __rsub__ = __mul__ = __rmul__ = __neg__ = _no_math
    __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __index__ = _no_math  # type: ignore[assignment]

    @property
    def index(self) -> TileValue:
        """The indices the shifted lanes cover (as `tile.index` plus the offset)."""
        out = self.tile.index + self.static if self.static else self.tile.index
        return out + self.dynamic if self.dynamic is not None else out

    def operand(self) -> Value:
        """The `tile.shift` value that indexes a tensor with this tile."""
        tr = current()
        if self.dynamic is None:
            dtype = dtypes.int32 if abs(self.static) < 2**31 else dtypes.int64
            shift = tr.emit("const", [], {"value": self.static}, [TileType((), dtype)])[0]
        else:
            shift = (self.dynamic + self.static if self.static else self.dynamic).value
        return tr.emit("tile.shift", [self.tile.value, shift], hint=f"{self.label}_shifted")[0]


def shift(tile: Tile, amount: Any, sign: int, what: str) -> ShiftedTile:
    """`tile + amount` (sign 1) or `tile - amount` (sign -1)."""
    return ShiftedTile(tile).moved(amount, sign, what)


def _traced_type(x: Any) -> Type | None:
    """The IR type of a traced object: TileType for a tile value, RangeType for a tile; else
    None."""
    v = getattr(x, "value", None)
    return v.type if isinstance(v, Value) else None


def _refuse(label: str, what: str, amount: Any) -> None:
    tr = current()
    t = _traced_type(amount)
    if isinstance(amount, ShiftedTile) or isinstance(t, RangeType):
        tr.fail(TraceError, f"tile '{label}' {what} a tile: a tile can only be shifted by an int "
                "or an integer scalar", hint=f"for index arithmetic use {label}.index "
                f"{what} {amount.label}.index")
    kind = f"a {t} value" if isinstance(t, TileType) else \
        f"{type(amount).__name__} {amount!r}"
    tr.fail(TraceError, f"tile '{label}' {what} {kind}: a tile can only be shifted by an int or "
            "an integer scalar (x[tm + 1], x[tm - k])",
            hint=f"use {label}.index, {label}.begin or {label}.size for arithmetic")


def is_shifted(v: Value) -> bool:
    t = v.type
    return isinstance(t, RangeType) and t.shifted


def static_shift(v: Value) -> int | None:
    """A `tile.shift` value's offset when it is a constant, else None."""
    amount = v.owner.operands[1] if v.owner is not None else None
    owner = amount.owner if amount is not None else None
    return int(owner.attrs["value"]) if owner is not None and owner.name == "const" else None


def zero(dtype: dtypes.DType) -> object:
    """What a shifted load reads outside its tensor: 0 of its dtype."""
    return False if dtype.is_bool else 0.0 if dtype.is_float else 0
