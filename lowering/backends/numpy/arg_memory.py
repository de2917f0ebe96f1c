"""An argument laid out other than row-major, seen as its memory (`tensor.memory`): Triton's
pointer arithmetic on it (`q_ptr + row * q.stride(0) + cols`, a `q` sliced from a fused qkv)
reaches the memory from its first element to its last, as on the GPU. The memory between its
elements is another tensor's, or nobody's: a lane that lands there is an OutOfBoundsError here,
where the GPU would read or write whatever lies there."""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy import memory
from tiledsl.errors import ArgumentError, OutOfBoundsError
from tiledsl.ir.core import Op
from tiledsl.ir.types import TensorType
from tiledsl.ir.views import nested


def view(arr: np.ndarray, op: Op, kernel: str) -> np.ndarray:
    """Argument `arr`'s memory as a 1-D array sharing it (stores through it reach `arr`)."""
    strides = tuple(op.attrs["strides"])
    if tuple(s // arr.itemsize for s in arr.strides) != strides or \
            any(s % arr.itemsize for s in arr.strides):  # the trace is for this layout
        raise ArgumentError(f"'{op.operands[0].hint}' has strides "
                            f"{tuple(s // arr.itemsize for s in arr.strides)}, not the "
                            f"{strides} this kernel was traced for", kernel=kernel, loc=op.loc)
    size = op.result.type.shape[0]  # type: ignore[union-attr]
    return np.lib.stride_tricks.as_strided(arr, (size,), (arr.itemsize,),
                                           writeable=arr.flags.writeable)


def check(ex: Any, op: Op, indices: list[Any], axes: Any, mask: Any) -> None:
    """An OutOfBoundsError where an active lane of access `op` (through a `tensor.memory`
    view) lands between the argument's elements; lanes past its ends are the access's own
    bounds check. Layouts whose offsets may name several elements (a stride of 0) pass."""
    owner = op.operands[0].owner
    assert owner is not None
    src = owner.operands[0].type
    assert isinstance(src, TensorType)
    strides = tuple(owner.attrs["strides"])
    if not nested(src.shape, strides):
        return
    t = (op.result if op.results else op.operands[-1]).type
    ntile = len(t.shape)  # type: ignore[union-attr]
    active = None if ex.active is None else ex.active.reshape(ex.active.shape + (1,) * ntile)
    size = op.operands[0].type.shape[0]  # type: ignore[union-attr]
    try:  # (lanes past the end are told apart below: a gap before them says more)
        idxs, valid = memory._index_arrays((2**62,), indices, ex.rank, ntile, active, axes,
                                           mask)
    except memory.OutOfRange as e:
        raise _error(ex, op, strides, e.value, "is before the memory of '{}'") from None
    keep = np.ones((), bool) if valid is None else valid
    if active is not None:
        keep = keep & active
    offsets, keep = np.broadcast_arrays(idxs[0], keep)
    lanes = offsets[keep]
    past = lanes >= size
    gap = ~past & ~on_elements(np.minimum(lanes, size - 1), src.shape, strides)
    if gap.any():
        raise _error(ex, op, strides, int(lanes[gap][0]),
                     "lies between the elements of '{}': memory that is not its")
    if past.any():
        raise _error(ex, op, strides, int(lanes[past][0]), "is past the memory of '{}' (its "
                     f"last element lies at offset {size - 1})")


def _error(ex: Any, op: Op, strides: tuple[int, ...], offset: int, where: str
           ) -> OutOfBoundsError:
    what = {"load": "load from", "store": "store to"}.get(op.name, "atomic on")
    name = op.operands[0].hint
    shape = op.operands[0].owner.operands[0].type.shape  # type: ignore[union-attr]
    dims = " + ".join(f"{i} * {name}.stride({d})" for d, i in enumerate("ijkl"[:len(shape)]))
    return OutOfBoundsError(
        f"{what} '{name}' (shape {shape}, strides {strides}): pointer offset {offset} "
        + where.format(name), kernel=ex.fn.name, loc=op.loc,
        hint=f"element ({', '.join('ijkl'[:len(shape)])}) lies at {dims}; a kernel that "
             "assumes row-major memory takes x.contiguous() (a copy where x is not)")


def on_elements(offsets: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...]
                ) -> np.ndarray:
    """Whether each memory offset is an element's, for a `nested` layout: the largest stride
    first, each dimension takes what it can."""
    rest = np.asarray(offsets, np.int64)
    ok = np.ones(rest.shape, bool)
    for s, n in sorted(((s, n) for n, s in zip(shape, strides) if n != 1), reverse=True):
        i = rest // s
        ok &= i < n
        rest = rest - i * s
    return ok & (rest == 0)
