"""Triton rules of the random ops: `tl.rand(seed, offsets)` and family, called as they are, so
the generated kernel draws Triton's own numbers. randint's uint32 words are read as int32."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.oprules import emit_rule
from tiledsl.ir.core import Op
from tiledsl.ir.ops import RANDOM_OPS

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule(*RANDOM_OPS, "philox")
def _random(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    rounds = op.attrs.get("n_rounds", 10)
    call = f"tl.{op.name}({', '.join(args)}{'' if rounds == 10 else f', n_rounds={rounds}'})"
    if len(op.results) == 1:
        em.assign(op, call if op.name != "randint" else f"{call}.to(tl.int32, bitcast=True)",
                  indent)
        return
    names = [em.namer.fresh(r.hint or "rnd") for r in op.results]
    for r, name in zip(op.results, names):
        em.names[r] = name
    em.emit(indent, f"{', '.join(names)} = {call}")
    if op.name == "randint4x":
        for name in names:
            em.emit(indent, f"{name} = {name}.to(tl.int32, bitcast=True)")
