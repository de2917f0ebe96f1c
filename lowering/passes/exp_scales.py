"""fold-exp-scales: `exp` as `exp2` with the constant scales around it folded into one multiply.

What the best hand-written softmax and attention kernels do, as an algebraic rewrite of the IR
(run for the Triton backend, whose `tl.exp` costs a multiply by log2(e) and a denormal fix-up of
three instructions around each `ex2` on sm_90, where `tl.exp2` is one MUFU.EX2):

1. `exp(x)` -> `exp2(x * log2(e))` on float32 tiles.
2. A positive constant scale sinks towards its uses: out of a max or min reduction
   (`max(x * c)` -> `max(x) * c`, exact: rounding is monotonic), and out of a `where` or `mask`
   whose other value is 0 or +-inf (`where(m, x * c, -inf)` -> `where(m, x, -inf) * c`, exact).
3. A constant multiply distributes over the subtraction of a broadcast row:
   `(a - r[:, None]) * c` -> `a * c - (r * c)[:, None]`, one fused multiply-add per element
   instead of a subtraction and a multiply (the row's multiply is done once per row).
   `(a - b) * c` -> `a * c - b * c` also where `b * c` is computed elsewhere anyway (CSE
   shares it): attention's rescale `exp(m_i - m_new)` reuses the `m_new * log2e` of its scores,
   one FFMA per row instead of a subtraction and a multiply.
4. Two constant multiplies fold: `(x * c1) * c2` -> `x * (c1 * c2)`.

Softmax's `exp(s - max)` becomes `exp2(s * log2e - max * log2e)`; attention's
`exp(q k^T * scale - m)` becomes `exp2(q k^T * (scale * log2e) - m * log2e)` with the row max
taken on the unscaled scores: one FFMA and one MUFU per score, as in Triton's tutorial. Rules 3
and 4 round differently from the source (a few float32 ulps of the exponent; `a * c` overflows
where `a - r` did not only for |a| > 3.4e38 / c), and `exp2` on the GPU flushes results below
2**-126 to zero (the interpreter does not); the NumPy backend runs the IR as written.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from lowering.passes.dce import DCEPass
from lowering.passes.base import approx_numel
from tiledsl import dtypes
from tiledsl.ir.core import Block, Function, Op, Value, use_counts
from tiledsl.ir.types import TileType

LOG2E = math.log2(math.e)
EXACT_UNDER_SCALING = (0.0, math.inf, -math.inf)  # k / c * c == k for any c > 0


def constant(v: Value, defs: dict[Value, Op]) -> float | None:
    """The value of a float scalar constant or of a broadcast of one, else None."""
    op = defs.get(v)
    if op is not None and op.name == "broadcast":
        op = defs.get(op.operands[0])
    if op is None or op.name != "const" or isinstance(op.attrs["value"], bool):
        return None
    return float(op.attrs["value"])


def scaled(v: Value, defs: dict[Value, Op]) -> tuple[Value, float] | None:
    """(x, c) if `v` is a float `x * c` (either order) with c a positive finite constant (ints
    are left alone: `max(x * c)` and `max(x) * c` differ where the product wraps)."""
    op = defs.get(v)
    if op is None or op.name != "mul" or not isinstance(v.type, TileType) or \
            not v.type.dtype.is_float:
        return None
    for x, c in (op.operands, op.operands[::-1]):
        value = constant(c, defs)
        if value is not None and 0 < value < math.inf:
            return x, value
    return None


@dataclass(frozen=True)
class FoldExpScalesPass:
    name: str = "fold-exp-scales"

    def run(self, fn: Function) -> None:
        while self._sweep(fn):  # dead ops would hold uses that block the single-use rules
            DCEPass().run(fn)

    def _sweep(self, fn: Function) -> bool:
        """One rewrite anywhere in `fn` (the use counts change after each)."""
        defs: dict[Value, Op] = {}
        blocks: list[Block] = []
        _index(fn.body, defs, blocks)
        uses = use_counts(fn.body)
        for block in blocks:
            for i, op in enumerate(block.ops):
                new = _rewrite(op, defs, uses)
                if new is not None:
                    ops, result = new
                    block.ops[i:i + 1] = ops
                    _replace(fn.body, op.result, result)
                    return True
        return False


def _index(block: Block, defs: dict[Value, Op], blocks: list[Block]) -> None:
    blocks.append(block)
    for op in block.ops:
        for r in op.results:
            defs[r] = op
        for region in op.regions:
            _index(region, defs, blocks)


def _replace(block: Block, old: Value, new: Value) -> None:
    for op in block.ops:
        op.operands = [new if o is old else o for o in op.operands]
        for region in op.regions:
            _replace(region, old, new)


def _rewrite(op: Op, defs: dict[Value, Op], uses: dict[Value, int]
             ) -> tuple[list[Op], Value] | None:
    """The ops that replace `op` (the last defines its new result), or None."""
    if len(op.results) != 1 or not isinstance(op.result.type, TileType):
        return None
    t = op.result.type
    if op.name == "exp" and t.dtype == dtypes.float32:
        x = op.operands[0]
        return _emit(op, [("mul", [x, _const(LOG2E, t)]), ("exp2", [-1])])
    if op.name == "reduce" and op.attrs["kind"] in ("max", "min"):
        found = _unscaled(op.operands[0], defs)
        if found is not None:
            ops, x, c = found
            reduced = Op("reduce", [x], [Value(t, op.result.hint)], dict(op.attrs), [], op.loc)
            return _emit(op, [*ops, reduced, ("mul", [-1, _const(c, t)])])
    if op.name in ("where", "mask"):
        return _sink_through_select(op, defs, uses)
    if op.name == "mul":
        return _distribute(op, defs, uses) or _share(op, defs, uses) or _fold(op, defs, uses)
    return None


def _unscaled(v: Value, defs: dict[Value, Op]) -> tuple[list[Op], Value, float] | None:
    """`v` without its positive constant scale c: `x` for `x * c`, a new `mask(x)` for
    `mask(x * c)` (the ragged-edge mask before a reduction), with the ops to add and c."""
    found = scaled(v, defs)
    if found is not None:
        return [], found[0], found[1]
    op = defs.get(v)
    if op is None or op.name != "mask" or float(op.attrs["value"]) not in EXACT_UNDER_SCALING:
        return None
    found = scaled(op.operands[0], defs)
    if found is None:
        return None
    x, c = found
    masked = Op("mask", [x, *op.operands[1:]], [Value(x.type, op.result.hint)], dict(op.attrs),
                [], op.loc)
    return [masked], masked.result, c


def _sink_through_select(op: Op, defs: dict[Value, Op], uses: dict[Value, int]
                         ) -> tuple[list[Op], Value] | None:
    """where(m, x * c, k) -> where(m, x, k) * c and mask(x * c) -> mask(x) * c, where k (the
    value put where the condition fails) is unchanged by scaling."""
    t = op.result.type
    assert isinstance(t, TileType)
    if op.name == "where":
        cond, chosen, other = op.operands
        if constant(other, defs) not in EXACT_UNDER_SCALING:
            return None
    else:
        chosen = op.operands[0]
        if float(op.attrs["value"]) not in EXACT_UNDER_SCALING:
            return None
    found = scaled(chosen, defs)
    if found is None or uses.get(chosen, 0) != 1:  # else the multiply stays for other uses
        return None
    x, c = found
    operands = [cond, x, other] if op.name == "where" else [x, *op.operands[1:]]
    inner = Op(op.name, operands, [Value(t, op.result.hint)], dict(op.attrs), [], op.loc)
    return _emit(op, [inner, ("mul", [-1, _const(c, t)])])


def _scaled_subtractions(op: Op, defs: dict[Value, Op], uses: dict[Value, int]
                         ) -> Iterator[tuple[Any, Op]]:
    """(c, the sub op) for each way the multiply `op` scales a subtraction used once by a
    constant c."""
    for diff, scale in (op.operands, op.operands[::-1]):
        c = constant(scale, defs)
        sub = defs.get(diff)
        if c is not None and sub is not None and sub.name == "sub" and uses.get(diff, 0) == 1:
            yield c, sub


def _distribute(op: Op, defs: dict[Value, Op], uses: dict[Value, int]
                ) -> tuple[list[Op], Value] | None:
    """(a - broadcast(r)) * c -> a * c - broadcast(r * c), r smaller than a."""
    t = op.result.type
    assert isinstance(t, TileType)
    for c, sub in _scaled_subtractions(op, defs, uses):
        a, row = sub.operands
        spread = defs.get(row)
        if spread is None or spread.name != "broadcast":
            continue
        r = spread.operands[0]
        rt = r.type
        if not isinstance(rt, TileType) or approx_numel(rt) >= approx_numel(t) or \
                rt.dtype != t.dtype:
            continue
        lift = defs.get(r)
        if lift is not None and lift.name == "expand_dims":  # scale the row before lifting it
            row_t = lift.operands[0].type
            assert isinstance(row_t, TileType)
            return _emit(op, [("mul", [a, _const(c, t)]), ("mul", [lift.operands[0],
                                                                   _const(c, row_t)]),
                              ("expand_dims", [-1], rt, dict(lift.attrs)),
                              ("broadcast", [-1], t), ("sub", [-4, -1])])
        return _emit(op, [("mul", [a, _const(c, t)]), ("mul", [r, _const(c, rt)]),
                          ("broadcast", [-1], t), ("sub", [-3, -1])])
    return None


def _share(op: Op, defs: dict[Value, Op], uses: dict[Value, int]
           ) -> tuple[list[Op], Value] | None:
    """(a - b) * c -> a * c - b * c where some other op computes b * c (with the same c): the
    subtraction and multiply become one FFMA, and CSE merges the two b * c."""
    t = op.result.type
    assert isinstance(t, TileType)
    for c, sub in _scaled_subtractions(op, defs, uses):
        a, b = sub.operands
        if a.type != t or b.type != t or not any(
                other is not op and other.name == "mul" and scaled(other.result, defs) == (b, c)
                for other in set(defs.values())):
            continue
        return _emit(op, [("mul", [a, _const(c, t)]), ("mul", [b, _const(c, t)]),
                          ("sub", [-2, -1])])
    return None


def _fold(op: Op, defs: dict[Value, Op], uses: dict[Value, int]
          ) -> tuple[list[Op], Value] | None:
    """(x * c1) * c2 -> x * (c1 * c2), c1 c2 computed in the tile's dtype."""
    t = op.result.type
    assert isinstance(t, TileType)
    for inner, scale in (op.operands, op.operands[::-1]):
        c2 = constant(scale, defs)
        found = scaled(inner, defs)
        if c2 is None or found is None or uses.get(inner, 0) != 1:
            continue
        x, c1 = found
        product = float(np.asarray(c1, t.dtype.np) * np.asarray(c2, t.dtype.np))
        return _emit(op, [("mul", [x, _const(product, t)])])
    return None


