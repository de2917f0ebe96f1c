"""Triton rules of the ops that select, scan or move the axes of a tile."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.casts import tl_dtype
from lowering.backends.triton.widen import padded
from lowering.backends.triton.oprules import emit_rule
from tiledsl.errors import BackendError
from tiledsl.ir.core import Op
from tiledsl.ir.ops import reshape_groups
from tiledsl.ir.types import TileType

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule("where")
def _where(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    division = op.attrs.get("c_division")  # Triton's `//` or `%` of two ints, which a
    floor = op.operands[2].owner  # @triton.jit body's composes of tiledsl's (values.py
    if division and floor is not None and floor.name == division:  # `_truncated`): LLVM's
        a, b = (em.value(v) for v in floor.operands)  # sdiv / srem, the rest left dead
        em.assign(op, em.widened(op, f"{a} {'//' if division == 'floordiv' else '%'} {b}"),
                  indent)
        return
    em.assign(op, em.widened(op, f"tl.where({args[0]}, {args[1]}, {args[2]})"), indent)


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


def _exact_groups(op: Op, src: TileType, dst: TileType) -> None:
    """tl.reshape sees every lane: the constant dimensions a reshape merges or splits must not
    be held padded (a dimension it keeps whole keeps its padding where it was)."""
    for xs, ys in reshape_groups(src.shape, dst.shape) or []:
        if len(xs) == 1 and len(ys) == 1:
            continue
        for d in [src.shape[i] for i in xs] + [dst.shape[i] for i in ys]:
            if isinstance(d, int) and padded(d) != d:
                raise BackendError(
                    f"the triton backend cannot reshape a tile of shape "
                    f"{'x'.join(map(str, src.shape))} to {'x'.join(map(str, dst.shape))}: its "
                    f"dimension of {d} is held in {padded(d)} lanes (Triton's tiles are "
                    "powers of two)", loc=op.loc,
                    hint="merge or split only dimensions that are powers of two")


@emit_rule("reshape")
def _reshape(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    src, rt = op.operands[0].type, op.result.type
    assert isinstance(src, TileType) and isinstance(rt, TileType)
    _exact_groups(op, src, rt)
    em.assign(op, f"tl.reshape({args[0]}, {em.shape(rt)})", indent)


@emit_rule("join")
def _join(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    em.assign(op, f"tl.join({args[0]}, {args[1]})", indent)


@emit_rule("gather")
def _gather(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    """tl.gather with the index taken modulo the axis's lanes (a power of two: one AND), so
    that masked lanes' garbage indices stay in the tile (Triton's interpreter raises on them;
    the NumPy semantics already refused an out-of-range index of a lane that counts)."""
    src = op.operands[0].type
    assert isinstance(src, TileType)
    d = src.shape[op.attrs["axis"]]
    lanes = str(padded(d) - 1) if isinstance(d, int) else f"({em.block_expr(d)} - 1)"
    em.assign(op, f"tl.gather({args[0]}, {args[1]} & {lanes}, {op.attrs['axis']})", indent)


@emit_rule("split")
def _split(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    names = [em.namer.fresh(r.hint or "half") for r in op.results]
    for r, name in zip(op.results, names):
        em.names[r] = name
    em.emit(indent, f"{names[0]}, {names[1]} = tl.split({args[0]})")
