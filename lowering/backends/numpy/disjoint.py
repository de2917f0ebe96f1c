"""`td.store(..., disjoint=True)` checked where it runs: the kernel's author says no other
program of the grid writes or reads the elements the store writes (vLLM's slot mappings, a
persistent loop over a loaded count: a contract of the caller's that the race check cannot
see), and the NumPy backend, the semantics, verifies it on the data it runs.

Within a grid, every access to a tensor that a disjoint store writes records, per element, the
program that wrote it last and the program that read it (or that several did). A RaceError
names the tensor, the element, both programs and the line where a program
- writes an element another program wrote or read in this grid (whatever the values: with
  other data they would differ), or two programs write one element in one store;
- reads an element another program wrote in this grid;
- writes one element from two lanes of one store with different values.
Programs run in lockstep here, each op for every program before the next, so these are the
pairs of accesses that program order leaves unordered on a GPU. The spatial backend runs each
PE's programs apart, one record per grid across them (Executor's `writers`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy import conflicts, memory
from tiledsl.errors import RaceError
from tiledsl.ir import views
from tiledsl.ir.core import Op, walk

NONE, SEVERAL = -1, -2  # no program yet; more than one (readers)


class Writers:
    """Per element of the memory the grid's disjoint stores write (per buffer and element
    width): the program that wrote it last and the one that read it (`NONE`, `SEVERAL`)."""

    def __init__(self) -> None:
        self.state: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def access(self, ex: Any, op: Op, arr: np.ndarray, indices: list[Any], axes: Any,
               mask: Any, value: np.ndarray | None) -> None:
        """Check load (`value` None) or store `op` against the accesses so far, and record it."""
        lanes = _lanes(ex, op, arr, indices, axes, mask)
        if lanes is None:
            return
        where, prog, keep, at = lanes
        owner, reader = self._state(arr)
        wrote = owner[where]
        other = (wrote >= 0) & (wrote != prog)
        if other.any():
            i = int(np.argmax(other))
            raise _race(ex, op, at[i], f"program {_at(ex, prog[i])} "
                        f"{'reads' if value is None else 'writes'} an element program "
                        f"{_at(ex, wrote[i])} wrote in this grid")
        if value is None:
            _note_readers(reader, where, prog)
            return
        read = reader[where]
        seen = (read == SEVERAL) | ((read >= 0) & (read != prog))
        if seen.any():
            i = int(np.argmax(seen))
            who = "several programs" if read[i] == SEVERAL else f"program {_at(ex, read[i])}"
            raise _race(ex, op, at[i], f"program {_at(ex, prog[i])} writes an element {who} "
                        "read in this grid")
        _one_writer(ex, op, where, prog, np.broadcast_to(value, keep.shape)[keep], at)
        owner[where] = prog

    def _state(self, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return per_element(self.state, arr)


def per_element(state: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]], arr: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Two records per element of `arr`'s buffer (at its element width), kept in `state`:
    made on first use, `NONE` throughout (locks.py keeps its own in the same way)."""
    base = _buffer(arr)
    key = (base.__array_interface__["data"][0], arr.itemsize)
    got = state.get(key)
    if got is None:
        n = base.nbytes // arr.itemsize
        got = state[key] = (np.full(n, NONE, np.int64), np.full(n, NONE, np.int64))
    return got


def _one_writer(ex: Any, op: Op, where: np.ndarray, prog: np.ndarray, values: np.ndarray,
                at: np.ndarray) -> None:
    """Each element one store writes: one program's, and from one value."""
    order = np.lexsort((prog, where))
    w, p = where[order], prog[order]
    two = (w[1:] == w[:-1]) & (p[1:] != p[:-1])
    if two.any():
        i = int(np.argmax(two))
        raise _race(ex, op, at[order[i]], f"program {_at(ex, p[i])} and program "
                    f"{_at(ex, p[i + 1])} write one element")
    try:
        conflicts.check((int(where.max()) + 1,), [where], values)
    except conflicts.Conflict as e:
        i = int(np.flatnonzero(where == e.index[0])[0])
        raise _race(ex, op, at[i], f"program {_at(ex, prog[i])} writes {e.first!r} and "
                    f"{e.second!r} to one element") from None


