"""The NumPy backend's spin locks (tiledsl/frontend/locks.py): a grid that takes a lock runs one
program at a time, in grid order (as Triton's interpreter runs every grid), so a program finds
the lock free and the loop that waits for it ends at once; in lockstep no program could leave.

While a program holds a lock, each element its locked loads and stores touch is recorded with
that lock (the one it was written under, and the one, or several, it was read under): a
program that touches the element under another lock, where one of the two accesses writes,
would race on a GPU, where the two locks let both in at once, so that is a RaceError naming
the tensor, the element, both locks and the line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy.disjoint import NONE, SEVERAL, _buffer, _lanes, per_element
from tiledsl.errors import RaceError
from tiledsl.frontend.locks import ACQUIRE, RELEASE
from tiledsl.ir import views
from tiledsl.ir.core import Op


class Guards:
    """One grid's locks: the one the running program holds, and per element accessed under a
    lock, which lock (its number in `locks`)."""

    def __init__(self) -> None:
        self.held: int | None = None
        self.locks: list[tuple[int, int]] = []  # (buffer address, element) of each lock seen
        self.guard: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def atomic(self, ex: Any, op: Op, arr: np.ndarray, indices: list[Any], axes: Any,
               mask: Any, old: np.ndarray, cmp: Any) -> None:
        """After atomic `op`: an acquire that swapped takes its lock, a release drops it."""
        what = op.attrs.get("lock")
        if what == RELEASE:
            self.held = None
        elif what == ACQUIRE and np.all(old == cmp):
            lanes = _lanes(ex, op, arr, indices, axes, mask)
            if lanes is not None:
                lock = (_buffer(arr).__array_interface__["data"][0], int(lanes[0][0]))
                if lock not in self.locks:
                    self.locks.append(lock)
                self.held = self.locks.index(lock)

    def access(self, ex: Any, op: Op, arr: np.ndarray, indices: list[Any], axes: Any,
               mask: Any) -> None:
        """Record a locked load or store, failing where it meets an access under another lock
        and one of the two writes."""
        lanes = _lanes(ex, op, arr, indices, axes, mask) if self.held is not None else None
        if lanes is None:
            return
        where, at = lanes[0], lanes[3]
        wrote, read = self._state(arr)
        seen = wrote[where]
        other = (seen >= 0) & (seen != self.held)
        if op.name == "store":
            readers = read[where]
            other |= (readers == SEVERAL) | ((readers >= 0) & (readers != self.held))
            seen = np.where(seen >= 0, seen, readers)
            wrote[where] = self.held
        else:
            now = read[where]
            read[where] = np.where((now == NONE) | (now == self.held), self.held, SEVERAL)
        if other.any():
            i = int(np.argmax(other))
            raise self._race(ex, op, at[i], int(seen[i]))

    def _state(self, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per element of `arr`'s buffer: the lock it was written under, and read under."""
        return per_element(self.guard, arr)

    def _race(self, ex: Any, op: Op, at: np.ndarray, theirs: int) -> RaceError:
        assert self.held is not None
        root = views.root(op.operands[0])
        name = f"'{root.hint}'" if root.hint else "a tensor the kernel allocates"
        other = f"the lock at element {self.locks[theirs][1]}" if theirs >= 0 else \
            "several locks"
        return RaceError(
            f"{'load from' if op.name == 'load' else 'store to'} {name}: element "
            f"{tuple(int(j) for j in at)} is accessed under the lock at element "
            f"{self.locks[self.held][1]} of its buffer, and was accessed under {other}, one "
            "of them writing: two programs holding different locks would touch it at once",
            kernel=ex.fn.name, loc=op.loc,
            hint="take the lock that guards the elements: index the lock as the data "
                 "(Lock + row % G with DW + (row % G) * N)")
