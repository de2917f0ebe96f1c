"""IR types: global tensors, tiles (shapes over block-size symbols and constants) and tile ranges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from tiledsl.dtypes import DType

# A tile dimension: a constant extent, or the name of a block-size symbol ("B0") set by the config.
Dim = Union[int, str]


@dataclass(frozen=True)
class TensorType:
    """A tensor in global memory: a kernel argument or an output it allocates."""

    shape: tuple[int, ...]
    dtype: DType

    def __str__(self) -> str:
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + self.dtype.short + ">"

    @property
    def element_ty(self) -> DType:
        """Triton's `ptr.type.element_ty`: the tensor's dtype."""
        return self.dtype


@dataclass(frozen=True)
class TileType:
    """A value held by one program: a tile of `shape` (empty for a scalar) of `dtype`."""

    shape: tuple[Dim, ...]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def element_ty(self) -> DType:
        """Triton's `x.type.element_ty`: the dtype of the elements."""
        return self.dtype

    @property
    def scalar(self) -> DType:
        """Triton's `x.type.scalar` (FlagGems' floor_divide asks `x.type.scalar.is_int()`)."""
        return self.dtype

    def with_dtype(self, dtype: DType) -> TileType:
        return TileType(self.shape, dtype)

    def __str__(self) -> str:
        if not self.shape:
            return self.dtype.short
        return "tile<" + "".join(f"{d}x" for d in self.shape) + self.dtype.short + ">"


# The extent of a loop range whose runtime stop has no static bound (Helion's `hl.tile(m_g)` for
# a loaded m_g): the most elements an int32 index reaches. Such a range indexes tensors only
# through index tiles (`start + t.index`), whose bounds are checked or masked as a gather's.
UNBOUNDED = 2**31 - 1


@dataclass(frozen=True)
class RangeType:
    """The iteration space of one tile dimension: `extent` elements cut into blocks of `block`.

    With `stop`, a loop's runtime stop (`td.tile(tq.end)`, the `for` op's first operand) cuts
    it, and `extent` is the stop's static bound: it may index any dimension at least that long.
    With `shifted`, it is a range moved by an offset (`tile.shift`, `x[tm + 1]`): it may index a
    dimension of any size, its lanes outside the dimension masked.
    """

    extent: int
    block: Dim
    stop: bool = False
    shifted: bool = False

    def __str__(self) -> str:
        flags = (",stop" if self.stop else "") + (",shifted" if self.shifted else "")
        return f"range<{self.extent}x{self.block}{flags}>"

    def indexes(self, size: int, offsets: bool = False) -> bool:
        """Whether this range may index a tensor dimension of `size` elements: of its extent n,
        with a stop of at least n, and with `offsets` (a load from an integer tensor) of n + 1:
        the n + 1 boundaries of n jagged rows, of which it covers the first n. A shifted range
        (`t + k`) states its offset, so it may index a dimension of any size."""
        return self.shifted or self.extent == size or \
            (offsets and size == self.extent + 1) or (self.stop and self.extent <= size)


Type = Union[TensorType, TileType, RangeType]
