"""Index-set splitting of a tile loop: the leading iterations where a mask is all true.

Causal attention masks each score tile with `td.where(tq.index[:, None] >= tk.index[None, :],
s, -inf)`. For a key tile that ends at or before the query tile begins, every lane passes, so
the compare and the select do nothing. Triton's fused-attention tutorial writes two loops for
this (stage 1 without the mask, stage 2 along the diagonal); the emitter does the same for any
loop whose body selects on such a comparison:

    split = min(begin_tq // BLOCK_TK, stop // BLOCK_TK)   # full tiles before the diagonal
    for it in range(0, split): ...                         # no compare, no select, no masks
    for it in range(split, cdiv(stop, BLOCK_TK)): ...      # the loop as written

Each prefix iteration is a whole tile below both the other range's begin and the loop's end
(its extent, or its runtime stop), so its edge masks go too. The comparisons recognized are
`outer >= inner` and `outer > inner` (or `inner <= outer`, `inner < outer`) between the
`index` vectors of an enclosing range and of the loop's range, expanded and broadcast.
"""

from __future__ import annotations

from tiledsl.ir.core import Block, Op, Value

_THROUGH = ("expand_dims", "broadcast")
_OUTER_FIRST = ("ge", "gt")  # outer >= inner, outer > inner
_INNER_FIRST = ("le", "lt")  # inner <= outer, inner < outer


def _range_of_index(v: Value) -> Value | None:
    """The range whose `tile.index` `v` is, through expand_dims and broadcast."""
    while v.owner is not None and v.owner.name in _THROUGH:
        v = v.owner.operands[0]
    if v.owner is not None and v.owner.name == "tile.index":
        return v.owner.operands[0]
    return None


def prefix_true(region: Block, r: Value, opened: set[Value]) -> dict[Op, Value]:
    """The `where` ops of loop body `region` (over range `r`) whose condition holds on every
    lane while the loop's tile ends at or before an enclosing range's begin: each with that
    enclosing range (one of `opened`)."""
    out: dict[Op, Value] = {}
    for op in region.ops:
        if op.name != "where" or op.operands[0].owner is None:
            continue
        cond = op.operands[0].owner
        if cond.name not in _OUTER_FIRST + _INNER_FIRST:
            continue
        a, b = (_range_of_index(v) for v in cond.operands)
        outer, inner = (a, b) if cond.name in _OUTER_FIRST else (b, a)
        if inner is r and outer is not None and outer is not r and outer in opened:
            out[op] = outer
    return out


def dead_without(region: Block, wheres: dict[Op, Value], uses: dict[Value, list[Op]]) -> set[Op]:
    """The ops of `region` that only compute the conditions of `wheres` (the compares and the
    index vectors feeding them), which the prefix loop does not need."""
    dead: set[Op] = set()
    for op in reversed(region.ops):
        if not op.results or op.regions:
            continue
        if all(all(u in dead or (u in wheres and u.operands[0] is v and v not in u.operands[1:])
                   for u in uses.get(v, [])) and uses.get(v) for v in op.results):
            dead.add(op)
    return dead
