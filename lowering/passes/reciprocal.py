"""hoist-reciprocals: divide by a broadcast row as a multiply by its reciprocal.

`a / r[:, None]` (softmax's normalization, attention's `acc / l_i[:, None]`) becomes
`a * (1 / r)[:, None]`: one division per row and one multiply per element, as hand-written
kernels write it. Triton's float32 `/` (div.full.f32) costs two multiplies per element on sm_90
(softmax over 8192 columns, 4 warps: 624 SASS instructions before, 500 after, the hand-written
kernel 515). A division by a scalar constant becomes a multiply by its reciprocal the same way.
Float32 tiles only; the result rounds twice (the reciprocal, then the product): within 2 ulp,
as div.full.f32 is. A quotient that is quantized (cast to fp8 or an int, through clamps:
vLLM's per-token fp8 quant `(y / y_s).clamp(...).to(fp8)`) keeps its division, so the two
backends round it to the same code (the product flipped 3 of 5328 fp8 ties). Run for the
Triton backend; the NumPy backend runs the IR as written.
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
        users: dict[Value, list[Op]] = {}
        _index(fn.body, defs, users)
        _block(fn.body, defs, users)


def _index(block: Block, defs: dict[Value, Op], users: dict[Value, list[Op]]) -> None:
    for op in block.ops:
        for r in op.results:
            defs[r] = op
        for o in op.operands:
            users.setdefault(o, []).append(op)
        for region in op.regions:
            _index(region, defs, users)


def _block(block: Block, defs: dict[Value, Op], users: dict[Value, list[Op]]) -> None:
    ops: list[Op] = []
    for op in block.ops:
        for region in op.regions:
            _block(region, defs, users)
        ops.extend(_rewrite(op, defs, users) or [op])
    block.ops = ops


_THROUGH = ("maximum", "minimum", "where", "neg", "abs")  # what a quantizer clamps with


def _quantized(v: Value, users: dict[Value, list[Op]], depth: int = 4) -> bool:
    """Whether `v` is cast to fp8 or an int, directly or through clamps."""
    for op in users.get(v, []):
        t = op.results[0].type if op.results else None
        if op.name == "cast" and isinstance(t, TileType) and (t.dtype.is_int or t.dtype.bits <= 8):
            return True
        if op.name in _THROUGH and depth and _quantized(op.result, users, depth - 1):
            return True
    return False


def _rewrite(op: Op, defs: dict[Value, Op], users: dict[Value, list[Op]]) -> list[Op] | None:
    """div(a, broadcast(r)) -> mul(a, broadcast(div(1, r))), the last op taking `op`'s result."""
    if op.name != "div" or _quantized(op.result, users):
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
