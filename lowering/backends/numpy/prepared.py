"""Loads and stores prepared once per layout, not worked out again on every call.

How a load or store reaches its tiles (a view's slices, reshape and transpose; the window a
padded copy reads; whether a store covers its tensor) depends only on the op, the tensor's
shape, strides and dtype, the grid's rank, and its indices' shapes: each range's extent, block,
grid axis and where a loop's tile begins (block sizes enter through them), each scalar index's
value. `key` spells out exactly that; a `Recipe` made for one key serves every later access
with the same key, from the per-function plan (plan.Plan.accesses). Indices that vary per
program in ways a key cannot name (runtime stops and starts, shifts, index tiles, subsets of
the grid) and masked, gathering or partly active accesses are not prepared: memory.py's
general path runs them on every call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from lowering.backends.numpy import memory
from lowering.backends.numpy.memory import GridScalar, Index, RangeRT
from tiledsl.ir.core import Op
from tiledsl.ir.slices import Slice

LIMIT = 4096  # recipes kept per function; past it the cache starts over (scalar indices vary)
made = 0  # recipes made (tests check that a second call with the same layout makes none)


@dataclass(frozen=True)
class Recipe:
    """How one access runs: a view of the tensor (`view`), of a copy of its `window` padded
    to `shape` (`padded`), or, with neither, memory.py's general path (a gather or scatter)."""

    view: memory.ViewPlan | None = None
    window: tuple[slice, ...] | None = None  # the padded path: the part of the tensor read,
    shape: tuple[int, ...] | None = None  # padded to this shape
    copy: bool = True  # (a store that writes every element of the window needs no copy in)
    unindexed: tuple[int, ...] = ()  # a store's grid axes where the last program wins
    covers: bool = False  # a store that writes every element of its tensor


def _index_key(idx: Index) -> Any:
    """What of an index a recipe depends on; raises _Unkeyed for one that a key cannot name."""
    if idx is None or type(idx) is GridScalar or type(idx) is Slice:
        return idx
    if type(idx) is RangeRT:
        if idx.stop is not None or idx.start is not None or idx.shift is not None:
            raise _Unkeyed
        if idx.grid_axis is not None:  # begins at block * program along the axis (grid())
            return idx.extent, idx.block, idx.grid_axis, idx.begin.shape
        if idx.begin.size == 1:  # a loop's tile, at one place for every program
            return idx.extent, idx.block, idx.begin.shape, int(idx.begin.flat[0])
        raise _Unkeyed
    if type(idx) is np.ndarray and idx.size == 1 and idx.dtype.kind in "iu":
        return idx.shape, int(idx.flat[0])
    raise _Unkeyed


class _Unkeyed(Exception):
    pass


def key(op: Op, arr: np.ndarray, indices: list[Index], rank: int) -> tuple | None:
    """The access's key (None: it cannot be prepared)."""
    parts = []
    for i in indices:
        if type(i) is RangeRT:  # (grids' and loops' ranges are made once: their part too)
            part = i.__dict__.get("_key", _UNKEYED)
            if part is _UNKEYED:
                part = i.__dict__["_key"] = _range_key(i)
            if part is None:
                return None
            parts.append(part)
            continue
        try:
            parts.append(_index_key(i))
        except _Unkeyed:
            return None
    return op, arr.shape, arr.strides, arr.dtype, rank, tuple(parts)


_UNKEYED = object()


def _range_key(idx: RangeRT) -> tuple | None:
    """_index_key of a range (a frozen object: its key is kept in it), or None."""
    try:
        return _index_key(idx)
    except _Unkeyed:
        return None


def recipe(cache: dict[tuple, Recipe], k: tuple, make: Callable[[], Recipe]) -> Recipe:
    """`cache`'s recipe for key `k`, made on its first use."""
    r = cache.get(k)
    if r is None:
        global made
        made += 1
        if len(cache) >= LIMIT:
            cache.clear()
        r = cache[k] = make()
    return r


def load_recipe(arr: np.ndarray, indices: list[Index], rank: int,
                trim_axis: int | None) -> Recipe:
    """The recipe of memory.load's (or memory.trimmed's, for `trim_axis`) unmasked load."""
    if trim_axis is not None:
        rebased = memory.trimmed_indices(arr, indices, trim_axis)
        if rebased is not None:
            how = memory.view_plan(arr, rebased, rank)
            r = Recipe(view=how) if how is not None else \
                _padded_recipe(arr, rebased, rank, True)
            if r is not None:
                return r
    how = memory.view_plan(arr, indices, rank)
    if how is not None:
        return Recipe(view=how)
    return _padded_recipe(arr, indices, rank, True) or Recipe()


def _padded_recipe(arr: np.ndarray, indices: list[Index], rank: int, copy: bool,
                   **more: Any) -> Recipe | None:
    pad = memory.pad_plan(arr, indices)
    if pad is None:
        return None
    window, shape, rebased = pad
    how = memory.view_plan(np.empty(shape, arr.dtype), rebased, rank, True)
    return None if how is None else Recipe(how, window, shape, copy, **more)


def load(r: Recipe, arr: np.ndarray, other: object | None) -> np.ndarray:
    """The load by recipe `r` (one with a view)."""
    if r.window is not None:
        part = arr[r.window]
        return memory.apply_view(memory.pad(part, r.shape, memory._fill(arr, other), arr.dtype),
                                 r.view)
    assert r.view is not None
    return memory.apply_view(arr, r.view)


def store_recipe(arr: np.ndarray, indices: list[Index], rank: int) -> Recipe:
    """The recipe of memory.store's unmasked store by every program."""
    more = {"unindexed": memory.unindexed_axes(indices, rank),
            "covers": memory.covers(arr, indices)}
    how = memory.view_plan(arr, indices, rank)
    if how is not None:
        return Recipe(view=how, **more)
    copy = any(isinstance(i, GridScalar) for i in indices)  # as memory.store
    return _padded_recipe(arr, indices, rank, copy, **more) or Recipe(**more)


def store(r: Recipe, arr: np.ndarray, value: np.ndarray) -> bool:
    """The store by recipe `r`; False when it takes the general path (nothing stored)."""
    if r.view is None:
        return False
    for a in r.unindexed:
        if value.shape[a] > 1:
            value = value.take([-1], axis=a)
    if r.window is None:
        memory.apply_view(arr, r.view)[...] = value
        return True
    window = arr[r.window]  # a view
    buffer = memory.pad(window, r.shape, 0, arr.dtype, r.copy)
    memory.apply_view(buffer, r.view)[...] = value
    window[...] = buffer[tuple(slice(0, n) for n in window.shape)]
    return True
