"""How a PE's load streams share its DMA channels.

A *stream* is what one reader DMA copies from one tensor through the same tiles: a load, or
loads of one tensor whose tiles differ only by a shift or a scalar index (a stencil's
neighbours, a convolution's taps), copied one after another. A PE has `arch.dma_channels`
DMA engines: one writer drains the stores, the rest read. Where a kernel has more streams than
readers, streams share a reader, time-multiplexed as real parts do (Tenstorrent's
data-movement cores serve several circular buffers; an AIE DMA channel chains the buffer
descriptors of several buffers): the reader issues their copies in program order, the order
the compute uses them, and pays `arch.dma_switch_cycles` on a copy of another stream than
the one before it (the mapper marks those copies `"switch": true`).

The `dma_readers` knob caps the readers the shareable streams get; `assign` deals the streams
onto them, balancing the bytes each moves. A load multicast along a line of PEs whose trip
counts vary (`Mapping.line_axis`) keeps a reader of its own: its copies are issued per
program after the program's others (`Mapping._line_copies`), an order a shared reader would
deadlock on.
"""

from __future__ import annotations

import functools

from tiledsl.ir.core import Op
from tiledsl.ir.types import RangeType
from tiledsl.lang.shifted import is_shifted


def stream_key(load: Op) -> tuple:
    """Loads with equal keys read one tensor through the same tiles (shifted or not, at any
    scalar indices): one stream, which one reader copies."""
    indices = tuple(o.owner.operands[0] if is_shifted(o) else o  # type: ignore[union-attr]
                    if isinstance(o.type, RangeType) else None for o in load.operands[1:])
    return (load.operands[0], indices, load.attrs.get("full", ()), load.attrs.get("slices", ()))


@functools.lru_cache(maxsize=4096)
def first_of_streams(loads: tuple[Op, ...]) -> tuple[int, ...]:
    """For each load, the position of the first of `loads` in its stream (cached: every
    config's mapping of a kernel asks for the same loads)."""
    firsts: dict[tuple, int] = {}
    return tuple(firsts.setdefault(stream_key(op), i) for i, op in enumerate(loads))


def count_streams(loads: list[Op]) -> int:
    """How many streams `loads` form (the most readers they could use, one each)."""
    return len({stream_key(op) for op in loads})


def assign(weights: dict[int, float], readers: int) -> dict[int, int]:
    """Each stream (by id, with the bytes it moves) -> one of `readers` readers: the heaviest
    first, each onto the reader with the fewest bytes so far (ties: the lowest-numbered
    reader; equal streams: the lowest id first), so readers finish together."""
    load = [0.0] * readers
    out: dict[int, int] = {}
    for s in sorted(weights, key=lambda s: (-weights[s], s)):
        r = min(range(readers), key=lambda r: (load[r], r))
        out[s] = r
        load[r] += weights[s]
    return out
