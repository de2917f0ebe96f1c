"""Bounded and stepped slices as tensor indices: `out[tm, :n1]`, `out[tm, n1:]`, `x[tm, ::2]`.

A slice with static bounds is a constant-size dimension of the tile, as `:` is: a load or store
lists it among its `full` dimensions (so the tile's shape and lanes are counted the same way)
and records where it starts and how it steps in the `slices` attribute, one
`(dim, start, size, step)` entry per slice that is not the whole dimension. Element `j` of the
tile's axis is element `start + j * step` of the tensor's dimension; every element lies inside
the dimension, so a slice needs no mask beyond a constant dimension's padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from tiledsl.errors import IRError


@dataclass(frozen=True)
class Slice:
    """The elements `start, start + step, ...` (`size` of them) of one tensor dimension."""

    start: int
    size: int
    step: int

    def indices(self) -> range:
        return range(self.start, self.start + self.size * self.step, self.step)

    @property
    def last(self) -> int:
        return self.start + (self.size - 1) * self.step


def normalize(s: slice, extent: int) -> Slice | None:
    """A Python slice of a dimension of `extent` elements as a Slice; None when it selects no
    element. Raises ValueError for bounds or a step that are not ints, or a step below 1."""
    for part in (s.start, s.stop, s.step):
        if part is not None and (isinstance(part, bool) or not hasattr(part, "__index__")):
            raise ValueError(f"slice bounds must be ints known when tracing, got {part!r}")
    step = 1 if s.step is None else s.step
    if step < 1:
        raise ValueError(f"a slice's step must be at least 1, got {int(step)}")
    # Python's rule, in arithmetic a size that remembers its origin (symdims.py) follows
    start, stop = _bound(s.start, 0, extent), _bound(s.stop, extent, extent)
    size = max(0, -(-(stop - start) // step))
    return Slice(start, size, step) if size else None


def _bound(b: Any, default: int, extent: int) -> int:
    """A slice bound counted from the end when negative, clipped to [0, extent]."""
    if b is None:
        return default
    return min(max(b + extent if b < 0 else b, 0), extent)


def slices_of(attrs: dict[str, Any]) -> dict[int, Slice]:
    """The slices of a load's or store's attributes, by tensor dimension."""
    return {d: Slice(a, n, k) for d, a, n, k in attrs.get("slices", ())}


def to_attr(slices: dict[int, Slice]) -> tuple[tuple[int, int, int, int], ...]:
    return tuple((d, s.start, s.size, s.step) for d, s in sorted(slices.items()))


def check(slices: dict[int, Slice], full: Sequence[int], shape: Sequence[int]) -> None:
    """Raise IRError unless every slice is a `full` dimension and lies inside it."""
    for d, s in slices.items():
        if d not in full or not 0 <= d < len(shape):
            raise IRError(f"slice of dimension {d} is not among the whole dimensions {tuple(full)}")
        if s.size < 1 or s.step < 1 or s.start < 0 or s.last >= shape[d]:
            raise IRError(f"slice {s} does not lie inside dimension {d} of size {shape[d]}")
