"""cse: common-subexpression elimination of pure ops, scoped by region (outer values are reused).

A load reads memory: it is reused only while no store or atomic (an op with the `writes` trait,
here or in a region) may have changed what it read; `x[t] = x[t] * 2` then `y[t] - x[t]` reads
the new `x`."""

from __future__ import annotations

from dataclasses import dataclass

from tiledsl.ir.core import Block, Function, Op, Value
from tiledsl.ir.ops import ISOLATED, OPS, WRITES, attr_key, has_trait

READS = "load"  # the op that reads a tensor's memory


def _writes(op: Op) -> bool:
    """Whether `op`, or an op in its regions, writes memory."""
    return has_trait(op.name, WRITES) or any(_writes(o) for r in op.regions for o in r.ops)


def _forget_loads(seen: dict[tuple, Op]) -> dict[tuple, Op]:
    return {k: v for k, v in seen.items() if k[0] != READS}


@dataclass(frozen=True)
class CSEPass:
    name: str = "cse"

    def run(self, fn: Function) -> None:
        self._block(fn.body, {}, {})

    def _block(self, block: Block, seen: dict[tuple, Op], repl: dict[Value, Value]) -> None:
        seen = dict(seen)  # values defined in this block are not visible outside it
        ops: list[Op] = []
        for op in block.ops:
            op.operands = [repl.get(o, o) for o in op.operands]
            if _writes(op):  # (a loop's region may run again after its own stores)
                seen = _forget_loads(seen)
            for region in op.regions:  # (an isolated region reuses nothing from outside)
                self._block(region, {} if has_trait(op.name, ISOLATED) else seen, repl)
            if OPS[op.name].pure and OPS[op.name].cse and not op.regions and op.results \
                    and not op.attrs.get("volatile"):  # (td.load(volatile=True): each reads)
                key = (op.name, tuple(id(o) for o in op.operands), attr_key(op.attrs),
                       tuple(str(r.type) for r in op.results))
                prior = seen.get(key)
                if prior is not None:
                    for old, new in zip(op.results, prior.results):
                        repl[old] = new
                    continue
                seen[key] = op
            ops.append(op)
        block.ops = ops
