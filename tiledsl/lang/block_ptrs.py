"""Triton's block pointers: `td.make_block_ptr(base, shape, strides, offsets, block_shape,
order)`, `td.advance(p, offsets)`, and `td.load(p, boundary_check=(0, 1),
padding_option="zero")` / `td.store(p, value, boundary_check=...)` on them, as Triton's
tutorials, FlagGems and flash-linear-attention's Ascend kernels write them.

A block pointer is the pointer arithmetic it stands for: the block's element `(i, j, ...)` is
at `base + sum((offsets[d] + i_d) * strides[d])`, and `boundary_check` masks, along the
dimensions it names, the lanes outside `[0, shape[d])` (read as 0, or NaN with
`padding_option="nan"`; not written). So a load or store through one is a `td.load` /
`td.store` through a pointer (pointers.py), checked as those are: the race check sees the
addresses, and the NumPy backend refuses a lane a missing `boundary_check` leaves past the
tensor. `order` (the dimensions' memory order, for Triton's TMA lowering) changes no address.

A loop carries a block pointer that `td.advance` moves (`p = td.advance(p, (0, BK))`, the
matmul tutorial's K loop) as its offsets, one int64 tile; a store through one a loop moves is
refused by the race check, which cannot follow offsets taken out of that tile: make the store's
block pointer from the trip's own offsets (`td.make_block_ptr(..., (pid_m * BM, k * BK),
...)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tiledsl.errors import ShapeError, TraceError
from tiledsl import dtypes
from tiledsl.frontend.loops import Carried
from tiledsl.frontend.pointers import Pointer, PointerType, pointer
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, TileValue, cast, to_value
from tiledsl.lang import language as lang
from tiledsl.lang.arange import arange

PADDING = {"": 0, "zero": 0, "nan": float("nan")}  # td.load's padding_option (access.py)


@dataclass(frozen=True)
class BlockPointer(Carried):
    """Triton's block pointer: the block `block` at `offsets` of a `shape` laid out with
    `strides` from `base`. A loop carries its offsets as one int64 tile (`carried`)."""

    base: Pointer
    shape: tuple[Any, ...]
    strides: tuple[Any, ...]
    offsets: tuple[Any, ...]
    block: tuple[int, ...]
    order: tuple[int, ...]

    @property
    def type(self) -> PointerType:
        """Triton's `p.type.element_ty` (FlagGems casts a stored value to it): the dtype of the
        elements, which `x.to(...)` takes as Triton's cast takes the block's type."""
        return PointerType(self.base.base.dtype)

    dtype = type

    def addresses(self, boundary_check: Any) -> tuple[Pointer, TileValue | None]:
        """The block's elements as a pointer tile, and the mask `boundary_check` asks for."""
        tr = current()
        dims = _dims(boundary_check, len(self.block))
        total: Any = self.base.offset
        mask: Any = None
        for d, (n, stride, start) in enumerate(zip(self.shape, self.strides, self.offsets)):
            index = _along(to_value(start) + arange(0, self.block[d]), d, len(self.block))
            total = total + index * stride
            if d in dims:
                inside = (index >= 0) & (index < n)
                mask = inside if mask is None else mask & inside
        if not isinstance(total, TileValue) or total.shape == ():
            tr.fail(ShapeError, "a block pointer's block has no lanes")
        return Pointer(self.base.base, total), mask

    def carried(self) -> TileValue:
        """The offsets as one int64 tile of a power-of-two length."""
        lanes = _lanes(len(self.offsets))
        index = arange(0, lanes)
        v: Any = lang.zeros((lanes,), dtype=dtypes.int64)
        for d, start in enumerate(self.offsets):
            v = lang.where(index == d, cast(to_value(start), dtypes.int64), v)
        return v

    def rebuilt(self, v: TileValue) -> BlockPointer:
        """This block pointer at the offsets of tile `v` (what `carried` made)."""
        index = arange(0, v.shape[0])
        offsets = tuple(lang.sum(lang.where(index == d, v, 0)) for d in range(len(self.block)))
        return BlockPointer(self.base, self.shape, self.strides, offsets, self.block, self.order)

    def same_kind(self, other: Any) -> bool:
        """Whether `other` is this block pointer at other offsets (what td.advance makes)."""
        return other.base.base.value is self.base.base.value and \
            other.base.offset is self.base.offset and other.block == self.block and \
            other.shape is self.shape and other.strides is self.strides


