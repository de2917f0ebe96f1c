"""NumPy rules of `scan`, `fold` and `sort` (tiledsl/lang/scans.py defines what they mean).

A scan runs its combine region lane by lane along the axis, on every other lane (and every grid
program) at once: the region's scalar ops run on arrays, with the executor's prefix rank set to
their full rank. With the `masked` operand, an out-of-range lane leaves the running value as it
is (the combine's identity), so lanes that come first in scan order cannot change the result.
A fold is a forward scan's last lane.

A sort orders integer keys that sort as NumPy sorts the values (`sort_key`), with the lanes
out of range after all others, by a stable `np.lexsort`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from lowering.backends.numpy.executor import Executor, rule
from tiledsl import dtypes
from tiledsl.ir.core import Op
from tiledsl.ir.types import TileType


@contextmanager
def _whole_rank(ex: Executor, rank: int) -> Iterator[None]:
    """Let the executor run scalar ops on arrays of `rank` axes, all of them 'programs'."""
    outer = ex.rank
    ex.rank = rank
    try:
        yield
    finally:
        ex.rank = outer


def _running(ex: Executor, op: Op, xs: list[Any], reverse: bool
             ) -> Iterator[tuple[int, list[np.ndarray], np.ndarray | None]]:
    """The running values of a scan along the op's axis: (lane, values, whether any lane so far
    was in range) after each lane, in scan order."""
    n, axis = op.attrs["n"], ex.rank + op.attrs["axis"]
    region = op.regions[0]
    arrays = np.broadcast_arrays(*[np.asarray(x) for x in xs])
    values, valid = arrays[:n], (arrays[n] if op.attrs.get("masked") else None)
    lanes = values[0].shape[axis]
    acc: list[Any] = []
    acc_valid = None
    for i in range(lanes - 1, -1, -1) if reverse else range(lanes):
        cur = [np.take(v, i, axis=axis) for v in values]
        cur_valid = None if valid is None else np.take(valid, i, axis=axis)
        if not acc:
            acc, acc_valid = cur, cur_valid
        else:
            with _whole_rank(ex, cur[0].ndim):
                new = ex.block(region, dict(zip(region.args, acc + cur)))
            new = [np.broadcast_to(np.asarray(c).astype(v.dtype), v.shape)
                   for c, v in zip(new, cur)]
            if cur_valid is not None:  # an out-of-range lane is the combine's identity
                both = acc_valid & cur_valid
                new = [np.where(both, c, np.where(cur_valid, b, a))
                       for c, a, b in zip(new, acc, cur)]
                acc_valid = acc_valid | cur_valid
            acc = new
        yield i, acc, acc_valid


@rule("scan")
def _scan(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    axis = ex.rank + op.attrs["axis"]
    shape = np.broadcast_shapes(*[np.shape(x) for x in xs])
    outs = [np.empty(shape, np.asarray(x).dtype) for x in xs[:op.attrs["n"]]]
    for i, acc, _ in _running(ex, op, xs, op.attrs["reverse"]):
        for o, a in zip(outs, acc):
            index = [slice(None)] * o.ndim
            index[axis] = i
            o[tuple(index)] = a
    return outs


@rule("fold")
def _fold(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    """The last running values of a forward scan; rows with no lane in range give `empty`."""
    acc: list[np.ndarray] = []
    valid = None
    for _, acc, valid in _running(ex, op, xs, False):
        pass
    outs = [np.asarray(a) for a in acc]
    if valid is not None:
        outs = [np.where(valid, a, np.asarray(e).astype(a.dtype))
                for a, e in zip(outs, op.attrs["empty"])]
    if op.attrs["keepdims"]:
        outs = [np.expand_dims(a, ex.rank + op.attrs["axis"]) for a in outs]
    return outs


def sort_key(x: np.ndarray, descending: bool) -> np.ndarray:
    """uint64 keys in the order NumPy sorts `x` (NaN last, -0.0 equal to 0.0), reversed with
    `descending`."""
    d = dtypes.from_any(x.dtype)
    assert d is not None
    bits = 8 * x.dtype.itemsize
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    top = np.uint64(1) << np.uint64(bits - 1)
    if d.is_bool:
        key = x.astype(np.uint64)
        bits = 1
    elif d.is_int:
        key = x.view(unsigned).astype(np.uint64) ^ top
    else:
        zero = np.zeros((), x.dtype)
        canon = np.where(x == zero, zero, x)  # -0.0 -> 0.0
        u = np.ascontiguousarray(canon).view(unsigned).astype(np.uint64)
        key = np.where(u & top, ~u & ((top << np.uint64(1)) - np.uint64(1)), u | top)
        inf = np.asarray(np.inf, x.dtype).view(unsigned).astype(np.uint64) | top
        key = np.where(np.isnan(x.astype(np.float32)), inf + np.uint64(1), key)
    if descending:
        key = np.uint64((1 << bits) - 1) - key
    return key


@rule("sort")
def _sort(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    axis, k = ex.rank + op.attrs["axis"], op.attrs.get("k")
    descending = op.attrs["descending"]
    x = np.asarray(xs[0])
    valid = np.broadcast_to(xs[1], x.shape) if op.attrs.get("masked") else np.ones(x.shape, bool)
    order = np.lexsort((sort_key(x, descending), ~valid), axis=axis)
    if k is not None:
        order = np.take(order, np.arange(k), axis=axis)
    kept = np.take_along_axis(valid, order, axis=axis)
    t = op.operands[0].type
    assert isinstance(t, TileType)
    fill = dtypes.identity("max" if descending else "min", t.dtype)
    values = np.where(kept, np.take_along_axis(x, order, axis=axis),
                      np.asarray(fill).astype(x.dtype))
    if not op.attrs.get("positions"):
        return [values]
    return [values, np.where(kept, order, -1).astype(np.int32)]
