"""The spatial backend's knobs and the constraints an architecture puts on configs."""

from __future__ import annotations

import math

from lowering.backends.spatial.arch import Arch
from tiledsl.runtime.config import Config, ConfigSpace, Constraint, Param
from tiledsl.ir.core import Function, block_index, walk
from tiledsl.ir.types import RangeType


def extend(space: ConfigSpace, fn: Function, arch: Arch, pick_default: bool = True
           ) -> ConfigSpace:
    """Add how the grid folds onto the PE array, buffer depth and multicast (for kernels with
    shareable loads); rule out configs whose buffers overflow a PE's SRAM, that need more DMA
    channels than a PE has or (static timing) whose schedule has more steps than it schedules
    (`static_steps.py`), in any grid (phase); estimate configs' cycles analytically
    (`estimate.py`) so the tuner tries the best-ranked first, and default to the config it
    ranks best (unless not `pick_default`)."""
    from lowering.backends.spatial.defaults import (UNIFORM, estimated_default, filled,
                                                    uniform_default)
    from lowering.backends.spatial.estimate import estimate_cycles
    from lowering.backends.spatial.even_blocks import with_even_blocks
    from lowering.backends.spatial.mapper import Mapping, can_multicast, grids
    from lowering.backends.spatial.static_steps import over_limit
    from lowering.backends.spatial.trips import reads_arguments

    phases = range(len(grids(fn)))
    space = with_even_blocks(space, fn, grids(fn), arch)
    two_d = any(len(g.regions[0].args) == 2 for g in grids(fn))
    space = space.with_param(Param("fold", ("rows", "linear") if two_d else ("linear",),
                                   "rows" if two_d else "linear",
                                   "grid -> PE placement: by grid row/column, or round robin"))
    space = space.with_param(Param("buffer_depth", (2, 3, 4), 2,
                                   "slots per streamed buffer (2 = double buffering)"))
    space = space.with_param(Param("multicast", (True, False) if can_multicast(fn) else (True,),
                                   True, "share row/column operands by NoC multicast (offered "
                                   "when some load is shared along a grid axis)"))

    readers = _reader_choices(fn, arch)
    if len(readers) > 1:
        space = space.with_param(Param(
            "dma_readers", readers, readers[0],
            "reader DMAs per PE: the kernel's load streams share them, time-multiplexed "
            "(offered when it loads more streams than a PE has DMA channels for)"))

    def fits(c: Config) -> str | None:
        for i in phases:
            m = Mapping(fn, c, arch, phase=i)
            why = m.check() or (over_limit(m) if arch.timing == "static" else None)
            if why is not None:
                return why if len(phases) == 1 else f"grid {i + 1}: {why}"
        return None

    space = space.with_constraint(Constraint(f"fits-{arch.name}", fits))

    def multicast_idle(c: Config) -> str | None:
        if c.get("multicast", True) or \
                any(Mapping(fn, c, arch, phase=i).multicast_possible for i in phases):
            return None
        return ("multicast=False maps as multicast=True does here: this fold and grid share no "
                "operand along whole PE rows or columns")

    space = space.with_redundancy(Constraint("multicast-idle", multicast_idle))

    def readers_idle(c: Config) -> str | None:
        asked = c.get("dma_readers")
        if asked is None or any(Mapping(fn, c, arch, phase=i).shared_readers >= asked
                                for i in phases):
            return None
        return (f"dma_readers={asked} maps as fewer do here: the loads that may share readers "
                "get no more than the DMA channels that the writer and the loads multicast to "
                "lines of PEs with varying trip counts leave")

    space = space.with_redundancy(Constraint("dma-readers-idle", readers_idle))
    unpriced = reads_arguments(fn)  # bounds read from values the space has not: guessed
    space = space.with_estimate(  # phases run one after another
        lambda c: sum(estimate_cycles(Mapping(fn, c, arch, phase=i, unpriced=unpriced))
                      for i in phases))
    if not pick_default:
        return space
    fill = _filling_blocks(space, fn, arch)
    if space.estimate is not None:  # the config the estimate ranks best (`defaults.py`)
        return estimated_default(space, groups=_block_groups(fn), fill=fill)
    # Else the largest uniform block size (down from 256) whose buffers fit (big tiles reuse
    # operands and amortize per-transfer costs), its grid tiles small enough to give every
    # PE a program.
    for size in UNIFORM:
        trial = filled(uniform_default(space, size), fill)
        if trial.default_is_valid():
            return trial
    return space


def _filling_blocks(space: ConfigSpace, fn: Function, arch: Arch) -> dict[str, int]:
    """For each block param that tiles a grid axis, the largest of its choices that, with
    the grid's other axes at theirs, still gives the grid a program for every PE (halving
    the axis of most programs' blocks first); the smallest where none does."""
    from lowering.backends.spatial.mapper import grids

    index = block_index(fn.symbols)
    choices = {p.name: p.choices for p in space.params}
    fill: dict[str, int] = {}
    for grid in grids(fn):
        axes = [(f"block_sizes[{index[r.type.block]}]", r.type.extent)
                for r in grid.regions[0].args
                if isinstance(r.type, RangeType) and r.type.block in index]
        block = {name: max(choices[name]) for name, _ in axes}
        while math.prod(-(-extent // block[name]) for name, extent in axes) < arch.pes:
            smaller = [(block[n], n) for n, _ in axes if block[n] > min(choices[n])]
            if not smaller:
                break
            name = max(smaller)[1]
            block[name] = max(c for c in choices[name] if c < block[name])
        for name, b in block.items():
            fill[name] = min(fill.get(name, b), b)
    return fill


def _block_groups(fn: Function) -> list[set[str]]:
    """The block params each grid's tiles and loops use (`block_sizes[i]`, i indexing the
    kernel's symbols): the default's search moves two blocks together only within one."""
    from lowering.backends.spatial.mapper import grids

    index = block_index(fn.symbols)
    groups = []
    for grid in grids(fn):
        dims: set = set()
        for op in [grid, *walk(grid.regions[0])]:
            for v in [*op.results, *(a for r in op.regions for a in r.args)]:
                t = v.type
                dims |= {t.block} if isinstance(t, RangeType) else \
                    set(getattr(t, "shape", ()))
        groups.append({f"block_sizes[{index[d]}]" for d in dims if d in index})
    return groups


def _reader_choices(fn: Function, arch: Arch) -> tuple[int, ...]:
    """The `dma_readers` knob's choices, most first: none where every phase's load streams
    have a reader each, else from as many readers as the DMA channels a writer leaves down to
    one. (Where every stream could have a reader, sharing only serializes their transfers: the
    tuner need not try it; an Arch with fewer `dma_channels` shows what it costs.)"""
    from lowering.backends.spatial.channels import count_streams
    from lowering.backends.spatial.mapper import grids

    most, short = 1, False
    for grid in grids(fn):
        ops = list(walk(grid.regions[0]))
        streams = count_streams([op for op in ops if op.name == "load"])
        readers = arch.dma_channels - any(op.name in ("store", "atomic") for op in ops)
        most = max(most, min(streams, readers))
        short = short or streams > readers
    return tuple(range(most, 0, -1)) if short else ()
