"""The masks of jagged tiles (`td.jagged_tile`, tiledsl/lang/jagged.py), Helion's
`hl.jagged_tile`.

`lengths` is an integer tile over an enclosing tile (one length per row: `nnz` over `tile_b`) or
a scalar. The loop runs over the tiles of `[0, max(lengths))`, a tile loop to a runtime size
(language.py), and each row's lanes at or past its own length are out of range: every load and
store whose index involves the jagged tile (the tile itself, or an index tile computed from
`tk.index`) and whose shape has the lengths' dimension is masked by `tk.index < lengths` placed
along those dimensions; masked loads read 0. An access without the rows' dimension sees the
loop's own bound only (lanes below the longest row). A reduction along the jagged tile's axis
of a value with the rows' dimension counts each row's own lanes only (`jagged_rows`): lanes
past a row's length hold the reduction's identity, so `((v - mean) ** 2).sum(1)` is each row's
own sum of squares.

Helion's jagged_mean, for rows `tile_b` with `nnz` elements each:

    for tile_k in td.jagged_tile(nnz):
        row_sums += td.load(x_flat, [(starts[:, None] + tile_k.index[None, :]) * m]).sum(1)

The masks are built here while tracing, as a user's `mask=` would be (ops `tile.index`, `lt`,
`and`): no backend knows of jagged tiles. The loop registers its range and lengths in
`Tracer.jagged`, and the tensor accesses (values.py) ask `Tracer.access_mask`, this module's
`jagged_mask`, for the rows' masks.
"""

from __future__ import annotations

from tiledsl.errors import ShapeError
from tiledsl.frontend.tracer import Tracer
from tiledsl.frontend.values import TileValue
from tiledsl.ir.core import Value
from tiledsl.ir.types import Dim


def jagged_mask(tr: Tracer, operands: list[Value], shape: tuple[Dim, ...]) -> TileValue | None:
    """The mask of an access with `operands` and result `shape` from the open jagged tiles it
    uses (None if it uses none whose rows it has)."""
    mask = None
    for r, lengths in tr.jagged.items():
        if not _open(tr, r) or not any(_reaches(o, r) for o in operands):
            continue
        k = r.type.block  # type: ignore[union-attr]
        if k not in shape or any(d not in shape for d in lengths.shape):
            continue
        index = TileValue(tr.emit("tile.index", [r], hint="jagged")[0])
        cond = _placed(tr, index, shape, _lanes_axis(tr, k, shape)) < \
            _placed(tr, lengths, shape)
        mask = cond if mask is None else mask & cond
    return mask


def jagged_rows(tr: Tracer, value: Value, axis: int) -> TileValue | None:
    """Where tile `value` holds lanes in range along `axis`, when that axis is an open jagged
    tile's: `tk.index < lengths` placed along its shape (None if it is none's). A reduction
    along it counts those lanes only, as Helion's `hl.jagged_tile` reductions do. (A constant
    block, `block_size=`, is the jagged tile's axis only in a value computed from it.)"""
    mask = None
    shape = value.type.shape  # type: ignore[union-attr]
    for r, lengths in tr.jagged.items():
        k = r.type.block  # type: ignore[union-attr]
        if not _open(tr, r) or shape[axis] != k or any(d not in shape for d in lengths.shape) \
                or isinstance(k, int) and not _reaches(value, r):
            continue
        index = TileValue(tr.emit("tile.index", [r], hint="jagged")[0])
        cond = _placed(tr, index, shape, axis) < _placed(tr, lengths, shape)
        mask = cond if mask is None else mask & cond
    return mask


def _open(tr: Tracer, r: Value) -> bool:
    return any(r in block.args for block in tr.blocks)


def _reaches(v: Value, r: Value) -> bool:
    """Whether `v` is range `r` or is computed from it (`r.index + starts`, a shifted `r`)."""
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        if x is r:
            return True
        op = x.owner
        if op is None or id(x) in seen or op.regions:
            continue
        seen.add(id(x))
        todo.extend(op.operands)
    return False


def _placed(tr: Tracer, v: TileValue, shape: tuple[Dim, ...], at: int | None = None
            ) -> TileValue:
    """A scalar or 1-D `v` along its dimension's place in `shape` (unit axes elsewhere), or
    along axis `at`: a jagged tile's lanes, whose block may be a constant (`block_size=`)."""
    if v.ndim == 0:
        return v
    if at is None:
        if isinstance(v.shape[0], int):
            tr.fail(ShapeError, "td.jagged_tile(): the lengths must be a tile over an enclosing "
                    "tile's rows, not of a constant size")
        at = shape.index(v.shape[0])
    return v[(None,) * at + (slice(None),) + (None,) * (len(shape) - at - 1)]


def _lanes_axis(tr: Tracer, k: Dim, shape: tuple[Dim, ...]) -> int:
    """Where a jagged tile's lanes (block `k`) lie in `shape`."""
    if isinstance(k, int) and shape.count(k) > 1:
        tr.fail(ShapeError, f"td.jagged_tile(block_size={k}): an access of shape "
                f"{tr.describe_shape(shape)} has several axes of {k}, so which one holds the "
                "jagged lanes is ambiguous", hint="leave the jagged tile's block size to the "
                "config, or give it a size no other axis has")
    return shape.index(k)

