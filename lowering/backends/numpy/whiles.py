"""The NumPy backend's `while` op: every program runs at once, so the loop runs trips while any
program's condition holds, each trip for the programs still looping (an `active` mask, as the
branches of an `if` and the iterations of a loop with a runtime stop run): stores in the body
write only for them, and the others keep their carried values. A loop whose programs wait on
each other (a flag another program sets) cannot finish when they run in lockstep, so a loop
past `TRIPS` trips is an error that says so. A spin lock (`while td.atomic_cas(lock, 0, 1) ==
1`) is not such a loop: its grid runs one program at a time (locks.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tiledsl.errors import BackendError
from tiledsl.ir.core import Op, Value

if TYPE_CHECKING:
    from lowering.backends.numpy.executor import Executor

TRIPS = 1 << 16


def _where(mask: np.ndarray, new: Any, old: Any) -> Any:
    return np.where(mask.reshape(mask.shape + (1,) * (np.ndim(new) - mask.ndim)), new, old)


def run_while(ex: Executor, op: Op, env: dict[Value, Any]) -> list[Any]:
    region = op.regions[0]
    outer = ex.active
    carried = [env[o] for o in op.operands[1:]]
    go = np.asarray(env[op.operands[0]], dtype=bool)
    looping = go if outer is None else go & outer
    inner = dict(env)
    for _ in range(TRIPS):
        if not looping.any():
            return carried
        for a, v in zip(region.args, carried):
            inner[a] = v
        ex.active = None if looping.all() else looping
        try:
            again, *new = ex.block(region, inner)
        finally:
            ex.active = outer
        carried = new if looping.all() else [_where(looping, n, c) for n, c in zip(new, carried)]
        looping = looping & np.asarray(again, dtype=bool)
    raise BackendError(f"numpy backend: this `while` loop ran {TRIPS} trips; programs run in "
                       "lockstep here, so a loop that waits for another program (a flag it "
                       "sets) never ends", loc=op.loc,
                       hint="take a lock (`while td.atomic_cas(lock, [i], 0, 1) == 1: pass`, "
                            "released by td.atomic_xchg(lock, [i], 0)), whose grid runs one "
                            "program at a time, or combine values with an atomic "
                            "(td.atomic_add); else bound the loop")
