"""Sizes that remember where they came from: a kernel's output shapes as functions of its
arguments' shapes (for torch.compile with dynamic shapes).

A kernel is traced for concrete shapes. To tell torch.compile the shapes of its outputs for
*every* input shape, `TileKernel._shape_function` traces it once more with each argument size
replaced by a `SymDim`: an int with the value of that size that also carries an expression
(`("dim", argument, axis)`). Python arithmetic on SymDims (`+ - * // %`, unary minus) builds
expressions, so `td.empty((m // 2, -(-n // 4)))` yields output sizes that can be evaluated on
torch's symbolic sizes. Comparisons (an `if`, `min`, `max`) are recorded as guards with their
outcome; the caller re-evaluates them on symbolic sizes, so torch.compile specializes the graph
on exactly those conditions and recompiles when one flips.

A size that leaves the arithmetic through Python (`int()`, `float()`, `/`, `**`, bit operations)
is counted as a conversion: an output size that is then a plain int may depend on the inputs,
and the caller must specialize on all of them. NumPy reading a SymDim (`np.prod(x.shape)`)
cannot be seen; such kernels belong under `torch.compile(dynamic=False)` (README).
"""

from __future__ import annotations

import operator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from tiledsl.errors import Loc, user_loc

# ("dim", argument index, axis) | ("int", value) | (operator, lhs, rhs)
Expr = tuple

OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
    "%": operator.mod, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


@dataclass
class Recording:
    """What a trace on SymDims did with them besides arithmetic."""

    guards: dict[tuple[str, Expr, Expr], bool] = field(default_factory=dict)
    conversions: list[Loc | None] = field(default_factory=list)  # the user's lines


_active: list[Recording] = []


@contextmanager
def recording() -> Iterator[Recording]:
    rec = Recording()
    _active.append(rec)
    try:
        yield rec
    finally:
        _active.pop()


def _plain(x: int) -> int:
    return int.__int__(x)


def expr_of(x: Any) -> Expr | None:
    """A size's expression (a plain int is a constant); None for anything else."""
    if isinstance(x, SymDim):
        return x.expr
    if isinstance(x, (int, np.integer)):
        return ("int", int(x))
    return None


def _converted() -> None:
    if _active:
        _active[-1].conversions.append(user_loc(2))


class SymDim(int):
    """An argument size (or arithmetic on sizes) that knows its expression."""

    expr: Expr

    def __new__(cls, value: int, expr: Expr) -> SymDim:
        self = super().__new__(cls, value)
        self.expr = expr
        return self

    def __reduce__(self) -> Any:  # pickles (and copies) as the plain int it stands for
        return (int, (_plain(self),))

    __hash__ = int.__hash__

    def __neg__(self) -> SymDim:
        return SymDim(-_plain(self), ("-", ("int", 0), self.expr))

    def __pos__(self) -> SymDim:
        return self

    def __abs__(self) -> SymDim:
        return self if self >= 0 else -self  # the comparison is a guard

    def __ceil__(self) -> SymDim:
        return self

    __floor__ = __trunc__ = __ceil__

    def __round__(self, ndigits: int | None = None) -> Any:
        return self if ndigits is None or ndigits >= 0 else _lost(int.__round__, self, ndigits)

    def __int__(self) -> int:
        _converted()
        return _plain(self)

    def __float__(self) -> float:
        _converted()
        return float(_plain(self))


def _arith(op: str, reflected: bool) -> Callable[[SymDim, Any], Any]:
    f = OPS[op]

    def method(self: SymDim, other: Any) -> Any:
        o = expr_of(other)
        if o is None:
            if isinstance(other, float):  # m * 1.5: the result is no longer a size
                _converted()
                return f(float(_plain(self)), other) if not reflected else \
                    f(other, float(_plain(self)))
            return NotImplemented
        v = _plain(other) if isinstance(other, SymDim) else int(other)
        a, b = (o, self.expr) if reflected else (self.expr, o)
        x, y = (v, _plain(self)) if reflected else (_plain(self), v)
        return SymDim(f(x, y), (op, a, b))
    return method


def _compare(op: str) -> Callable[[SymDim, Any], Any]:
    f = OPS[op]

    def method(self: SymDim, other: Any) -> Any:
        o = expr_of(other)
        if o is None:
            return NotImplemented
        result = bool(f(_plain(self), _plain(other) if isinstance(other, SymDim) else int(other)))
        if _active and self.expr != o:
            _active[-1].guards[(op, self.expr, o)] = result
        return result
    return method


def _lost(f: Callable[..., Any], *args: Any) -> Any:
    _converted()
    return f(*(_plain(a) if isinstance(a, SymDim) else a for a in args))


def _lossy(name: str) -> Callable[..., Any]:
    f = getattr(int, name)
    return lambda *args: _lost(f, *args)


for _op, _name in [("+", "add"), ("-", "sub"), ("*", "mul"), ("//", "floordiv"), ("%", "mod")]:
    setattr(SymDim, f"__{_name}__", _arith(_op, False))
    setattr(SymDim, f"__r{_name}__", _arith(_op, True))
for _op, _name in [("==", "eq"), ("!=", "ne"), ("<", "lt"), ("<=", "le"), (">", "gt"),
                   (">=", "ge")]:
    setattr(SymDim, f"__{_name}__", _compare(_op))
for _name in ["truediv", "pow", "divmod", "and", "or", "xor", "lshift", "rshift"]:
    setattr(SymDim, f"__{_name}__", _lossy(f"__{_name}__"))
    setattr(SymDim, f"__r{_name}__", _lossy(f"__r{_name}__"))


def evaluate(e: Expr, size: Callable[[int, int], Any]) -> Any:
    """`e` with `size(argument, axis)` for each argument size (ints, or torch's SymInts)."""
    if e[0] == "dim":
        return size(e[1], e[2])
    if e[0] == "int":
        return e[1]
    return OPS[e[0]](evaluate(e[1], size), evaluate(e[2], size))


@dataclass(frozen=True)
class ShapeFunction:
    """A kernel's output shapes as expressions over its argument sizes, valid while each guard
    (operator, lhs, rhs) has its recorded outcome. `followed` is False when a size left the
    arithmetic (first at `lost`, the user's line) and an output size is a plain int: then only
    the traced shapes are known."""

    outputs: tuple[tuple[Expr, ...], ...]
    guards: tuple[tuple[str, Expr, Expr, bool], ...]
    lost: Loc | None
    followed: bool

    def shapes(self, size: Callable[[int, int], Any]) -> list[tuple[Any, ...]]:
        return [tuple(evaluate(e, size) for e in out) for out in self.outputs]

    def holds(self, size: Callable[[int, int], Any]) -> bool:
        """Whether every guard has its recorded outcome (on symbolic sizes, torch.compile
        guards on each)."""
        return all(bool(OPS[op](evaluate(a, size), evaluate(b, size))) == outcome
                   for op, a, b, outcome in self.guards)
