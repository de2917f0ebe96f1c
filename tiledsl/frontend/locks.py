"""Spin locks between the programs of a grid, as Triton's layer-norm backward takes them:

    while tl.atomic_cas(Lock, 0, 1) == 1:   # acquire
        pass
    ...                                      # loads and stores of what the lock guards
    tl.atomic_xchg(Lock, 0)                  # release

A `while` loop whose condition is computed from a compare-and-swap, and whose body does nothing
else, acquires the lock at the element it swaps; an atomic exchange or compare-and-swap at that
element (the same pointer or index) releases it. The loads and stores traced in between carry
the attribute `locked`: programs holding one lock run them one after another, so the race
check (races.py) lets a pair of locked accesses touch the same elements. Whether the lock
guards them is checked where the kernel runs: the NumPy backend runs a grid that takes a lock
one program at a time, in grid order, and fails when two programs touch one element under
different locks (lowering/backends/numpy/locks.py). On a GPU the swap that takes the lock has
at least acquire semantics and the release at least release semantics (a relaxed one, Helion's
default, is made so), so the guarded accesses stay between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tiledsl.errors import Loc, TraceError
from tiledsl.ir.core import Op, Value, upstream, walk
from tiledsl.ir.same import same_value
from tiledsl.ir.views import root

ACQUIRE, RELEASE = "acquire", "release"  # the `lock` attribute of an atomic op


@dataclass
class Held:
    """The lock a program holds while the trace is between its acquire and release."""

    tensor: Value  # the lock tensor's root
    key: tuple  # the index it was taken at (`index_key`)
    loc: Loc | None  # the acquiring `while`'s line


def index_key(index: Any) -> tuple:
    """An atomic's index as the user gave it: its IR values (or Python numbers), compared
    with `same_key`."""
    items = index if isinstance(index, (list, tuple)) else [index]
    return tuple(getattr(i, "value", i) for i in items)


def same_key(a: tuple, b: tuple) -> bool:
    """Whether two atomics' indices are the same element: the same pointer, or index values
    computed alike (`[row % group]` in the acquire's test, again in the release)."""
    return len(a) == len(b) and all(
        x is y or (same_value(x, y) if isinstance(x, Value) and isinstance(y, Value)
                   else not isinstance(x, Value) and not isinstance(y, Value) and x == y)
        for x, y in zip(a, b))


def note_cas(tr: Any, result: Value, tensor: Value, index: Any) -> None:
    """Remember where the compare-and-swap that made `result` swaps (for `acquire`)."""
    tr.cas_keys[result] = (root(tensor), index_key(index))


def _cases(tr: Any, value: Value) -> list[Value]:
    return [v for v in upstream([value]) if v in tr.cas_keys]


def acquire(tr: Any, op: Op) -> None:
    """If `while` op `op` spins on a compare-and-swap, the program holds that lock from here."""
    region = op.regions[0]
    tested = _cases(tr, op.operands[0])
    again = _cases(tr, region.ops[-1].operands[0]) if region.ops else []
    if not tested or not again:
        return
    tensor, key = tr.cas_keys[tested[0]]
    if any(tr.cas_keys[v][0] is not tensor or not same_key(tr.cas_keys[v][1], key)
           for v in tested + again):
        return  # (swaps at two places: not one lock)
    if any(o.name == "store" or o.regions or o.name == "atomic" and o.attrs["kind"] != "cas"
           for o in walk(region)):
        return  # the loop does work besides waiting: not a lock
    if tr.lock is not None:
        tr.fail(TraceError, "this loop takes a lock while the program holds the one taken at "
                f"line {tr.lock.loc.line if tr.lock.loc else '?'}", loc=op.loc,
                hint="release a lock (td.atomic_xchg(lock, [i], 0)) before taking another")
    for v in tested + again:  # (a relaxed swap would let the guarded loads go first on a GPU)
        assert v.owner is not None
        v.owner.attrs["lock"] = ACQUIRE
        if v.owner.attrs["sem"] == "relaxed":
            v.owner.attrs["sem"] = "acquire"
    op.attrs["lock"] = True
    tr.lock = Held(tensor, key, op.loc)


def release(tr: Any, tensor: Value, index: Any, kind: str, attrs: dict) -> None:
    """An atomic exchange or compare-and-swap at the held lock's element releases it."""
    held = tr.lock
    if held is None or kind not in ("xchg", "cas") or root(tensor) is not held.tensor:
        return
    if same_key(index_key(index), held.key):
        attrs["lock"] = RELEASE
        if attrs["sem"] == "relaxed":  # (the guarded stores must land before it)
            attrs["sem"] = "release"
        tr.lock = None


def locked(tr: Any) -> dict:
    """The attributes that mark an access made while the program holds a lock."""
    return {"locked": True} if tr.lock is not None else {}


def check_released(tr: Any, loc: Loc | None) -> None:
    """At the end of a grid program (the grid loop's line `loc`): a lock still held would stop
    every other program."""
    if tr.lock is not None:
        line = tr.lock.loc.line if tr.lock.loc else "?"
        tr.lock = None
        tr.fail(TraceError, f"the lock taken by the `while` loop at line {line} is not released "
                "before the program ends: the programs waiting for it would spin forever",
                hint="release it where the guarded work ends: td.atomic_xchg(lock, [i], 0) "
                     "(Triton: tl.atomic_xchg(Lock, 0))", loc=loc)
