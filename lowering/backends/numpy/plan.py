"""What the NumPy executor works out about a function once, not on every call.

A `Plan` depends on the function's IR only: each block's last uses of its values, the tensors
the function stores to, and the loads a reduction reads trimmed (see `trimmed_loads`). A traced
function is made per argument signature (shapes, dtypes, compile-time values), so keying the
plan on the function object keys it on all of those; block sizes, strides and argument values
are read on every call and are no part of it. Plans live as long as their function.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lowering.backends.numpy.coverage import covered_empties
from tiledsl.ir import views
from tiledsl.ir.core import Block, Function, Op, Value, walk
from tiledsl.ir.gathers import gathers

# A reduction whose padded lanes hold this value loses nothing when they are left out.
IDENTITY = {"sum": 0.0, "max": float("-inf"), "min": float("inf")}


@dataclass
class Plan:
    """Per-function facts the executor reads on every call."""

    dead: dict[int, dict[int, list[Value]]]  # id(block) -> op index -> values dead from there
    written: set[Value]  # roots of the tensors the function stores to
    trimmed: dict[Op, int]  # loads a reduction reads without their padding -> its tile axis
    steps: dict[int, list] = field(default_factory=dict)  # id(block) -> Executor.steps
    accesses: dict[tuple, Any] = field(default_factory=dict)  # prepared.key -> Recipe
    facts: dict[Op, tuple] = field(default_factory=dict)  # executor._facts, per access op
    consts: dict[tuple, Any] = field(default_factory=dict)  # (const op, grid rank) -> array
    grids: dict[tuple, Any] = field(default_factory=dict)  # (grid op, blocks) -> sizes, ranges;
    # (plain loop op, blocks, grid rank) -> its tiles' ranges
    unfilled: set[Value] = field(default_factory=set)  # td.empty results needing no poison
    compiled: dict[tuple, Any] = field(default_factory=dict)  # (id(block), release) -> compiled.py
    # roots a disjoint store writes, or accessed at an index loaded from memory (disjoint.py)
    tracked: set[Value] = field(default_factory=set)
    serial: set[Op] = field(default_factory=set)  # grids that take a spin lock (locks.py)


_PLANS: weakref.WeakKeyDictionary[Function, Plan] = weakref.WeakKeyDictionary()
made = 0  # how many plans were made (tests check that a second call makes none)


def plan_of(fn: Function) -> Plan:
    """`fn`'s plan, made on the first call."""
    plan = _PLANS.get(fn)
    if plan is None:
        global made
        made += 1
        plan = _PLANS[fn] = Plan({id(b): last_uses(b) for b in _blocks(fn.body)},
                                 views.written(fn), trimmed_loads(fn),
                                 unfilled=covered_empties(fn), tracked=disjoint_roots(fn),
                                 serial=locking_grids(fn))
    return plan


def disjoint_roots(fn: Function) -> set[Value]:
    """The tensors (roots of views) a `td.store(..., disjoint=True)` writes, and those whose
    programs' loads and stores the race check left to the data: an index loaded from memory
    (races.py, `tracked`)."""
    return {views.root(op.operands[0]) for op in walk(fn.body)
            if op.name == "store" and op.attrs.get("disjoint") or
            op.name in ("load", "store") and op.attrs.get("tracked")}


def locking_grids(fn: Function) -> set[Op]:
    """The grids whose programs take a spin lock (`while` ops marked `lock`: locks.py)."""
    return {op for op in walk(fn.body) if op.name == "grid" and
            any(o.name == "while" and o.attrs.get("lock") for o in walk(op.regions[0]))}


def _blocks(block: Block) -> Iterator[Block]:
    yield block
    for op in block.ops:
        for region in op.regions:
            yield from _blocks(region)


def last_uses(block: Block) -> dict[int, list[Value]]:
    """For each op of `block`, the values defined in `block` that no op from there on uses
    (nested regions' uses count as their op's)."""
    last: dict[Value, int] = {}
    for i, op in enumerate(block.ops):
        for v in uses_in(op):
            last[v] = i
    defined = set(block.args) | {r for op in block.ops for r in op.results}
    dead: dict[int, list[Value]] = {}
    for v, i in last.items():
        if v in defined:
            dead.setdefault(i + 1, []).append(v)
    return dead


def uses_in(op: Op) -> Iterator[Value]:
    yield from op.operands
    for region in op.regions:
        for inner in region.ops:
            yield from uses_in(inner)


def trimmed_loads(fn: Function) -> dict[Op, int]:
    """Loads whose only use (through float casts, each used once) is a sum, max or min whose
    identity is the load's `other`, each with the tile axis it reduces: the lanes past the
    tensor's end along it would add that identity, so the reduction may read the in-range lanes
    alone, a view of the tensor, instead of a padded copy. Likewise a dot's operand whose
    `other` is 0, along the contraction axis (the ragged pass zeroes the other operand's lanes
    there too: the dot drops the lanes one operand lacks, see executor._dot)."""
    uses: dict[Value, list[Op]] = {}
    ops = list(fn.walk())
    for op in ops:
        for v in op.operands:
            uses.setdefault(v, []).append(op)
    out: dict[Op, int] = {}
    for op in ops:
        if op.name != "load" or op.attrs.get("other") is None or op.attrs.get("mask") \
                or gathers(op):
            continue
        v = op.result
        while len(uses.get(v, ())) == 1 and uses[v][0].name == "cast" and \
                uses[v][0].result.type.dtype.is_float:  # type: ignore[union-attr]
            v = uses[v][0].result
        users = uses.get(v, ())
        if len(users) == 1 and users[0].name == "reduce" and \
                IDENTITY.get(users[0].attrs["kind"]) == float(op.attrs["other"]):
            out[op] = users[0].attrs["axis"]
        elif len(users) == 1 and users[0].name == "dot" and float(op.attrs["other"]) == 0.0:
            rank = len(v.type.shape)  # type: ignore[union-attr]
            out[op] = rank - 1 if users[0].operands[0] is v else rank - 2  # the contraction
    return out
