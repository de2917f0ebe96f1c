"""The Triton form of a strided `for` (`td.tile(m, n)[p::P]`), as Triton's persistent matmul
(tutorial 09) writes its tile loop: a loop over tile ids from the program's first tile in steps
of the program count, each id unravelled row-major into one tile per range:

    for tile_id in range(begin_p, 12, 5):
        pid_tm = tile_id // 3
        pid_tn = tile_id % 3
        begin_tm = pid_tm * BLOCK_TM
        ...
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tiledsl.ir.core import Op, loop_first, loop_ranges
from tiledsl.ir.types import RangeType

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


def strided_loop(em: KernelEmitter, op: Op, indent: int) -> None:
    region = op.regions[0]
    carried = em.bind_carried(op, indent)
    ranges = loop_ranges(op)
    counts = []
    for r in ranges:
        rt = r.type
        assert isinstance(rt, RangeType)
        counts.append(-(-rt.extent // em.block_of(rt.block)))
    first = loop_first(op)
    assert first is not None
    it = em.namer.fresh("tile_id")
    em.emit(indent, f"for {it} in range({em.value(first)}, {math.prod(counts)}, "
                    f"{op.attrs['stride']}):")
    pids = [em.namer.fresh(f"pid_{r.hint or 't'}") for r in ranges]
    for j, pid in enumerate(pids):  # row-major: the last range varies fastest
        inner = math.prod(counts[j + 1:])
        expr = it if inner == 1 else f"{it} // {inner}"
        if j > 0:
            expr = f"{expr} % {counts[j]}" if inner == 1 else f"({expr}) % {counts[j]}"
        em.emit(indent + 1, f"{pid} = {expr}")
    for r, pid in zip(ranges, pids):
        rt = r.type
        assert isinstance(rt, RangeType)
        block = em.block_expr(rt.block, r.hint) if isinstance(rt.block, str) else str(rt.block)
        em.open_range(r, f"{pid} * {block}", indent + 1, [])
    outer = em.true_wheres, em.skipped
    em.true_wheres, em.skipped = {}, set()
    try:
        em.block(region, indent + 1)
    finally:
        em.true_wheres, em.skipped = outer
    changes = [(c, em.value(v)) for c, v in zip(carried, region.ops[-1].operands)
               if em.value(v) != c]
    if changes:
        em.emit(indent + 1, ", ".join(c for c, _ in changes) + " = "
                + ", ".join(v for _, v in changes))
