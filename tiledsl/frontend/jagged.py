"""Jagged tiles: `for tk in td.jagged_tile(lengths)`, as Helion's `hl.jagged_tile`.

`lengths` is an integer tile over an enclosing tile (one length per row: `nnz` over `tile_b`) or
a scalar. The loop runs over the tiles of `[0, max(lengths))`, a tile loop to a runtime size
(language.py), and each row's lanes at or past its own length are out of range: every load and
store whose index involves the jagged tile (the tile itself, or an index tile computed from
`tk.index`) and whose shape has the lengths' dimension is masked by `tk.index < lengths` placed
along those dimensions; masked loads read 0. An access without the rows' dimension sees the
loop's own bound only (lanes below the longest row).

Helion's jagged_mean, for rows `tile_b` with `nnz` elements each:

    for tile_k in td.jagged_tile(nnz):
        row_sums += td.load(x_flat, [(starts[:, None] + tile_k.index[None, :]) * m]).sum(1)

The masks are built here while tracing, as a user's `mask=` would be (ops `tile.index`, `lt`,
`and`): no backend knows of jagged tiles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiledsl.errors import ShapeError, TraceError
from tiledsl.frontend.tracer import Tracer, current
from tiledsl.ir.core import Value
from tiledsl.ir.types import Dim

if TYPE_CHECKING:
    from tiledsl.frontend.values import TileValue


def jagged_tile(lengths: Any, block_size: Any = None) -> Any:
    """The tiles of `[0, max(lengths))`, each row's lanes past its own length masked in the
    loads and stores that use them (see the module's docstring)."""
    from tiledsl.frontend.values import TileValue, reduce, to_value
    from tiledsl.lang.language import TileRange, tile
    tr = current("td.jagged_tile()")
    v = to_value(lengths)
    if not v.dtype.is_int or v.ndim > 1:
        tr.fail(TraceError, f"td.jagged_tile() takes an integer scalar or a 1-D integer tile of "
                f"lengths, got {v.dtype}{tr.describe_shape(v.shape)}",
                hint="one length per row of the enclosing tile, e.g. nnz = ends - starts")
    longest = v if v.ndim == 0 else TileValue(reduce("max", v, 0, False).value)
    rng = tile(longest, block_size=block_size)
    return TileRange(rng.sizes, rng.block_sizes, "tile", rng.loc, rng.stop, site=rng.site,
                     jagged=v)


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
        from tiledsl.frontend.values import TileValue
        index = TileValue(tr.emit("tile.index", [r], hint="jagged")[0])
        cond = _placed(tr, index, shape) < _placed(tr, lengths, shape)
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


def _placed(tr: Tracer, v: TileValue, shape: tuple[Dim, ...]) -> TileValue:
    """A scalar or 1-D `v` along its dimension's place in `shape` (unit axes elsewhere)."""
    if v.ndim == 0:
        return v
    if isinstance(v.shape[0], int):
        tr.fail(ShapeError, "td.jagged_tile(): the lengths must be a tile over an enclosing "
                "tile's rows, not of a constant size")
    at = shape.index(v.shape[0])
    return v[(None,) * at + (slice(None),) + (None,) * (len(shape) - at - 1)]

