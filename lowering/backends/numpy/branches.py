"""The NumPy backend's `if` op: every program runs at once, so each branch runs for all of them
with an `active` mask (like the iterations of a loop with a runtime stop, `Executor.loop`):
stores in a branch write only for the programs whose condition picks it, and each result is
`np.where(cond, then, else)` per program. A branch no program takes is not run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tiledsl.ir.core import Op, Value

if TYPE_CHECKING:
    from lowering.backends.numpy.executor import Executor


def run_if(ex: Executor, op: Op, env: dict[Value, Any]) -> list[Any]:
    cond = np.asarray(env[op.operands[0]], dtype=bool)
    outer = ex.active
    actives = [c if outer is None else c & outer for c in (cond, ~cond)]
    taken = [a.any() for a in actives]
    if not any(taken):  # no program is here (an idle iteration): the values do not matter
        taken[1] = True
    outs: list[list[Any]] = []
    for region, active, run in zip(op.regions, actives, taken):
        if not run:
            outs.append([])
            continue
        ex.active = None if active.all() else active
        try:
            outs.append(ex.block(region, env))
        finally:
            ex.active = outer
    if not all(taken):
        return outs[0] if taken[0] else outs[1]
    return [np.where(cond.reshape(cond.shape + (1,) * (np.ndim(a) - cond.ndim)), a, b)
            for a, b in zip(*outs)]
