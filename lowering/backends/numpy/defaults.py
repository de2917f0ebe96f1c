"""The NumPy backend's default block sizes: the config that runs fastest here.

Every program of a grid runs at once (memory.py), so a grid's block size costs no Python
overhead, and a block that divides the extent makes every access a view of the tensor itself,
with no padded copy. So a grid's tile defaults to the largest block (up to DEFAULT_BLOCK) that
divides its extent: 1 for a ragged one (257x333, 1,000,003), unless a `dot` of other than two
loads multiplies the tile (tiles of 1 would be a batch of scalar products; a dot of two loads is
one product over the whole grid, dots.py). A loop's tile covers its extent in one
iteration where DEFAULT_BLOCK allows (each iteration costs Python overhead). A dot's tile, and
a longer loop's (uncapped), gets the largest block (fewest iterations, largest BLAS calls)
that pads its extent by at most a quarter or 16 elements (the padding is copied and computed too).
A loop's tile that only a reduction's loads read (plan.trimmed_loads: they read no padding) covers
its extent in one iteration, however long: the whole row is one view of the tensor, and one
NumPy reduction sums it as plain NumPy does. So does a dot's contraction tile that only loads
read (trimmed too): one matmul over the whole shared dimension, with no padding along it.
"""

from __future__ import annotations

from lowering.backends.numpy.plan import trimmed_loads
from tiledsl.runtime.config import ConfigSpace
from tiledsl.ir.core import Block, Function, Value
from tiledsl.ir.types import RangeType, TileType

DEFAULT_BLOCK = 1024  # big enough for BLAS and few loop iterations; tiles of memory-friendly size
PAD_LIMIT = 1.25  # a big block may pad its extent by this factor at most,
PAD_SLACK = 16  # or by this many elements (a dot over 5 columns takes one tile of 8)


def default_blocks(space: ConfigSpace, fn: Function) -> ConfigSpace:
    """`space` with each block size's default chosen as the module docstring says."""
    grid, loops, dots = _symbol_roles(fn.body)
    dots -= _loaded_dots(fn)
    free = _padding_free(fn)
    symbols = fn.tunable_symbols()
    for p in space.params:
        if not p.name.startswith("block_sizes["):
            continue
        name = symbols[int(p.name[len("block_sizes["):-1])]
        if name in grid and name not in dots:
            space = space.with_default(p.name, _dividing_block(p.choices, fn.symbols[name].extent))
        elif name in free and name in loops and name not in grid and \
                max(p.choices) >= fn.symbols[name].extent:
            space = space.with_default(p.name, min(c for c in p.choices
                                                   if c >= fn.symbols[name].extent))
        elif name in loops and name not in grid and name not in dots:
            space = space.with_default(p.name, _loop_block(p.choices, fn.symbols[name].extent))
        else:
            space = space.with_default(p.name, _big_block(p.choices, fn.symbols[name].extent))
    return space


def _dividing_block(choices: tuple[int, ...], extent: int) -> int:
    """The largest block up to DEFAULT_BLOCK that divides `extent` (1 if the choices have it)."""
    fits = [c for c in choices if c <= DEFAULT_BLOCK and extent % c == 0]
    return max(fits) if fits else _big_block(choices, extent)


def _loop_block(choices: tuple[int, ...], extent: int) -> int:
    """A loop's tile: one iteration up to DEFAULT_BLOCK (each costs Python overhead), past it
    the largest block that pads little, uncapped (a loop's tile of a view costs no memory)."""
    whole = [c for c in choices if extent <= c <= DEFAULT_BLOCK]
    return min(whole) if whole else _big_block(choices, extent, cap=max(choices))


def _big_block(choices: tuple[int, ...], extent: int, cap: int = DEFAULT_BLOCK) -> int:
    capped = [c for c in choices if c <= cap] or [min(choices)]
    fits = [c for c in capped if -(-extent // c) * c <= max(PAD_LIMIT * extent, extent + PAD_SLACK)]
    return max(fits or capped)


def _symbol_roles(block: Block) -> tuple[set[str], set[str], set[str]]:
    """The block symbols of grid ranges, of loop ranges and of a dot's tiles."""
    grid: set[str] = set()
    loops: set[str] = set()
    dots: set[str] = set()
    for op in block.ops:
        if op.name == "dot":
            for v in (*op.operands, *op.results):
                if isinstance(v.type, TileType):
                    dots |= {d for d in v.type.shape if isinstance(d, str)}
        for region in op.regions:
            for a in region.args:
                if isinstance(a.type, RangeType) and isinstance(a.type.block, str):
                    (grid if op.name == "grid" else loops).add(a.type.block)
            for mine, inner in zip((grid, loops, dots), _symbol_roles(region)):
                mine |= inner
    return grid, loops, dots


def _loaded_dots(fn: Function) -> set[str]:
    """The grid block symbols that tile only dots of two loads (through casts): dots.grid_dot
    computes those in one product over every program whatever the tile, so they may divide
    the extent (no padding) as an elementwise grid's do."""
    producers = {r: op for op in fn.walk() for r in op.results}
    loaded: set[str] = set()
    other: set[str] = set()
    for op in fn.walk():
        if op.name != "dot":
            continue
        sources = []
        for v in op.operands:
            while v in producers and producers[v].name == "cast":
                v = producers[v].operands[0]
            sources.append(producers.get(v))
        mine = {d for v in (*op.operands, *op.results) if isinstance(v.type, TileType)
                for d in v.type.shape if isinstance(d, str)}
        both = all(p is not None and p.name == "load" for p in sources)
        (loaded if both else other).update(mine)
    return loaded - other


def _padding_free(fn: Function) -> set[str]:
    """The block symbols that tile only the reduced axis of loads a reduction reads trimmed
    (and of casts between): their tiles' padding is never read."""
    chain: dict[Value, int] = {op.result: axis for op, axis in trimmed_loads(fn).items()}
    free: set[str] = set()
    used: set[str] = set()
    for op in fn.walk():
        if op.name == "cast" and op.operands[0] in chain:
            chain[op.result] = chain[op.operands[0]]
        values = [*op.results, *(a for r in op.regions for a in r.args)]
        for v in values:
            if isinstance(v.type, TileType):
                for i, d in enumerate(v.type.shape):
                    if isinstance(d, str):
                        (free if chain.get(v) == i else used).add(d)
    return free - used
