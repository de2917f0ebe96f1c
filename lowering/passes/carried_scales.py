"""rescale-carried: a loop carries a running max (or min) already multiplied by the positive
constant every use scales it by.

Online softmax carries the row max `m` and uses it only scaled, as `m * log2(e)` (after
fold-exp-scales: `exp2(m * log2e - m_new * log2e)` and `exp2(s * c - m_new * log2e)`). Carrying
`m' = m * c` instead removes one multiply per row per trip, as Triton's attention tutorial
writes it (`m_i` in base-2 units): for a `for` whose carried value m

- is used in the body only by `m * c` and by the `maximum(m, y)` (or `minimum`) it yields,
- whose yielded extremum is used only by the yield and by `* c`,
- and whose final value is not used after the loop,

the loop carries `m * c` (initial value `m0 * c`), the uses `m * c` read it as it is, and the
next value is `maximum(m', y * c)`, `y * c` folded with a constant scale of y
(`(x * c1) * c` -> `x * (c1 * c)`). Exact but for that fold: for c > 0 rounding is monotonic, so
`max(m, y) * c == max(m * c, y * c)` in floating point (NaN and infinities included). On sm_90
causal attention's key loop (128x64, d64) lost one FMUL per row: 4 per trip at 4 warps. Run for
the Triton backend after fold-exp-scales; the NumPy backend runs the IR as written.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lowering.passes.dce import DCEPass
from lowering.passes.exp_scales import _const, constant, scaled
from tiledsl.ir.core import Block, Function, Op, Value, loop_carried, loop_inits, use_counts, walk
from tiledsl.ir.types import TileType

EXTREMA = ("maximum", "minimum")


@dataclass(frozen=True)
class RescaleCarriedPass:
    name: str = "rescale-carried"

    def run(self, fn: Function) -> None:
        if _blocks(fn.body, fn.body):
            DCEPass().run(fn)


def _blocks(block: Block, top: Block) -> bool:
    """Rescale every eligible carried value of the loops in `block` and below."""
    changed = False
    i = 0
    while i < len(block.ops):
        op = block.ops[i]
        for region in op.regions:
            changed |= _blocks(region, top)
        if op.name == "for":
            for k in range(len(loop_carried(op))):
                inits = _rescale(op, k, top)
                if inits:
                    block.ops[i:i] = inits
                    i += len(inits)
                    changed = True
        i += 1
    return changed


def _rescale(loop: Op, k: int, top: Block) -> list[Op]:
    """Carry value k of `loop` scaled, if it qualifies; the ops computing its new initial value
    (to put before the loop), or [] if it does not."""
    region = loop.regions[0]
    m = loop_carried(loop)[k]
    yielded = region.ops[-1].operands[k]
    ext = yielded.owner
    t = m.type
    if ext is None or ext.name not in EXTREMA or m not in ext.operands or \
            not isinstance(t, TileType) or not t.dtype.is_float or \
            use_counts(top).get(loop.results[k], 0):
        return []
    y = ext.operands[1] if ext.operands[0] is m else ext.operands[0]
    if y is m:
        return []
    defs = {r: op for op in walk(region) for r in op.results}
    users = [op for op in walk(region) if m in op.operands and op is not ext]
    scaled_uses = [op for op in walk(region) if yielded in op.operands]
    if region.ops[-1] not in scaled_uses or yielded in region.ops[-1].operands[:k] + \
            region.ops[-1].operands[k + 1:]:
        return []
    scaled_uses.remove(region.ops[-1])
    scales = {_scale_of(op, v, defs) for op, v in [(u, m) for u in users] +
              [(u, yielded) for u in scaled_uses]}
    if len(scales) != 1 or None in scales or not users:
        return []
    c = scales.pop()
    assert c is not None
    # y * c, folded with y's own constant scale when y is used by the extremum alone
    found = scaled(y, defs)
    if found is not None and sum(y in op.operands for op in walk(region)) == 1:
        x, c1 = found
        y_ops = _mul(x, _times(c1, c, t), ext)
    else:
        y_ops = _mul(y, c, ext)
    new_ext = Op(ext.name, [m, y_ops[-1].result], [Value(t, yielded.hint)], dict(ext.attrs), [],
                 ext.loc)
    _insert_before(region, ext, [*y_ops, new_ext])
    for u in users + scaled_uses:  # `m * c` is m' now; `m_new * c` is the new extremum
        _replace(region, u.result, m if m in u.operands else new_ext.result)
    region.ops[-1].operands[k] = new_ext.result
    init = loop_inits(loop)[k]
    value = constant(init, {o.result: o for o in walk(top) if len(o.results) == 1})
    init_ops = _mul(init, c, loop) if value is None else _const(_times(value, c, t), t)
    position = len(loop.operands) - len(loop_inits(loop)) + k
    loop.operands[position] = init_ops[-1].result
    return init_ops


def _scale_of(op: Op, v: Value, defs: dict[Value, Op]) -> float | None:
    """c if `op` is `v * c` with c a positive finite constant, else None."""
    if op.name != "mul" or len(op.results) != 1:
        return None
    found = scaled(op.result, defs | {op.result: op})
    return found[1] if found is not None and found[0] is v else None


def _times(a: float, b: float, t: TileType) -> float:
    """a * b rounded to t's dtype, as the kernel would compute it."""
    return float(np.asarray(a, t.dtype.np) * np.asarray(b, t.dtype.np))


def _mul(x: Value, c: float, at: Op) -> list[Op]:
    """`x * c`: the constant's ops, then the multiply."""
    t = x.type
    assert isinstance(t, TileType)
    consts = _const(c, t)
    return consts + [Op("mul", [x, consts[-1].result], [Value(t, x.hint)], {}, [], at.loc)]


def _insert_before(region: Block, at: Op, ops: list[Op]) -> None:
    """Put `ops` just before `at`, in whichever block of `region` holds it."""
    for block in [region] + [r for op in walk(region) for r in op.regions]:
        if at in block.ops:
            i = block.ops.index(at)
            block.ops[i:i] = ops
            return
    raise AssertionError("rescale-carried: the extremum is not in the loop (internal error)")


def _replace(block: Block, old: Value, new: Value) -> None:
    for op in walk(block):
        op.operands = [new if o is old else o for o in op.operands]
