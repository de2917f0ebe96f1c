"""A `td.tile(stop)` loop's iteration computed on its active programs only.

Every program of a grid runs at once (memory.py), so in a loop whose trip count differs per
program (causal attention's `td.tile(tq.end)`) the programs past their last iteration idle: they
compute and their results are thrown away (executor.loop keeps their carried values). Where the
active programs form a box of the grid (a contiguous run of programs along each grid axis, as
a stop that grows with a grid index gives), the iteration runs on that box alone: each value of
the loop's environment is sliced to it (a view), and the carried values it yields are written
back into the box of the full ones. A grid range sliced this way no longer begins at program 0,
so inside the box it is a plain range (no grid axis): loads take the general path for it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from lowering.backends.numpy.memory import RangeRT
from lowering.backends.numpy.plan import uses_in
from tiledsl.ir.core import Block, Value
from tiledsl.ir.types import TensorType

Box = tuple[slice, ...]
sliced = 0  # how many iterations ran on a box (tests check that causal loops do)


def box_of(active: np.ndarray, sizes: tuple[int, ...]) -> Box | None:
    """The box of grid programs `active` holds, if it is one smaller than the grid."""
    if active.ndim != len(sizes) or not active.any():
        return None
    box = []
    for a, n in enumerate(sizes):
        if active.shape[a] == 1:
            box.append(slice(None))
            continue
        hit = np.flatnonzero(active.any(axis=tuple(i for i in range(active.ndim) if i != a)))
        lo, hi = int(hit[0]), int(hit[-1]) + 1
        box.append(slice(None) if (lo, hi) == (0, n) else slice(lo, hi))
    cut = tuple(box)
    if not active[cut].all() or active[cut].size == active.size:
        return None
    return cut


def _cut(x: Any, box: Box, sizes: tuple[int, ...]) -> Any:
    """`x` (prefix-shaped) cut to the box along the grid axes it varies on."""
    if isinstance(x, RangeRT):
        if x.grid_axis is not None and box[x.grid_axis] == slice(None):
            return x  # it varies along an axis the box keeps whole
        fields = {f: _cut(getattr(x, f), box, sizes) for f in ("begin", "stop", "start", "shift")
                  if getattr(x, f) is not None}
        return dataclasses.replace(x, grid_axis=None, **fields)
    if not isinstance(x, np.ndarray) or x.ndim < len(sizes):
        return x
    index = tuple(s if x.shape[a] == n and n > 1 else slice(None)
                  for a, (s, n) in enumerate(zip(box, sizes)))
    return x[index]


def whole_tiles(limit: np.ndarray, lower: np.ndarray | None, active: np.ndarray | None,
                j: int, block: int, extent: int) -> bool:
    """Whether iteration `j`'s tile lies inside [lower, limit) (clipped to the extent) for every
    program `active` lists (all, for None): then the loop's range needs no per-program stop or
    start (its lanes are masked as a plain loop's), and its loads and stores take the recipes
    of a plain loop's tile (prepared.py) instead of the general path."""
    end = min((j + 1) * block, extent)
    if active is None:
        return int(limit.min(initial=end)) >= end and \
            (lower is None or int(lower.max(initial=0)) <= j * block)
    limit = np.broadcast_to(limit, np.broadcast_shapes(limit.shape, active.shape))
    if int(limit[np.broadcast_to(active, limit.shape)].min(initial=end)) < end:
        return False
    if lower is None:
        return True
    lower = np.broadcast_to(lower, np.broadcast_shapes(lower.shape, active.shape))
    return int(lower[np.broadcast_to(active, lower.shape)].max(initial=0)) <= j * block


def used_in(region: Block) -> set[Value]:
    """The values `region`'s ops (nested ones too) use, and its arguments."""
    return {*region.args, *(v for op in region.ops for v in uses_in(op))}


def cut_env(env: dict[Value, Any], used: set[Value], box: Box, sizes: tuple[int, ...]
            ) -> dict[Value, Any]:
    """The environment of the programs in `box`, of the values in `used` (tensors are whole:
    they are not per program)."""
    return {v: x if isinstance(v.type, TensorType) else _cut(x, box, sizes)
            for v, x in env.items() if v in used}


def sizes_in(box: Box, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The grid's sizes inside `box`."""
    return tuple(len(range(n)[s]) for s, n in zip(box, sizes))


def merge(old: np.ndarray, new: Any, box: Box, sizes: tuple[int, ...],
          owned: dict[int, np.ndarray]) -> np.ndarray:
    """`old` (every program's value) with the box's programs holding `new`; written in place
    where `old` is an array an earlier merge of this loop made (in `owned`, by id: kept
    alive there, so no other array takes its id)."""
    new = np.asarray(new)
    rank = len(sizes)
    tile = np.broadcast_shapes(old.shape[rank:], new.shape[rank:])
    if id(old) in owned and old.shape == sizes + tile and old.dtype == new.dtype:
        old[box] = new
        return old
    out = np.empty(sizes + tile, dtype=new.dtype)
    owned[id(out)] = out
    out[...] = old
    out[box] = new
    return out
