"""Static bounds of scalar integer values: what a runtime loop stop (`td.tile(tq.end)`) can reach.

A loop whose stop is a runtime value still needs a static extent: it sizes the block-size symbol,
types the range (such a range indexes any tensor dimension at least its extent long) and bounds
the trip count the backends plan for. `interval(v)` follows `v` back through the ops that compute
it from tile bounds and constants and returns the closed interval it lies in, or None when an op
(a load, a division) hides it. `divisor(v, ...)` says what divides it under a config.
"""

from __future__ import annotations

import math
from typing import Callable

from tiledsl.ir.core import Value
from tiledsl.ir.types import Dim, RangeType, TileType

Interval = tuple[int, int]


def _range_of(v: Value, name: str) -> RangeType | None:
    op = v.owner
    if op is None or op.name != name:
        return None
    t = op.operands[0].type
    return t if isinstance(t, RangeType) else None


def _last_begin(r: RangeType) -> int:
    if isinstance(r.block, int):
        return (r.extent - 1) // r.block * r.block
    return r.extent - 1


def _tile_end(v: Value) -> int | None:
    """`t.begin + t.size` (what `Tile.end` traces) ends at most at the range's extent."""
    op = v.owner
    if op is None or op.name != "add":
        return None
    a, b = op.operands
    for x, y in ((a, b), (b, a)):
        if x.owner is not None and y.owner is not None and x.owner.name == "tile.begin" \
                and y.owner.name == "tile.size" and x.owner.operands[0] is y.owner.operands[0]:
            r = x.owner.operands[0].type
            assert isinstance(r, RangeType)
            return r.extent
    return None


def interval(v: Value, lanes: bool = False) -> Interval | None:
    """The values a scalar integer `v` can take, or None if they cannot be bounded statically;
    with `lanes`, also those the in-range lanes of an integer tile made from `t.index` hold (a
    gather by it needs no bounds check)."""
    t = v.type
    if not (isinstance(t, TileType) and (t.shape == () or lanes) and
            (t.dtype.is_int or t.dtype.is_bool)):
        return None
    op = v.owner
    if op is None:
        return None
    if op.name == "const":
        return int(op.attrs["value"]), int(op.attrs["value"])
    if (r := _range_of(v, "tile.begin")) is not None:
        return 0, _last_begin(r)
    if (r := _range_of(v, "tile.size")) is not None:
        block = r.block if isinstance(r.block, int) else r.extent
        return 1, min(block, r.extent)
    if (end := _tile_end(v)) is not None:
        return 1, end
    if lanes and (r := _range_of(v, "tile.index")) is not None:
        return 0, r.extent - 1
    if op.name == "cast" or (lanes and op.name in ("broadcast", "expand_dims")):
        return interval(op.operands[0], lanes)
    if op.name in ("add", "sub", "mul", "minimum", "maximum"):
        a, b = interval(op.operands[0], lanes), interval(op.operands[1], lanes)
        if a is None or b is None:
            return None
        if op.name == "add":
            return a[0] + b[0], a[1] + b[1]
        if op.name == "sub":
            return a[0] - b[1], a[1] - b[0]
        if op.name == "minimum":
            return min(a[0], b[0]), min(a[1], b[1])
        if op.name == "maximum":
            return max(a[0], b[0]), max(a[1], b[1])
        products = [x * y for x in a for y in b]
        return min(products), max(products)
    return None


def divisor(v: Value, block: Callable[[Dim], int]) -> int:
    """A number that divides every value `v` takes under a config (`block` resolves block
    sizes), 0 if `v` is always 0, 1 if nothing better is known. A stop that the loop's block
    divides cuts no tile, so its tiles need no mask (`tq.end` when the query block divides the
    sequence and the key block divides the query block)."""
    op = v.owner
    if op is None:
        return 1
    if op.name == "const":
        return abs(int(op.attrs["value"]))
    if op.name in ("tile.begin", "tile.size"):
        r = op.operands[0].type
        assert isinstance(r, RangeType)
        b = block(r.block)
        # begin is a multiple of the block; size is the block but for a last, partial tile
        return b if op.name == "tile.begin" else math.gcd(b, r.extent)
    if op.name == "cast":
        return divisor(op.operands[0], block)
    if op.name in ("add", "sub", "minimum", "maximum"):
        return math.gcd(divisor(op.operands[0], block), divisor(op.operands[1], block))
    if op.name == "mul":
        return divisor(op.operands[0], block) * divisor(op.operands[1], block)
    return 1
