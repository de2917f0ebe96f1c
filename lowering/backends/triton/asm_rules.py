"""Triton rule of `td.inline_asm_elementwise`: Triton's `tl.inline_asm_elementwise`, with the
assembly, constraints and pack as the kernel gave them (tiledsl/lang/inline_asm.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.casts import tl_dtype
from lowering.backends.triton.oprules import emit_rule
from tiledsl.ir.core import Op
from tiledsl.ir.types import TileType

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule("inline_asm")
def _inline_asm(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    types = [r.type for r in op.results]
    assert all(isinstance(t, TileType) for t in types)
    kinds = ", ".join(tl_dtype(t.dtype) for t in types)  # type: ignore[union-attr]
    call = (f"tl.inline_asm_elementwise({op.attrs['asm']!r}, {op.attrs['constraints']!r}, "
            f"[{', '.join(args)}], ({kinds},), is_pure={bool(op.attrs.get('is_pure', True))}, "
            f"pack={op.attrs['pack']})")
    names = [em.namer.fresh(r.hint or "asm") for r in op.results]
    for r, name in zip(op.results, names):
        em.names[r] = name
    em.emit(indent, f"{', '.join(names)}, = {call}")
