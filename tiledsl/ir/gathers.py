"""Data-dependent indexing: where the axes of a load or store through index tiles go.

A tensor is indexed per dimension by a range (a tile: like a slice, one axis of its block), `:`
(the whole dimension, one axis), an integer scalar (no axis) or an *index tile*, an integer tile
of any rank whose elements are indices into that dimension (a gather; a scatter when stored
through). The result's shape is NumPy's advanced indexing with ranges as slices:

- the index tiles (and the scalars, once there is an index tile) broadcast together to one shape
  B, as NumPy's integer arrays do: `logits[tn.index, labels[tn]]` is one element per row;
- if those dimensions are adjacent, B takes their place (`table[idx[tb], te]` is `(tb, te)`);
  otherwise B comes first (`x[i, tm, j]` with index tiles i and j is `B + (tm,)`).

An index tile's lanes that are out of range of its own tile do not access memory (the
mask-ragged-edges pass adds them to the access's mask); an index outside the dimension is an
error on the backends that check accesses, masked on Triton.

A load or store may also carry a *mask* (`td.load(x, [i, j], mask=m, other=0)`): a bool tile of
the access's shape, the operand after the indices (before a store's value), flagged by the
attribute `mask`. Masked-off elements are not read (they take `other`) or written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from tiledsl.errors import ShapeError
from tiledsl.ir.core import Op, Value
from tiledsl.ir.types import Dim, RangeType, TensorType, TileType, Type


def is_index_tile(t: Type) -> bool:
    """Whether an index operand of type `t` is an index tile (a gather), not a scalar."""
    return isinstance(t, TileType) and t.rank > 0 and t.dtype.is_int


@dataclass(frozen=True)
class Layout:
    """The tile shape of an access and, per tensor dimension, the result axes its index fills:
    one for a range or `:`, none for a scalar, an index tile's rank for an index tile."""

    shape: tuple[Dim, ...]
    axes: tuple[tuple[int, ...], ...]


def broadcast_dims(shapes: Sequence[tuple[Dim, ...]]) -> tuple[Dim, ...] | None:
    """NumPy's broadcast of tile shapes (block symbols broadcast only with themselves and 1)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def layout(tensor: TensorType, indices: Sequence[Type], full: Sequence[int]) -> Layout:
    """The layout of `tensor[indices]` (`full`: the dimensions taken whole by `:`)."""
    kinds: list[Type | None] = []  # per dimension: its index's type, None for `:`
    it = iter(indices)
    for d in range(len(tensor.shape)):
        kinds.append(None if d in full else next(it))
    gathers = [t for t in kinds if t is not None and is_index_tile(t)]
    advanced = [d for d, t in enumerate(kinds)
                if gathers and t is not None and not isinstance(t, RangeType)]
    b = broadcast_dims([t.shape for t in gathers])  # type: ignore[union-attr]
    if b is None:
        raise ShapeError("index tiles of shapes " + " and ".join(
            str(t.shape) for t in gathers) + " do not broadcast")  # type: ignore[union-attr]
    together = advanced == list(range(advanced[0], advanced[-1] + 1)) if advanced else True
    shape: list[Dim] = [] if together else list(b)
    at = 0  # where B begins
    axes: list[tuple[int, ...]] = []
    for d, t in enumerate(kinds):
        if together and advanced and d == advanced[0]:
            at = len(shape)
            shape += b
        if t is None or isinstance(t, RangeType):
            axes.append((len(shape),))
            shape.append(tensor.shape[d] if t is None else t.block)
        elif is_index_tile(t):
            rank = t.rank  # type: ignore[union-attr]
            axes.append(tuple(at + len(b) - rank + a for a in range(rank)))
        else:
            axes.append(())
    return Layout(tuple(shape), tuple(axes))


def written_values(op: Op) -> int:
    """How many value operands end an access: none for a load, one for a store, one or two for
    an atomic (cas compares, then writes)."""
    if op.name == "atomic":
        return 2 if op.attrs["kind"] == "cas" else 1
    return int(op.name == "store")


def access_parts(op: Op) -> tuple[list[Value], Value | None]:
    """A load's, store's or atomic's index operands and its mask (None when it has none)."""
    end = len(op.operands) - written_values(op)
    if op.attrs.get("mask"):
        return op.operands[1:end - 1], op.operands[end - 1]
    return op.operands[1:end], None


def gathers(op: Op) -> bool:
    """Whether a load or store indexes a dimension with an index tile."""
    return any(is_index_tile(i.type) for i in access_parts(op)[0])


def op_layout(op: Op) -> Layout:
    """The layout of a load's or store's access."""
    tensor = op.operands[0].type
    assert isinstance(tensor, TensorType)
    return layout(tensor, [i.type for i in access_parts(op)[0]], op.attrs.get("full", ()))
