"""The Triton rule of the `while` op: a Python `while` on a variable the loop carries, as a Triton
author writes a loop on a runtime condition (Triton's `scf.while`):

    go, lo, hi = tmp, 0, 5
    while go:
        ...
        go, lo, hi = tmp_3, lo_1, hi_1

The condition of the first trip is computed before the loop, the next one at the end of each
trip (the op's region yields it first); the carried values keep one name throughout.

A counted loop, `range(lo, hi, step)` over runtime bounds (tiledsl/ir/counted.py, its final
value unused), is a `for` instead, as its author wrote it in Triton:

    total = tmp_2
    for c in range(0, lens_tile):
        ...
        total = tmp_3

A Python `while` is an `scf.while`, which Triton's software pipeliner leaves alone; an `scf.for`
has its loads pipelined over `num_stages` trips.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.oprules import emit_rule, prepare_rule
from lowering.backends.triton.casts import tl_dtype
from tiledsl.ir.bounds import interval
from tiledsl.ir.core import Op, Value
from tiledsl.ir.counted import counted_loop

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule("while")
def _while(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    if (counted := _counted(em, op)) is not None:
        _for(em, op, *counted, indent)
        return
    region = op.regions[0]
    names = [em.namer.fresh("go")] + [em.namer.fresh(r.hint or "v") for r in op.results]
    _assign(em, names, [em.full_value(v) for v in op.operands], indent)
    for a, r, name in zip(region.args, op.results, names[1:]):
        em.names[a] = em.names[r] = name
    em.emit(indent, f"while {names[0]}:")
    start = len(em.lines)
    em.block(region, indent + 1)
    _assign(em, names, [em.full_value(v) for v in region.ops[-1].operands], indent + 1)
    if len(em.lines) == start:
        em.emit(indent + 1, "pass")


def _assign(em: KernelEmitter, names: list[str], values: list[str], indent: int) -> None:
    """One simultaneous assignment of the names that change, so carried values can swap."""
    changes = [(n, v) for n, v in zip(names, values) if n != v]
    if changes:
        em.emit(indent, ", ".join(n for n, _ in changes) + " = " + ", ".join(v for _, v in changes))


def _counted(em: KernelEmitter, op: Op) -> tuple[int, Value, int] | None:
    """(the counter's position among the carried values, the bound, the step) of a counted
    `while` whose counter's final value nothing reads (a `for` does not give it), else None."""
    loop = counted_loop(op, em.uses)
    if loop is None or em.uses.get(op.results[loop.k]):
        return None
    return loop.k, loop.stop, loop.step


@prepare_rule("while")
def _prepare(em: KernelEmitter, op: Op) -> None:
    """A counted loop's `for` steps and tests its counter itself: the ops that did are not
    written (the first test too, where nothing else reads it)."""
    if _counted(em, op) is None:
        return
    region = op.regions[0]
    test = region.ops[-1].operands[0].owner
    assert test is not None and test.operands[0].owner is not None
    em.skipped |= {test, test.operands[0].owner}
    first = op.operands[0]
    if first.owner is not None and em.uses.get(first) == [op]:
        em.skipped.add(first.owner)


def _for(em: KernelEmitter, op: Op, k: int, stop: Value, step: int, indent: int) -> None:
    region = op.regions[0]
    carried = [i for i in range(len(op.results)) if i != k]
    names = {i: em.namer.fresh(op.results[i].hint or "v") for i in carried}
    _assign(em, list(names.values()), [em.full_value(op.operands[1 + i]) for i in carried],
            indent)
    for i, name in names.items():
        em.names[region.args[i]] = em.names[op.results[i]] = name
    counter = em.namer.fresh(region.args[k].hint or "i")
    em.names[region.args[k]] = counter
    first, last = interval(op.operands[1 + k]), interval(stop)
    if first is not None and last is not None:  # its values: [start, stop), known bounds
        em.counters[region.args[k]] = (first[0], last[1] - 1)
    bounds = [em.value(op.operands[1 + k]), em.value(stop)] + ([str(step)] if step != 1 else [])
    tuning = [f"{name}={value}" for name, value in op.attrs.get("tuning", ())]
    loop = f"tl.range({', '.join(bounds + tuning)})" if tuning else f"range({', '.join(bounds)})"
    em.emit(indent, f"for {counter} in {loop}:")
    start = len(em.lines)
    if em.interpret:  # Triton's interpreter counts in Python ints, which have no .to()
        dtype = region.args[k].type.dtype  # type: ignore[union-attr]
        em.emit(indent + 1, f"{counter} = tl.full([], {counter}, {tl_dtype(dtype)})")
    em.block(region, indent + 1)
    yielded = region.ops[-1].operands
    _assign(em, list(names.values()), [em.full_value(yielded[1 + i]) for i in carried],
            indent + 1)
    if len(em.lines) == start:
        em.emit(indent + 1, "pass")
