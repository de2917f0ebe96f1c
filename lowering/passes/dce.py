"""dce: remove pure ops whose results are unused, and loops and branches that compute nothing
used."""

from __future__ import annotations

from dataclasses import dataclass

from tiledsl.ir.core import Block, Function, Op, use_counts, walk
from tiledsl.ir.ops import OPS


def _removable(op: Op, uses: dict) -> bool:
    """Unused, and without effects: a pure op, or a loop or branch (an op with regions) whose
    regions hold only pure ops, terminators and ops with regions (checked by the walk)."""
    if any(uses.get(r, 0) for r in op.results):
        return False
    if op.regions and op.name != "grid":
        return all(OPS[inner.name].pure or OPS[inner.name].terminator or OPS[inner.name].regions
                   for region in op.regions for inner in walk(region))
    return OPS[op.name].pure


@dataclass(frozen=True)
class DCEPass:
    name: str = "dce"

    def run(self, fn: Function) -> None:
        while self._sweep(fn.body, use_counts(fn.body)):
            pass

    def _sweep(self, block: Block, uses: dict) -> bool:
        changed = False
        kept = []
        for op in block.ops:
            if _removable(op, uses):
                changed = True
                continue
            for region in op.regions:
                changed |= self._sweep(region, uses)
            kept.append(op)
        block.ops = kept
        return changed
