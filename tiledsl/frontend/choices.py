"""A tensor chosen by a runtime condition: FlagGems' cat and stack pick their input by program,

    if pid_y == 0:
        in_ptr = in_ptr_a
    elif pid_y == 1:
        in_ptr = in_ptr_b
    ...
    td.store(out + idx, td.load(in_ptr + idx, mask=mask), mask=mask)

and `td.where(i == 0, x_ptr0, x_ptr1)` does the same. Triton's pointer is then a runtime value;
a tiledsl access names its tensor, so the name holds a `Choice`: each tensor (or pointer into
it) with the condition under which it was chosen, the conditions exclusive. An access through
it is one access per option, masked by its condition: a load selects the option's values, a
store writes under its condition only (atomics take one tensor). A program whose condition
picks one tensor touches that tensor alone, which the race check sees in the masks.
"""

from __future__ import annotations

from typing import Any, Callable

from tiledsl.errors import TraceError
from tiledsl.frontend.pointers import Pointer
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, TileValue, to_value, where

# (condition: a bool scalar, or None for always; a Tensor or a Pointer)
Option = tuple["TileValue | None", Any]


class Choice:
    """Tensors (or pointers) with the exclusive conditions under which each was chosen."""

    __slots__ = ("options",)

    def __init__(self, options: list[Option]) -> None:
        self.options = options

    @property
    def dtype(self) -> Any:
        kinds = {str(p.dtype) for _, p in self.options}
        if len(kinds) > 1:
            current().fail(TraceError, "the tensors chosen by a runtime condition have the "
                           f"dtypes {', '.join(sorted(kinds))}: which dtype is meant depends on "
                           "the program", hint="give them one dtype on the host first "
                                               "(t.to(dtype)), as FlagGems' cat does")
        return self.options[0][1].dtype

    type = dtype

    def __add__(self, other: Any) -> Choice:
        return Choice([(c, p + other) for c, p in self.options])

    __radd__ = __add__

    def __sub__(self, other: Any) -> Choice:
        return Choice([(c, p - other) for c, p in self.options])

    def __getitem__(self, index: Any) -> Any:
        """`p[:, None]` of chosen pointers; `src[t]` of chosen tensors: a load per option."""
        if all(isinstance(p, Pointer) for _, p in self.options):
            return Choice([(c, p[index]) for c, p in self.options])
        self._tensors()
        return load(self, None, 0, lambda p, m, _: p.load(index) if m is None else
                    p.load(index, m, 0))

    def __setitem__(self, index: Any, value: Any) -> None:
        """`out[t] = v` into a chosen tensor: a store per option, under its condition."""
        self._tensors()
        store(self, value, None, lambda p, v, m: p.store(index, v, m))

    def _tensors(self) -> None:
        if not all(isinstance(p, Tensor) for _, p in self.options):
            current().fail(TraceError, "indexing a choice of tensors and pointers",
                           hint="choose tensors alone, or pointers alone")

    def __repr__(self) -> str:
        return "Choice(" + ", ".join(repr(p) for _, p in self.options) + ")"

    def _other(self, *_: Any) -> Any:
        current().fail(TraceError, "a tensor chosen by a runtime condition takes + and - of "
                       "integer offsets, and td.load, td.store and the atomics",
                       hint="index it through a pointer: td.load(chosen + offsets, mask=...)")

    __mul__ = __rmul__ = __truediv__ = __floordiv__ = __mod__ = __bool__ = _other
    __hash__ = object.__hash__


def options_of(v: Any) -> list[Option] | None:
    """`v`'s options (a tensor or a pointer: one, always chosen); None for other values."""
    if isinstance(v, Choice):
        return v.options
    if isinstance(v, (Tensor, Pointer)):
        return [(None, v)]
    return None


def choose(cond: TileValue, a: Any, b: Any) -> Choice:
    """`a` where the scalar `cond` holds, else `b` (tensors, pointers or choices), by
    `td.where(cond, a, b)`. (An `if` yields its options' conditions instead: branches.py.)"""
    first, second = options_of(a), options_of(b)
    assert first is not None and second is not None
    no = ~cond
    return Choice([(_both(cond, c), p) for c, p in first] + [(_both(no, c), p) for c, p in second])


def _both(a: TileValue, b: TileValue | None) -> TileValue:
    return a if b is None else a & b


def _with(mask: Any, c: TileValue | None) -> Any:
    return mask if c is None else c if mask is None else to_value(mask) & c


def load(choice: Choice, mask: Any, other: Any, load_one: Callable[..., TileValue]
         ) -> TileValue:
    """One load per option, each masked by its condition; the chosen option's values."""
    choice.dtype  # noqa: B018 (one dtype, or the error that says so)
    out: TileValue | None = None
    for c, p in choice.options:
        v = load_one(p, _with(mask, c), other)
        out = v if out is None or c is None else where(c, v, out)
    assert out is not None
    return out


def store(choice: Choice, value: Any, mask: Any, store_one: Callable[..., None]) -> None:
    """One store per option, each masked by its condition."""
    choice.dtype  # noqa: B018 (one dtype, or the error that says so)
    for c, p in choice.options:
        store_one(p, value, _with(mask, c))

