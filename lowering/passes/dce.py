"""dce: remove pure ops whose results are unused, and loops that compute nothing used."""

from __future__ import annotations

from dataclasses import dataclass

from tiledsl.ir.core import Block, Function, Op, use_counts, walk
from tiledsl.ir.ops import OPS


def _removable(op: Op, uses: dict) -> bool:
    if any(uses.get(r, 0) for r in op.results):
        return False
    if op.name == "for":
        return all(OPS[inner.name].pure or inner.name == "yield" or inner.name == "for"
                   for inner in walk(op.regions[0]))
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
