"""Triton rules of the ops that select, scan or move the axes of a tile."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.casts import tl_dtype
from lowering.backends.triton.oprules import emit_rule
from tiledsl.ir.core import Op
from tiledsl.ir.types import TileType

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule("where")
def _where(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    em.assign(op, f"tl.where({args[0]}, {args[1]}, {args[2]})", indent)


@emit_rule("expand_dims")
def _expand_dims(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    src = op.operands[0].type
    assert isinstance(src, TileType)
    if src.rank == 0:
        em.assign(op, f"tl.expand_dims({args[0]}, 0)", indent)
        return
    idx = [":"] * src.rank
    idx.insert(op.attrs["axis"], "None")
    em.assign(op, f"{args[0]}[{', '.join(idx)}]", indent)


@emit_rule("transpose")
def _transpose(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    perm = tuple(op.attrs["perm"])
    em.assign(op, f"tl.trans({args[0]})" if perm == (1, 0) else f"tl.permute({args[0]}, {perm})",
              indent)


@emit_rule("cumsum")
def _cumsum(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    x, rt = op.operands[0].type, op.result.type
    assert isinstance(x, TileType) and isinstance(rt, TileType)
    src = args[0] if x.dtype == rt.dtype else f"{args[0]}.to({tl_dtype(rt.dtype)})"
    em.assign(op, f"tl.cumsum({src}, axis={op.attrs['axis']})", indent)
