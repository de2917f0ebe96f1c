"""Triton rules of shifted tiles (`x[tm + 1, tn]`) and the offsets of bounded or stepped slices
(`out[tm, n1:]`, `x[tm, ::2]`), written as a Triton author writes a stencil:

    offs_tm_p1 = offs_tm + 1
    mask_tm_p1 = offs_tm_p1 < 37
    x_tile = tl.load(x_ptr + offs_tm_p1[:, None] * 23 + offs_tn[None, :], mask=mask_tm_p1[:, None]
                     & mask_tn[None, :], other=0.0)

The mask keeps the tile's own lanes (those of the unshifted tile's mask) that land inside the
tensor's dimension; bounds a static shift cannot cross are left out. Shifted accesses take
pointers, never a TMA descriptor: a box does zero-fill reads outside the tensor, but it would
also read (and a store write) the lanes past the tile's own range that a shift moves inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.oprules import emit_rule
from tiledsl.ir.core import Op, Value
from tiledsl.ir.slices import Slice
from tiledsl.ir.types import TensorType
from tiledsl.lang.shifted import static_shift

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


def _extents(v: Value, uses: list[Op]) -> set[int]:
    """The sizes of the tensor dimensions the shifted range `v` indexes in `uses`."""
    out = set()
    for use in uses:
        if use.name not in ("load", "store"):
            continue
        t = use.operands[0].type
        assert isinstance(t, TensorType)
        full = use.attrs.get("full", ())
        operands = iter(use.operands[1:])
        for d, extent in enumerate(t.shape):
            if d not in full and next(operands) is v:
                out.add(extent)
    return out


def _bounds(em: KernelEmitter, v: Value, extent: int) -> list[str]:
    """The conditions that keep a shifted tile's lanes inside [0, extent) and its own range."""
    rg = em.ranges[v.owner.operands[0]]  # type: ignore[union-attr]
    offs, amount = em.value(v), static_shift(v)
    conds = [f"mask_{rg.name}"] if rg.ragged else []
    if amount is None or amount < 0:
        conds.append(f"({offs} >= 0)")
    if amount is None or rg.extent - 1 + amount >= extent:
        conds.append(f"({offs} < {extent})")
    return conds


@emit_rule("tile.shift")
def _tile_shift(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    rg = em.ranges[op.operands[0]]
    amount = static_shift(op.result)
    if amount is None:
        name, expr = f"offs_{rg.name}_shifted", f"offs_{rg.name} + {em.value(op.operands[1])}"
    elif amount >= 0:
        name, expr = f"offs_{rg.name}_p{amount}", f"offs_{rg.name} + {amount}"
    else:
        name, expr = f"offs_{rg.name}_m{-amount}", f"offs_{rg.name} - {-amount}"
    if amount == 0:  # a tile to a runtime size with no static bound (values.py): its offsets
        em.names[op.result] = name = f"offs_{rg.name}"
    else:
        name = em.namer.fresh(name)
        em.names[op.result] = name
        em.emit(indent, f"{name} = {expr}")
    extents = _extents(op.result, em.uses.get(op.result, []))
    if len(extents) == 1:  # one mask for every access it makes (the usual stencil)
        (extent,) = extents
        conds = _bounds(em, op.result, extent)
        if conds:
            suffix = "_p0" if amount == 0 else ""  # (the range's own mask keeps its name)
            mask = em.namer.fresh(f"mask_{name.removeprefix('offs_')}{suffix}")
            cond = _bare(conds[0]) if len(conds) == 1 else " & ".join(conds)
            em.emit(indent, f"{mask} = {cond}")
            em.shift_masks[(op.result, extent)] = mask


def shifted_offsets(em: KernelEmitter, v: Value, extent: int, wide: bool
                    ) -> tuple[str, list[str]]:
    """The offsets of a shifted range indexing a dimension of `extent` and its masks (1-D)."""
    offs = em.value(v)
    if wide:
        offs = f"{offs}.to(tl.int64)"
    if (v, extent) in em.shift_masks:
        return offs, [em.shift_masks[(v, extent)]]
    conds = _bounds(em, v, extent)
    return offs, [f"({' & '.join(conds)})"] if conds else []


def sliced(offs: str, part: Slice | None) -> str:
    """The offsets of a slice of a dimension, from those of a whole dimension of its size."""
    if part is None:
        return offs
    scaled = offs if part.step == 1 else f"{offs} * {part.step}"
    return f"({part.start} + {scaled})" if part.start else f"({scaled})" if part.step != 1 \
        else offs


def _bare(cond: str) -> str:
    return cond[1:-1] if cond.startswith("(") and cond.endswith(")") else cond
