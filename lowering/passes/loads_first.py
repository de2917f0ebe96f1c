"""loads-first: in a loop's body, each load moves up to just after what it needs.

Triton's software pipeliner prefetches a loop's loads some trips ahead; where the loads of one
trip are adjacent at the top of the body (as Triton's tutorials write them: `k = ...; v = ...`
before any math), it puts them in one pipeline stage, with one mbarrier for the TMA loads of a
trip instead of one each. Attention's V tile is used only by the second `dot`, so the traced IR
loads it after the softmax: on sm_90 with TMA (d128, 128x64 tiles, 8 warps) the key loop issued
two mbarrier arrives and two waits per trip, the hand-written kernel one of each.

A load moves only past ops without effects and without regions (a store, an atomic, a barrier
or a nested `if`/`for` stays in front of it), so it reads what it read before. Run for the
Triton backend; the NumPy backend runs the IR as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from tiledsl.ir.core import Block, Function, Op, walk
from tiledsl.ir.ops import OPS


@dataclass(frozen=True)
class LoadsFirstPass:
    name: str = "loads-first"

    def run(self, fn: Function) -> None:
        for op in list(walk(fn.body)):
            if op.name == "for":
                _hoist_loads(op.regions[0])


def _fixed(op: Op) -> bool:
    """Whether a load may not move above `op`: it has an effect or holds other ops, or it is a
    load (the loads keep their order)."""
    opdef = OPS.get(op.name)
    return bool(op.regions) or opdef is None or not opdef.pure or op.name == "load"


def _hoist_loads(body: Block) -> None:
    ops: list[Op] = []
    for op in body.ops:
        if op.name != "load":
            ops.append(op)
            continue
        needed = set(op.operands)
        at = len(ops)
        while at > 0 and not _fixed(ops[at - 1]) and not needed & set(ops[at - 1].results):
            at -= 1
        ops.insert(at, op)
    body.ops = ops
