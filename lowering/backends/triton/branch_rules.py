"""The Triton rule of the `if` op: a Python `if` on the scalar, as a Triton author writes it.

Each result is a variable both branches assign (Triton's rule for a value an `if` defines: the
same type in both branches, or defined before it); a branch that only passes on what the
variable already holds assigns nothing, and an empty `else:` is left out:

    total = 0.0
    if m_size > 0:
        ...
        total = acc
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.oprules import emit_rule
from tiledsl.ir.core import Block, Op

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule("if")
def _if(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    names = [em.preset.get(r) or em.namer.fresh(r.hint or "v") for r in op.results]
    fresh = set(names) - set(em.names.values())  # no value holds these yet
    for region in op.regions:  # a value made for one result only is made under its name
        for v, name in zip(region.ops[-1].operands, names):
            owner = v.owner
            if name in fresh and owner in region.ops and owner.name != "for" and \
                    len(em.uses.get(v, [])) == 1 and v not in em.preset and \
                    not em.scalar_written(v):  # (full_value widens those)
                em.preset[v] = name
    em.emit(indent, f"if {args[0]}:")
    if not _branch(em, op.regions[0], names, indent + 1):
        em.emit(indent + 1, "pass")
    em.emit(indent, "else:")
    if not _branch(em, op.regions[1], names, indent + 1):
        em.lines.pop()
    for r, name in zip(op.results, names):
        em.names[r] = name


def _branch(em: KernelEmitter, region: Block, names: list[str], indent: int) -> bool:
    """Emit one branch, ending in the assignments of the results; whether it wrote a line."""
    start = len(em.lines)
    em.block(region, indent)
    changes = [(n, em.full_value(v)) for n, v in zip(names, region.ops[-1].operands)
               if em.value(v) != n]
    if changes:  # one simultaneous assignment, as a loop's carried values are
        em.emit(indent, ", ".join(n for n, _ in changes) + " = "
                + ", ".join(v for _, v in changes))
    return len(em.lines) > start
