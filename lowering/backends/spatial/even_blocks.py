"""Block sizes that split a grid dimension evenly over the PE array, power of two or not.

The frontend offers power-of-two block sizes (what Triton's `tl.arange` needs). A spatial array
has no such rule, and a dimension that power-of-two blocks cannot split evenly over the grid
leaves PEs idle in the last round: a 3328-row GEMM on 8 PE rows gets 416-row blocks on
Tenstorrent's hand-tuned Wormhole configs, none of 256 or 512. So the spatial space also offers,
for each tile of a grid dimension that a `dot` multiplies, the blocks that cut its extent into
a whole number of rounds over the PE rows (grid axis 0 of a 2-D grid, `fold=rows`), the PE
columns (axis 1) or all PEs (a 1-D grid), in multiples of the matrix unit's minimum efficient
shape along that axis (`Arch.min_mma`: M for a product's rows, N for its columns, K for the
dimension it reduces). The GPU backends' spaces keep their power-of-two blocks.
"""

from __future__ import annotations

from lowering.backends.spatial.arch import Arch
from tiledsl.runtime.config import ConfigSpace
from tiledsl.ir.core import Function, walk
from tiledsl.ir.types import RangeType, TileType


def with_even_blocks(space: ConfigSpace, fn: Function, grids: list, arch: Arch) -> ConfigSpace:
    """`space` with each block param's choices joined by its even splits (`even_splits`)."""
    symbols = fn.tunable_symbols()
    for p in space.params:
        if not p.name.startswith("block_sizes["):
            continue
        extra = even_splits(fn, grids, symbols[int(p.name[len("block_sizes["):-1])], arch)
        extra = [b for b in extra if b <= max(p.choices) and b not in p.choices]
        if extra:
            space = space.with_choices(p.name, tuple(sorted((*p.choices, *extra))), p.default)
    return space


def even_splits(fn: Function, grids: list, symbol: str, arch: Arch) -> list[int]:
    """The blocks of `symbol` (a grid dimension's tile that a dot multiplies) that split its
    extent into whole rounds over the PEs along its grid axis, each a multiple of the matrix
    unit's minimum along the dot's axis; powers of two left out (the space has them)."""
    unit = _dot_unit(fn, symbol, arch)
    out: set[int] = set()
    for grid in grids if unit else []:
        ranges = list(grid.regions[0].args)
        for axis, r in enumerate(ranges):
            t = r.type
            if not isinstance(t, RangeType) or t.block != symbol:
                continue
            parts = arch.pes if len(ranges) == 1 else (arch.rows, arch.cols)[axis] \
                if len(ranges) == 2 else 1
            rounds = 1
            while t.extent // (parts * rounds) >= unit:
                block, rest = divmod(t.extent, parts * rounds)
                if rest == 0 and block % unit == 0 and block & (block - 1):
                    out.add(block)
                rounds += 1
    return sorted(out)


def _dot_unit(fn: Function, symbol: str, arch: Arch) -> int:
    """The matrix unit's minimum along the dot axis `symbol` indexes (the largest, if it indexes
    several), or 0 where no dot's tile has it."""
    unit = 0
    for op in walk(fn.body):
        if op.name != "dot":
            continue
        a, b = (o.type for o in op.operands)
        assert isinstance(a, TileType) and isinstance(b, TileType)
        roles = ((a.shape[-2], 0), (b.shape[-1], 1), (a.shape[-1], 2))
        unit = max([unit] + [arch.min_mma[i] for d, i in roles if d == symbol])
    return unit