def _lanes(rank: int) -> int:
    return 1 << max(rank - 1, 0).bit_length()


def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any,
                   order: Any) -> BlockPointer:
    """Triton's `tl.make_block_ptr(base, shape, strides, offsets, block_shape, order)`."""
    tr = current("td.make_block_ptr()")
    if tr.depth == "host":
        tr.fail(TraceError, "td.make_block_ptr() is made inside the grid",
                hint="for pid in td.grid(n): p = td.make_block_ptr(x, ...)")
    if isinstance(base, Tensor):
        base = pointer(base, 0)
    if not isinstance(base, Pointer) or base.offset.shape != ():
        tr.fail(TraceError, "td.make_block_ptr(): the base is a tensor or a pointer into one "
                f"at a scalar offset (x + start), got {type(base).__name__}")
    parts = [tuple(v) if isinstance(v, (tuple, list)) else None
             for v in (shape, strides, offsets, block_shape, order)]
    if any(p is None or len(p) != len(parts[3] or ()) for p in parts) or not parts[3]:
        tr.fail(ShapeError, "td.make_block_ptr(): shape, strides, offsets, block_shape and "
                "order are tuples of one length (the block's rank)")
    block = parts[3]
    if not all(isinstance(b, (int, np.integer)) and b > 0 and b & (b - 1) == 0
               for b in block):  # type: ignore[union-attr]
        tr.fail(ShapeError, f"td.make_block_ptr(): block_shape {block} must be powers of two "
                "known when tracing, as Triton's")
    for what, values in (("shape", parts[0]), ("strides", parts[1]), ("offsets", parts[2])):
        for v in values:  # type: ignore[union-attr]
            if not (isinstance(v, (int, np.integer)) and not isinstance(v, bool)) and not (
                    isinstance(v, TileValue) and v.shape == () and v.dtype.is_int):
                tr.fail(TraceError, f"td.make_block_ptr(): {what} holds ints or integer "
                        f"scalars, got {v!r}")
    return BlockPointer(base, parts[0], parts[1], parts[2],  # type: ignore[arg-type]
                        tuple(int(b) for b in block), tuple(parts[4]))  # type: ignore[union-attr, arg-type]


def advance(ptr: Any, offsets: Any) -> BlockPointer:
    """Triton's `tl.advance(p, offsets)`: the block moved by `offsets` along each dimension."""
    tr = current("td.advance()")
    if not isinstance(ptr, BlockPointer):
        tr.fail(TraceError, f"td.advance() moves a block pointer, got {type(ptr).__name__}",
                hint="move a pointer with `+`: p + offsets")
    moves = tuple(offsets) if isinstance(offsets, (tuple, list)) else ()
    if len(moves) != len(ptr.block):
        tr.fail(ShapeError, f"td.advance(): {len(moves)} offsets for a block of rank "
                f"{len(ptr.block)}")
    return BlockPointer(ptr.base, ptr.shape, ptr.strides,
                        tuple(a + b for a, b in zip(ptr.offsets, moves)), ptr.block, ptr.order)


def _dims(boundary_check: Any, rank: int) -> set[int]:
    dims = tuple(boundary_check) if isinstance(boundary_check, (tuple, list)) else \
        () if boundary_check is None else (boundary_check,)
    if not all(isinstance(d, (int, np.integer)) and 0 <= d < rank for d in dims):
        current().fail(TraceError, f"boundary_check={boundary_check!r}: dimensions of the "
                       f"block, 0 to {rank - 1}")
    return {int(d) for d in dims}


def _along(v: TileValue, d: int, rank: int) -> TileValue:
    """A 1-D tile as dimension `d` of a rank-`rank` tile (the others of size 1)."""
    index = tuple(slice(None) if i == d else None for i in range(rank))
    return v[index] if rank > 1 else v


__all__ = ["BlockPointer", "advance", "make_block_ptr"]
