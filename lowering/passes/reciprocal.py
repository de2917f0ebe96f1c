"""hoist-reciprocals: divide by a broadcast row as a multiply by its reciprocal.

`a / r[:, None]` (softmax's normalization, attention's `acc / l_i[:, None]`) becomes
`a * (1 / r)[:, None]`: one division per row and one multiply per element, as hand-written
kernels write it. Triton's float32 `/` (div.full.f32) costs two multiplies per element on sm_90
(softmax over 8192 columns, 4 warps: 624 SASS instructions before, 500 after, the hand-written
kernel 515). A division by a scalar constant becomes a multiply by its reciprocal the same way.
Float32 tiles only; the result rounds twice (the reciprocal, then the product): within 2 ulp,
as div.full.f32 is. Run for the Triton backend; the NumPy backend runs the IR as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from lowering.passes.base import approx_numel
from tiledsl import dtypes
from tiledsl.ir.core import Block, Function, Op, Value
from tiledsl.ir.types import TileType


@dataclass(frozen=True)
class HoistReciprocalsPass:
    name: str = "hoist-reciprocals"

    def run(self, fn: Function) -> None:
        defs: dict[Value, Op] = {}
        _index(fn.body, defs)
        _block(fn.body, defs)


def _index(block: Block, defs: dict[Value, Op]) -> None:
    for op in block.ops:
        for r in op.results:
            defs[r] = op
        for region in op.regions:
            _index(region, defs)


def _block(block: Block, defs: dict[Value, Op]) -> None:
    ops: list[Op] = []
    for op in block.ops:
        for region in op.regions:
            _block(region, defs)
        ops.extend(_rewrite(op, defs) or [op])
    block.ops = ops


def _rewrite(op: Op, defs: dict[Value, Op]) -> list[Op] | None:
    """div(a, broadcast(r)) -> mul(a, broadcast(div(1, r))), the last op taking `op`'s result."""
    if op.name != "div":
        return None
    t = op.result.type
    spread = defs.get(op.operands[1])
    if not isinstance(t, TileType) or t.dtype != dtypes.float32 or spread is None or \
            spread.name != "broadcast":
        return None
    r = spread.operands[0]
    rt = r.type
    if not isinstance(rt, TileType) or approx_numel(rt) >= approx_numel(t):
        return None
    one = Op("const", [], [Value(TileType((), rt.dtype))], {"value": 1.0}, [], op.loc)
    ones = [one] if not rt.shape else \
        [one, Op("broadcast", [one.result], [Value(rt)], {}, [], op.loc)]
    inverse = Op("div", [ones[-1].result, r], [Value(rt, "inv")], {}, [], op.loc)
    spread_inverse = Op("broadcast", [inverse.result], [Value(spread.result.type)], {}, [],
                        op.loc)
    product = Op("mul", [op.operands[0], spread_inverse.result], op.results, {}, [], op.loc)
    return [*ones, inverse, spread_inverse, product]
