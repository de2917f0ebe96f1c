"""How many steps a static-timing schedule of a mapping has, counted from the config alone.

Static timing schedules every step of every agent, loops unrolled, one by one in Python, and
refuses a phase of more than `engine.MAX_STATIC_STEPS` of them when it runs
(`Program.check_static_size`). A config space on a static-timing architecture rules such configs
out beforehand (`space.py`'s fits constraint), so neither its default nor the tuner proposes
one. The count needs no data: a static schedule runs every loop whose bound is read from the
data to that bound, and both sides of such an `if`; loops and `if`s whose bounds come from the
grid's tiles are evaluated for all programs at once (`Stops.runs`, `Stops.sides_of`).

Per step of the grid body run (a segment: its L loads, S stores), the mapper's agents take:
compute, L acquires + the op + L releases + 2 S (`Mapping._program`); each load's reader, 3
(acquire, copy, release); the writer, 3 S. A multicast load's copy is one per line of PEs (its
head's reader releases every PE's buffer), counted as every PE's own: the count is exact
without multicast and an upper bound with it.
"""

from __future__ import annotations


import numpy as np

from lowering.backends.spatial.engine import MAX_STATIC_STEPS
from lowering.backends.spatial.mapper import Branch, Loop, Mapping, Step


def static_steps(m: Mapping) -> int:
    """At most how many steps the static schedule of mapping `m` has, loops unrolled (the
    module's docstring says how they are counted)."""
    coords = tuple(np.indices(m.counts).reshape(len(m.counts), -1))  # every program

    def walk(steps: list[Step]) -> np.ndarray:
        total = np.zeros(len(coords[0]), dtype=np.int64)
        for s in steps:
            if isinstance(s, Branch):
                then, other = m.stops.sides_of(s.op, coords)
                total += np.where(then, walk(s.then), 0) + np.where(other, walk(s.other), 0)
            elif isinstance(s, Loop):
                total += m.stops.runs(s.range, s.strided, coords) * walk(s.body)
            else:
                total += 5 * len(s.loads) + 5 * len(s.stores) + 1
        return total

    return int(walk(m.steps).sum())


def over_limit(m: Mapping) -> str | None:
    """Why static timing cannot schedule mapping `m` (its steps, `static_steps`), or None."""
    steps = static_steps(m)
    if steps <= MAX_STATIC_STEPS:
        return None
    return (f"its static schedule would have {steps:,} steps with its loops unrolled, more "
            f"than the {MAX_STATIC_STEPS:,} that static timing schedules one by one on "
            f"{m.arch.name} (larger block sizes have fewer)")