def _const(value: float, t: TileType) -> list[Op]:
    """A scalar constant, broadcast to `t`'s shape when `t` is a tile."""
    scalar = TileType((), t.dtype)
    c = Op("const", [], [Value(scalar)], {"value": value})
    if not t.shape:
        return [c]
    return [c, Op("broadcast", [c.result], [Value(TileType(t.shape, t.dtype))])]


def _emit(op: Op, specs: list) -> tuple[list[Op], Value]:
    """Ops from `specs` (Ops, lists of Ops from `_const`, or (name, operands[, type]) whose
    operands may be a `_const` list, standing for its last result, or -k, the result of the
    k-th spec before this one), placed where `op` was; the last result replaces `op`'s."""
    out: list[Op] = []
    results: list[Value] = []
    t = op.result.type
    for spec in specs:
        if isinstance(spec, Op):
            out.append(spec)
            results.append(spec.result)
            continue
        name, operands, *rest = spec  # (name, operands[, result type[, attrs]])
        args = []
        for o in operands:
            if isinstance(o, int):
                args.append(results[o])
            elif isinstance(o, list):
                out.extend(o)
                args.append(o[-1].result)
            else:
                args.append(o)
        result_type = rest[0] if rest else (args[0].type if name != "exp2" else t)
        attrs = dict(rest[1]) if len(rest) > 1 else {}
        new = Op(name, args, [Value(result_type, op.result.hint)], attrs, [], op.loc)
        out.append(new)
        results.append(new.result)
    return out, results[-1]
