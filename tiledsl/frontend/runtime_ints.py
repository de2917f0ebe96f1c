"""A Python int given to a runtime (not `tl.constexpr`) parameter of a launched `@triton.jit`
kernel (frontend/launches.py): `RuntimeInt`.

Triton passes such an int as an int32 scalar (int64 if it does not fit), so the body's `n // 2`
and `n % 2` are C's, rounding toward zero (`-7 // 2` is -3), where Python's round down (-4).
The value is known while tiledsl traces, so it stays an int (a shape, a `range` bound and a
static index take it as one); only its division and remainder, and those of the ints computed
from it, are Triton's. A tile value meeting it computes as with any scalar argument.
"""

from __future__ import annotations

from typing import Any, Callable


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class RuntimeInt(int):
    """An int that divides as Triton's int32 scalars do (see the module's docstring)."""

    def __floordiv__(self, o: Any) -> Any:
        return RuntimeInt(_c_div(int(self), int(o))) if _int(o) else NotImplemented

    def __rfloordiv__(self, o: Any) -> Any:
        return RuntimeInt(_c_div(int(o), int(self))) if _int(o) else NotImplemented

    def __mod__(self, o: Any) -> Any:
        return RuntimeInt(int(self) - _c_div(int(self), int(o)) * int(o)) if _int(o) \
            else NotImplemented

    def __rmod__(self, o: Any) -> Any:
        return RuntimeInt(int(o) - _c_div(int(o), int(self)) * int(self)) if _int(o) \
            else NotImplemented

    def __neg__(self) -> RuntimeInt:
        return RuntimeInt(-int(self))

    def __abs__(self) -> RuntimeInt:
        return RuntimeInt(abs(int(self)))

    def to(self, dtype: Any) -> Any:
        """`n.to(tl.int64)`: the scalar cast, as a runtime scalar casts."""
        from tiledsl.frontend.values import as_dtype, constant
        return constant(int(self), as_dtype(dtype, "n.to"))


def _keeps(name: str) -> Callable[..., Any]:
    """int's `name` (`+`, `-`, `*`) whose int result stays a RuntimeInt."""
    method = getattr(int, name)

    def op(self: RuntimeInt, o: Any) -> Any:
        out = method(self, o)
        return RuntimeInt(out) if _int(out) and _int(o) else out
    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__"):
    setattr(RuntimeInt, _name, _keeps(_name))


def runtime(v: Any) -> Any:
    """A launch's value for a runtime parameter: a Python int (a stride host code read, a
    compile-time argument) as a RuntimeInt."""
    return RuntimeInt(v) if _int(v) else v
