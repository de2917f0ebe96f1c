"""The NumPy backend's `atomic` op: the reference order of atomics.

Every program of the grid runs at once here, so an atomic is applied for all of them in one
call, element by element in a defined order: programs in grid order (C order of their ids),
then each program's lanes in C order (a loop's iterations come one after another, so its
earlier iterations' atomics come first). Updates are unbuffered, as `np.add.at`'s: two lanes
on one element both count, and each lane's old value is what the element held just before its
own update. Lanes are applied in rounds, the k-th lane of every element in round k, so the
NumPy calls number the most lanes any one element receives.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy import memory
from lowering.backends.numpy.executor import Executor, _access, _bounds, rule
from tiledsl.ir.core import Op
from tiledsl.ir.gathers import written_values
from tiledsl.ir.types import TensorType, TileType


_BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _combine(kind: str, cur: np.ndarray, value: np.ndarray, cmp: np.ndarray | None
             ) -> np.ndarray:
    if kind == "add":
        return cur + value
    if kind == "max":
        return np.maximum(cur, value)
    if kind == "min":
        return np.minimum(cur, value)
    if kind in _BITWISE:
        return _BITWISE[kind](cur, value)
    if kind == "xchg":
        return value
    assert cmp is not None
    return np.where(cur == cmp, value, cur)


def _prefix(ex: Executor) -> tuple[int, ...]:
    """The shape of the programs' axes: the grid's, or the listed programs (spatial)."""
    return ex.grid_sizes if ex.programs is None else (len(ex.programs),)


@rule("atomic")
def _atomic(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    tensor = op.operands[0].type
    t = op.result.type
    assert isinstance(tensor, TensorType) and isinstance(t, TileType)
    arr: np.ndarray = xs[0]
    n = written_values(op)
    values = [np.asarray(v, dtype=arr.dtype) for v in xs[len(xs) - n:]]
    ntile = t.rank
    active = None if ex.active is None else ex.active.reshape(ex.active.shape + (1,) * ntile)
    with _bounds(ex, op):
        indices, axes, mask = _access(ex, op, xs[:len(xs) - n], tensor)
        if active is not None:
            mask = active if mask is None else mask & active
        idxs, valid = memory._index_arrays(arr.shape, indices, ex.rank, ntile, active, axes,
                                           mask)
    shape = np.broadcast_shapes(_prefix(ex) + ex.tile_shape(t), *(i.shape for i in idxs),
                                *(v.shape for v in values),
                                *(() if valid is None else (np.shape(valid),)))
    keep = np.ones(shape, bool) if valid is None else np.broadcast_to(valid, shape)
    sel = np.flatnonzero(keep)
    where = [np.broadcast_to(i, shape).reshape(-1)[sel] for i in idxs]
    vals = [np.broadcast_to(v, shape).reshape(-1)[sel] for v in values]
    old = np.full(int(np.prod(shape)), memory.poison(arr.dtype), dtype=arr.dtype)
    old[sel] = _apply(op.attrs["kind"], arr, where, vals)
    if ex.locks is not None and op.attrs.get("lock"):  # a spin lock's acquire or release
        ex.locks.atomic(ex, op, arr, indices, axes, mask, old.reshape(shape), values[0])
    return [old.reshape(shape)]


def _apply(kind: str, arr: np.ndarray, where: list[np.ndarray], vals: list[np.ndarray]
           ) -> np.ndarray:
    """Apply the lanes (flattened, in order) to `arr` at `where`; returns their old values."""
    old = np.empty(len(vals[-1]), dtype=arr.dtype)  # (a 0-d tensor's lanes have no index)
    if not len(old):
        return old
    lin = np.ravel_multi_index(where, arr.shape) if where else np.zeros(len(old), np.int64)
    order = np.argsort(lin, kind="stable")
    ranked = lin[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    rank = np.arange(len(ranked)) - np.repeat(starts, np.diff(np.r_[starts, len(ranked)]))
    by_round = order[np.argsort(rank, kind="stable")]  # round 0's lanes, then round 1's...
    bounds = np.r_[0, np.cumsum(np.bincount(rank))]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        lanes = by_round[lo:hi]  # at most one lane per element
        at = tuple(w[lanes] for w in where) if where else ...  # (a 0-d tensor: its element)
        cur = arr[at].reshape(len(lanes))
        old[lanes] = cur
        value = vals[-1][lanes]
        cmp = vals[0][lanes] if len(vals) == 2 else None
        arr[at] = _combine(kind, cur, value, cmp)
    return old
