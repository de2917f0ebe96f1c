"""`td.store(..., disjoint=True)` checked where it runs: the kernel's author says no other
program of the grid writes or reads the elements the store writes (vLLM's slot mappings, a
persistent loop over a loaded count: a contract of the caller's that the race check cannot
see), and the NumPy backend, the semantics, verifies it on the data it runs.

Within a grid, every access to a tensor that a disjoint store writes records the program of
each element's last writer. A RaceError names the tensor, the element, both programs and the
line where
- a program writes an element another program wrote in this grid, with another value (equal
  values land the same in any order), or two lanes of one store write it with different ones;
- a program reads an element another program wrote earlier in this grid.
Programs run in lockstep here, so a read that comes before the other program's write in that
order is not seen; what the GPU would do there is still undefined.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy import conflicts, memory
from tiledsl.errors import RaceError
from tiledsl.ir import views
from tiledsl.ir.core import Op


class Writers:
    """The last writer (a program's number in the grid, -1: none yet) of each element of the
    memory the grid's disjoint stores write, per buffer and element width."""

    def __init__(self) -> None:
        self.owner: dict[tuple[int, int], np.ndarray] = {}

    def access(self, ex: Any, op: Op, arr: np.ndarray, indices: list[Any], axes: Any,
               mask: Any, value: np.ndarray | None) -> None:
        """Check load (`value` None) or store `op` against the writes so far; record a store's."""
        lanes = _lanes(ex, op, arr, indices, axes, mask)
        if lanes is None:
            return
        where, prog, keep, at = lanes
        owner = self._owner(arr)
        before = owner[where]
        other = (before >= 0) & (before != prog)
        if value is None:
            if other.any():
                i = int(np.argmax(other))
                raise _race(ex, op, at[i], f"program {_at(ex, prog[i])} reads "
                            f"what program {_at(ex, before[i])} wrote in this grid")
            return
        values = np.broadcast_to(value, keep.shape)[keep]
        try:
            conflicts.check((owner.size,), [where], values)
        except conflicts.Conflict as e:
            lanes_at = np.flatnonzero(where == e.index[0])
            a, b = (int(prog[i]) for i in (lanes_at[0], lanes_at[-1]))
            who = f"program {_at(ex, a)}" + ("" if a == b else f" and program {_at(ex, b)}")
            raise _race(ex, op, at[lanes_at[0]], f"{who} write {e.first!r} and {e.second!r} "
                        "to one element") from None
        now = _flat_view(arr)[where]
        differs = other & (now != values)
        if values.dtype.kind in "fc":  # NaN over NaN is no change
            differs &= ~(np.isnan(now) & np.isnan(values))
        if differs.any():
            i = int(np.argmax(differs))
            raise _race(ex, op, at[i], f"program {_at(ex, prog[i])} overwrites, "
                        f"with another value, what program {_at(ex, before[i])} wrote in "
                        "this grid")
        owner[where] = prog

    def _owner(self, arr: np.ndarray) -> np.ndarray:
        base = _buffer(arr)
        key = (base.__array_interface__["data"][0], arr.itemsize)
        got = self.owner.get(key)
        if got is None:
            got = self.owner[key] = np.full(base.nbytes // arr.itemsize, -1, np.int64)
        return got


def _buffer(arr: np.ndarray) -> np.ndarray:
    """The array that owns `arr`'s memory (the last ndarray along its bases)."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def _flat_view(arr: np.ndarray) -> np.ndarray:
    """The owning buffer's memory as a flat array of `arr`'s element type (an owning array is
    contiguous; an F-ordered one's transpose is C-ordered over the same memory)."""
    base = _buffer(arr)
    c = base if base.flags.c_contiguous else base.T
    return c.reshape(-1).view(np.uint8).view(arr.dtype)


def _lanes(ex: Any, op: Op, arr: np.ndarray, indices: list[Any], axes: Any, mask: Any
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The access's lanes that touch memory: each one's element in the owning buffer, its
    program's number, the broadcast mask of those lanes, and their indices into `arr`."""
    t = (op.result if op.results else op.operands[-1]).type
    ntile = len(t.shape)  # type: ignore[union-attr]
    active = None if ex.active is None else ex.active.reshape(ex.active.shape + (1,) * ntile)
    idxs, valid = memory._index_arrays(arr.shape, indices, ex.rank, ntile, active, axes, mask)
    grid = _grid(ex)
    programs = np.arange(int(np.prod(grid)), dtype=np.int64).reshape(grid + (1,) * ntile)
    parts = [programs, *idxs] + [p for p in (valid, active) if p is not None]
    shape = np.broadcast_shapes(*(np.shape(p) for p in parts))
    keep = np.ones(shape, bool)
    for p in (valid, active):
        if p is not None:
            keep &= np.broadcast_to(p, shape)
    if not keep.any():
        return None
    base = _buffer(arr)
    at = np.stack([np.broadcast_to(i, shape)[keep].astype(np.int64) for i in idxs], axis=-1)
    start = arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    byte = start + at @ np.asarray(arr.strides, np.int64)
    return byte // arr.itemsize, np.broadcast_to(programs, shape)[keep], keep, at


def _grid(ex: Any) -> tuple[int, ...]:
    return tuple(ex.grid_sizes) if ex.programs is None else (len(ex.programs),)


def _at(ex: Any, program: Any) -> tuple[int, ...]:
    """A program's number as its grid indices."""
    return tuple(int(i) for i in np.unravel_index(int(program), _grid(ex)))


def _race(ex: Any, op: Op, at: np.ndarray, what: str) -> RaceError:
    root = views.root(op.operands[0])
    name = f"'{root.hint}'" if root.hint else "a tensor the kernel allocates"
    index = tuple(int(i) for i in at)
    where = f"element {index}" if op.operands[0] is root else \
        f"index {index} of its view of shape {op.operands[0].type.shape}"  # type: ignore[union-attr]
    access = {"load": "load from", "store": "store to"}[op.name]
    return RaceError(f"{access} {name}: {what}, at {where}; a store to it is marked "
                     "disjoint=True", kernel=ex.fn.name, loc=op.loc,
                     hint="disjoint=True says no other program of the grid touches what the "
                          "store writes: give each program its own elements, or leave the "
                          "keyword out for the race check to look for a reason")
