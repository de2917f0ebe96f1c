"""Compile-time numbers as the kernel body sees them: Python numbers that also take `.to`.

Triton's `tl.constexpr` values take `.to(dtype)` (Liger-Kernel's RMSNorm writes
`offset = offset.to(X_row_dtype)` with `offset: tl.constexpr`). A compile-time int or float
argument reaches the body as a `ConstInt` or `ConstFloat`: a subclass of `int` or `float` whose
operators are Python's (they return plain numbers, weak in tile arithmetic as any Python number
is), with `.to(dtype)` (also spelled `.cast` and `.astype`) giving a typed scalar of that dtype.
They pickle as the plain number. `bool` cannot be subclassed, so a bool stays a bool.
"""

from __future__ import annotations

from typing import Any

from tiledsl.frontend.values import TileValue, as_dtype, cast, to_value


def _to(number: int | float, dtype: Any, what: str) -> TileValue:
    """`number` cast to `dtype`: a typed (not weak) scalar."""
    return TileValue(cast(to_value(number), as_dtype(dtype, what)).value, weak=False)


class _Const:
    """`.to(dtype)` (also `.cast`, `.astype`) for a Python number type `_kind`."""

    __slots__ = ()
    _kind: type = int

    def to(self, dtype: Any) -> TileValue:
        return _to(self._kind(self), dtype, "to")

    def cast(self, dtype: Any) -> TileValue:
        return _to(self._kind(self), dtype, "cast")

    def astype(self, dtype: Any) -> TileValue:
        return _to(self._kind(self), dtype, "astype")

    def __reduce__(self) -> tuple:
        return (self._kind, (self._kind(self),))


class ConstInt(_Const, int):
    """A compile-time int argument: an int that also takes `.to(dtype)`."""

    __slots__ = ()
    _kind = int


class ConstFloat(_Const, float):
    """A compile-time float argument: a float that also takes `.to(dtype)`."""

    __slots__ = ()
    _kind = float


def as_seen(value: Any) -> Any:
    """The compile-time argument `value` as the body receives it."""
    if type(value) is int:
        return ConstInt(value)
    if type(value) is float:
        return ConstFloat(value)
    return value
