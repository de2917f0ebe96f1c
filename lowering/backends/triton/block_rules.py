"""Triton rules of what a block size gives: `tile.id` and `tile.block_size`
(tiledsl/frontend/block_sizes.py), and `arange` (tiledsl/lang/arange.py). A range's block is its
`BLOCK_*` constexpr (or a literal), a tile's index along its loop is `begin // BLOCK` (the
program id of a grid axis, the iteration of a loop), and `td.arange` is `tl.arange` over a
block or a power of two."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.oprules import emit_rule
from lowering.backends.triton.casts import tl_dtype
from tiledsl import dtypes
from tiledsl.ir.core import Op
from tiledsl.ir.types import TileType

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule("tile.id")
def _tile_id(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    rg = em.ranges[op.operands[0]]
    em.assign(op, f"begin_{rg.name} // {rg.block_expr}", indent)


@emit_rule("tile.block_size")
def _tile_block_size(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    em.alias(op, em.ranges[op.operands[0]].block_expr)


@emit_rule("arange")
def _arange(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    t = op.result.type
    assert isinstance(t, TileType)
    expr = f"tl.arange(0, {em.block_expr(t.shape[0])})"  # int32, as td.arange's default
    if op.attrs["start"]:
        expr += f" + {op.attrs['start']}"
    if t.dtype != dtypes.int32:
        expr = f"({expr}).to({tl_dtype(t.dtype)})"
    em.assign(op, expr, indent)
