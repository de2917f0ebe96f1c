"""NumPy rules of the view ops: tile reshapes, joins and splits (on the grid-prefixed arrays of
executor.py), and tensor views that share their array's memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy import arg_memory, memory
from lowering.backends.numpy.executor import Executor, rule
from tiledsl.errors import ArgumentError, OutOfBoundsError
from tiledsl.ir.core import Op
from tiledsl.ir.slices import slices_of
from tiledsl.ir.types import TensorType, TileType


@rule("reshape")
def _reshape(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    t = op.result.type
    assert isinstance(t, TileType)
    x = xs[0]
    return [x.reshape(x.shape[:ex.rank] + ex.tile_shape(t))]


@rule("join")
def _join(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    a, b = np.broadcast_arrays(*xs)  # one may hold a broadcast grid prefix
    return [np.stack([a, b], axis=-1)]


@rule("gather")
def _gather(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    """tl.gather along the op's axis; an index outside the source's axis (of a running
    program; a lane past a ragged edge holds the poison a masked load leaves, and is not used)
    is an OutOfBoundsError, as a GPU would read another lane's register or garbage."""
    src, index = xs
    axis = ex.rank + op.attrs["axis"]
    n = src.shape[axis]
    bad = ((index < 0) | (index >= n)) & (index != memory.poison(index.dtype))  # (masked lanes)
    if ex.active is not None:  # idle programs' lanes are never used
        bad = bad & ex.active.reshape(ex.active.shape + (1,) * (index.ndim - ex.rank))
    if bad.any():
        value = int(index[np.nonzero(bad)][0]) if index.shape == bad.shape else \
            int(np.broadcast_to(index, bad.shape)[bad][0])
        raise OutOfBoundsError(f"td.gather: index {value} is out of range for an axis of "
                               f"{n} lanes", kernel=ex.fn.name, loc=op.loc,
                               hint="gather indices lie in [0, size of the source's axis)")
    safe = np.clip(index, 0, n - 1).astype(np.intp)
    return [np.take_along_axis(src, safe, axis)]


@rule("split")
def _split(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    return [xs[0][..., 0], xs[0][..., 1]]


@rule("tensor.reshape")
def _tensor_reshape(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    t = op.result.type
    assert isinstance(t, TensorType)
    view = xs[0].view()
    try:
        view.shape = t.shape  # never a copy: stores must reach the original
    except AttributeError:
        name = op.operands[0].hint or "a tensor"
        raise ArgumentError(
            f"'{name}' (shape {xs[0].shape}, strides "
            f"{tuple(s // xs[0].itemsize for s in xs[0].strides)}) cannot be viewed as shape "
            f"{t.shape} without a copy", kernel=ex.fn.name, loc=op.loc,
            hint="pass a contiguous array (np.ascontiguousarray), or index it as it is laid "
                 "out") from None
    return [view]


@rule("tensor.slice")
def _tensor_slice(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    parts = slices_of(op.attrs)
    index = tuple(slice(p.start, p.start + p.size * p.step, p.step) if (p := parts.get(d))
                  else slice(None) for d in range(xs[0].ndim))
    return [xs[0][index]]  # a view: stores reach the original


@rule("tensor.permute")
def _tensor_permute(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    return [np.transpose(xs[0], op.attrs["perm"])]


@rule("tensor.expand")
def _tensor_expand(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    return [np.broadcast_to(xs[0], tuple(op.attrs["shape"]))]  # read-only: the frontend stores
    # nothing through it


@rule("tensor.memory")
def _tensor_memory(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    return [arg_memory.view(xs[0], op, ex.fn.name)]  # shares the argument's memory


@rule("tensor.bitcast")
def _tensor_bitcast(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    t = op.result.type
    assert isinstance(t, TensorType)
    return [xs[0].view(t.dtype.np)]  # the same memory: stores through it reach the original
