"""Counted loops: the `while` op that `range(lo, hi, step)` over runtime bounds traces to
(frontend/loops.py `_counted`): a carried counter that only steps by a positive constant,
tested against a bound from outside the loop, and nothing else deciding the trips:

    while (i < hi) carrying (i = lo, acc = ...):
        ...
        yield (i + step < hi), i + step, acc'

Triton writes it as a `for` (lowering/backends/triton/while_rules.py); the spatial backend
unrolls one with constant bounds (lowering/passes/unroll_counted.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from tiledsl.ir.core import Block, Op, Value, walk


@dataclass(frozen=True)
class CountedLoop:
    k: int  # the counter's position among the loop's carried values
    stop: Value
    step: int


def users(block: Block) -> dict[Value, list[Op]]:
    """The ops (nested ones too) that read each value of `block`."""
    out: dict[Value, list[Op]] = {}
    for op in walk(block):
        for o in op.operands:
            out.setdefault(o, []).append(op)
    return out


def int_const(v: Value) -> int | None:
    """An int constant, through casts."""
    while v.owner is not None and v.owner.name == "cast":
        v = v.owner.operands[0]
    op = v.owner
    value = op.attrs.get("value") if op is not None and op.name == "const" else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def counted_loop(op: Op, uses: Mapping[Value, Sequence[Op]]) -> CountedLoop | None:
    """The counter, bound and step of a counted `while` (see the module's docstring), else
    None. `uses` maps values to the ops that read them (`users`)."""
    if op.name != "while":
        return None
    region = op.regions[0]
    yielded = region.ops[-1].operands
    test, inside = yielded[0].owner, set(region.ops)
    if test is None or test.name != "lt" or test not in inside:
        return None
    step_op, stop = test.operands[0].owner, test.operands[1]
    if step_op is None or step_op.name != "add" or step_op not in inside or \
            stop.owner in inside or stop in region.args:
        return None
    counter, amount = step_op.operands
    k = next((i for i, a in enumerate(region.args) if a is counter), None)
    step = amount.owner.attrs.get("value") if amount.owner is not None and \
        amount.owner.name == "const" else None
    if k is None or yielded[1 + k] is not step_op.result or not isinstance(step, int) or \
            isinstance(step, bool) or step < 1:
        return None
    first = op.operands[0].owner
    if first is not None and first.name == "const":  # folded: constant bounds, as `for` tests
        lo, hi = int_const(op.operands[1 + k]), int_const(stop)
        if lo is None or hi is None or bool(first.attrs["value"]) != (lo < hi):
            return None
    elif first is None or first.name != "lt" or first.operands[0] is not op.operands[1 + k] \
            or first.operands[1] is not stop:
        return None
    if any(u not in (test, region.ops[-1]) for u in uses.get(step_op.result, [])) or \
            any(u is not region.ops[-1] for u in uses.get(test.result, [])):
        return None
    return CountedLoop(k, stop, step)
