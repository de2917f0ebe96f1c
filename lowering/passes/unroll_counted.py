"""unroll-counted: a counted loop with constant bounds (`td.range(0, n, B)` over a shape, a
`range(lo, hi, step)` over ints the kernel traces as runtime values) becomes its body once per
trip, each copy reading the counter's value as a constant.

The spatial backend runs it (`SpatialBackend.lower`): its mapper plans every program's trips
and copies before the run, so it maps no `while`, and a counted loop is one (tiledsl/ir/
counted.py). Unrolled, the loop is what a Python `range` over the same ints traces to. The
Triton backend keeps the loop (a `for`, which Triton pipelines); the NumPy backend runs it as
written.

A loop of more than `max_trips` trips, or whose copies would add more than `max_ops` ops,
stays a loop (and the mapper refuses it, naming its line).
"""

from __future__ import annotations

from dataclasses import dataclass

from lowering.passes.fold import FoldConstantsPass
from tiledsl.ir.core import Block, Function, Op, Value, clone_op, walk
from tiledsl.ir.counted import counted_loop, int_const, users


@dataclass(frozen=True)
class UnrollCountedPass:
    name: str = "unroll-counted"
    max_trips: int = 1024
    max_ops: int = 50_000

    def run(self, fn: Function) -> None:
        """Unrolled copies of a loop may hold loops whose bounds its counter gives
        (`td.range(r, r + 2)`): constants once folded, unrolled in the next round."""
        while self._block(fn.body, users(fn.body), {}):
            FoldConstantsPass().run(fn)

    def _block(self, block: Block, uses: dict[Value, list[Op]],
               replaced: dict[Value, Value]) -> bool:
        """Unroll in program order, so each op reads the copies of the loops before it (an
        outer loop's copies then copy its body as unrolled). Whether it unrolled any."""
        ops: list[Op] = []
        changed = False
        for op in block.ops:
            op.operands = [_resolve(o, replaced) for o in op.operands]
            for region in op.regions:
                changed |= self._block(region, uses, replaced)
            trips = self._trips(op, uses)
            ops.extend(self._unroll(op, trips, replaced) if trips is not None else [op])
            changed |= trips is not None
        block.ops = ops
        return changed

    def _trips(self, op: Op, uses: dict[Value, list[Op]]) -> range | None:
        """The counter's values of a counted loop with constant bounds, within the limits."""
        loop = counted_loop(op, uses)
        if loop is None:
            return None
        lo, hi = int_const(op.operands[1 + loop.k]), int_const(loop.stop)
        if lo is None or hi is None:
            return None
        trips = range(lo, hi, loop.step)
        body = sum(1 for _ in walk(op.regions[0]))
        return trips if len(trips) <= self.max_trips and \
            len(trips) * body <= self.max_ops else None

    @staticmethod
    def _unroll(op: Op, trips: range, replaced: dict[Value, Value]) -> list[Op]:
        region = op.regions[0]
        carried = list(op.operands[1:])  # the first trip reads the loop's initial values
        ops: list[Op] = []
        for _ in trips:
            vmap = dict(zip(region.args, carried))
            ops.extend(clone_op(inner, vmap) for inner in region.ops[:-1])  # all but `yield`
            carried = [vmap.get(v, v) for v in region.ops[-1].operands[1:]]
        replaced.update(zip(op.results, carried))
        return ops


def _resolve(v: Value, replaced: dict[Value, Value]) -> Value:
    while v in replaced:
        v = replaced[v]
    return v