def _note_readers(reader: np.ndarray, where: np.ndarray, prog: np.ndarray) -> None:
    """Record a load's readers: an element's one program, or SEVERAL."""
    order = np.lexsort((prog, where))
    w, p = where[order], prog[order]
    first = np.r_[True, w[1:] != w[:-1]]
    distinct = first | np.r_[True, p[1:] != p[:-1]]
    count = np.add.reduceat(distinct.astype(np.int64), np.flatnonzero(first))
    elems, mine = w[first], np.where(count > 1, SEVERAL, p[first])
    now = reader[elems]
    reader[elems] = np.where(now == NONE, mine, np.where(now == mine, now, SEVERAL))


def _buffer(arr: np.ndarray) -> np.ndarray:
    """The array that owns `arr`'s memory (the last ndarray along its bases)."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def _lanes(ex: Any, op: Op, arr: np.ndarray, indices: list[Any], axes: Any, mask: Any
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The access's lanes that touch memory: each one's element in the owning buffer, its
    program's number, the broadcast mask of those lanes, and their indices into `arr`."""
    t = (op.result if op.results else op.operands[-1]).type
    ntile = len(t.shape)  # type: ignore[union-attr]
    active = None if ex.active is None else ex.active.reshape(ex.active.shape + (1,) * ntile)
    idxs, valid = memory._index_arrays(arr.shape, indices, ex.rank, ntile, active, axes, mask)
    if ex.programs is None:  # every program, on the grid's axes
        grid = tuple(ex.grid_sizes)
        programs = np.arange(int(np.prod(grid)), dtype=np.int64).reshape(grid + (1,) * ntile)
    else:  # the listed ones (a PE's, spatial backend), on one axis, by their grid numbers
        numbers = np.ravel_multi_index(tuple(ex.programs.T), tuple(ex.grid_sizes))
        programs = numbers.astype(np.int64).reshape((-1,) + (1,) * ntile)
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


def _at(ex: Any, program: Any) -> tuple[int, ...]:
    """A program's number as its grid indices."""
    return tuple(int(i) for i in np.unravel_index(int(program), tuple(ex.grid_sizes)))


def _race(ex: Any, op: Op, at: np.ndarray, what: str) -> RaceError:
    root = views.root(op.operands[0])
    name = f"'{root.hint}'" if root.hint else "a tensor the kernel allocates"
    index = tuple(int(i) for i in at)
    where = f"element {index}" if op.operands[0] is root else \
        f"index {index} of its view of shape {op.operands[0].type.shape}"  # type: ignore[union-attr]
    access = {"load": "load from", "store": "store to"}[op.name]
    if not any(o.name == "store" and o.attrs.get("disjoint") and views.root(o.operands[0]) is
               root for o in walk(ex.fn.body)):  # an index loaded from memory (races.py)
        return RaceError(f"{access} {name}: {what}, at {where}; the index is loaded from "
                         "memory, so the race check leaves it to the data", kernel=ex.fn.name,
                         loc=op.loc, hint="keep each program's loaded indices within its own "
                                          "elements (a label within its row)")
    words = [o.attrs["disjoint"] for o in walk(ex.fn.body) if o.name == "store" and
             o.attrs.get("disjoint") and views.root(o.operands[0]) is root]
    if all(w == "triton" for w in words):  # (races.py `_authors_word`)
        return RaceError(f"{access} {name}: {what}, at {where}; a Triton kernel's store to it "
                         "is indexed by values it loads, which the race check leaves to the "
                         "data", kernel=ex.fn.name, loc=op.loc,
                         hint="give each program its own elements (the ranges or slots the "
                              "caller's data hands the programs must not meet)")
    return RaceError(f"{access} {name}: {what}, at {where}; a store to it is marked "
                     "disjoint=True", kernel=ex.fn.name, loc=op.loc,
                     hint="disjoint=True says no other program of the grid touches what the "
                          "store writes: give each program its own elements, or leave the "
                          "keyword out for the race check to look for a reason")
