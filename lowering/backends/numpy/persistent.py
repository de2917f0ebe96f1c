"""The NumPy backend's strided `for` (`td.tile(m, n)[p::P]`, a persistent loop): every program
runs at once, so trip j takes tile `first + j * stride` of each program, its coordinates
unravelled row-major into one begin per range and per program; a program whose tiles have run
out sits the trip out (`active`, as in a loop with a runtime stop) and keeps its values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from lowering.backends.numpy.memory import RangeRT
from tiledsl.ir.core import Op, Value, loop_carried, loop_first, loop_inits, loop_ranges
from tiledsl.ir.types import RangeType

if TYPE_CHECKING:
    from lowering.backends.numpy.executor import Executor


def run_strided(ex: Executor, op: Op, env: dict[Value, Any]) -> list[Any]:
    ranges = loop_ranges(op)
    types = [r.type for r in ranges]
    assert all(isinstance(t, RangeType) for t in types)
    blocks = [ex.block_size(t.block) for t in types]  # type: ignore[union-attr]
    counts = [-(-t.extent // b) for t, b in zip(types, blocks)]  # type: ignore[union-attr]
    total, stride = int(np.prod(counts)), int(op.attrs["stride"])
    first = np.clip(np.asarray(env[loop_first(op)], dtype=np.int64), 0, total)  # type: ignore
    first = first.reshape(first.shape if first.ndim else (1,) * ex.rank)
    trips = -(-(total - first) // stride)
    carried = [env[o] for o in loop_inits(op)]
    inner = dict(env)
    outer = ex.active
    for j in range(int(trips.max(initial=0))):
        tile = first + j * stride
        rest = np.minimum(tile, total - 1)  # (idle programs: any tile, their results unused)
        for r, t, b, c in reversed(list(zip(ranges, types, blocks, counts))):
            inner[r] = RangeRT(t.extent, b, (rest % c) * b, None)  # type: ignore[union-attr]
            rest = rest // c
        for a, v in zip(loop_carried(op), carried):
            inner[a] = v
        active = tile < total
        if outer is not None:
            active = active & outer
        ex.active = None if active.all() else active
        try:
            new = ex.block(op.regions[0], inner)
        finally:
            ex.active = outer
        if not active.all():  # idle programs keep their values
            new = [np.where(active.reshape(active.shape + (1,) * (np.ndim(n) - active.ndim)),
                            n, c) for n, c in zip(new, carried)]
        carried = new
    return carried
