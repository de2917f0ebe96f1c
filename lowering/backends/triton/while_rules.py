"""The Triton rule of the `while` op: a Python `while` on a variable the loop carries, as a Triton
author writes a loop on a runtime condition (Triton's `scf.while`):

    go, lo, hi = tmp, 0, 5
    while go:
        ...
        go, lo, hi = tmp_3, lo_1, hi_1

The condition of the first trip is computed before the loop, the next one at the end of each
trip (the op's region yields it first); the carried values keep one name throughout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.oprules import emit_rule
from tiledsl.ir.core import Op

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule("while")
def _while(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
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
