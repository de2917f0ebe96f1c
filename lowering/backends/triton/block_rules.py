"""Triton rules of `tile.id` and `tile.block_size` (tiledsl/frontend/block_sizes.py): a range's block is
its `BLOCK_*` constexpr (or a literal), and a tile's index along its loop is
`begin // BLOCK` (the program id of a grid axis, the iteration of a loop)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.oprules import emit_rule
from tiledsl.ir.core import Op

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule("tile.id")
def _tile_id(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    rg = em.ranges[op.operands[0]]
    em.assign(op, f"begin_{rg.name} // {rg.block_expr}", indent)


@emit_rule("tile.block_size")
def _tile_block_size(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    em.alias(op, em.ranges[op.operands[0]].block_expr)
