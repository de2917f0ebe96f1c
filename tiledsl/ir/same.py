"""Whether two IR values are the same computation: the same pure ops over the same values.

A loop body that rebinds a name to the expression it had before the loop (FlagGems' flash
attention recomputes `row_idx = row_start + tl.arange(0, BLOCK_M)` in each of its key loops)
carries a value that never changes; the frontend then keeps the value from before the loop
(frontend/loops.py), so the race check can follow it after the loop.
"""

from __future__ import annotations

from tiledsl.ir.core import Value
from tiledsl.ir.ops import ELEMENTWISE, VIEW, has_trait

# ops that compute from their operands alone (no memory, no region), besides the
# elementwise ops and the views
_PURE = frozenset({"const", "arange", "mask", "tile.index", "tile.begin", "tile.size",
                   "tile.id", "tile.block_size", "tile.shift"})


def same_value(a: Value, b: Value, depth: int = 64) -> bool:
    """Whether `a` and `b` are the same value: one Value, or results at the same position of
    pure ops of one name and attributes over operands that are the same values."""
    if a is b:
        return True
    oa, ob = a.owner, b.owner
    if oa is None or ob is None or depth == 0 or oa.name != ob.name or oa.regions or \
            ob.regions or oa.attrs != ob.attrs or len(oa.operands) != len(ob.operands) or \
            a.type != b.type:
        return False
    if not (oa.name in _PURE or has_trait(oa.name, ELEMENTWISE) or has_trait(oa.name, VIEW)):
        return False
    if oa.results.index(a) != ob.results.index(b):
        return False
    return all(same_value(x, y, depth - 1) for x, y in zip(oa.operands, ob.operands))
