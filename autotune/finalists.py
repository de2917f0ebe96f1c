"""Re-timing the finalists, interleaved: the search's fastest configs (and the default) are timed
again in rounds, every config once per round in a rotated order, and the winner is the lowest
median over the rounds.

A search measures each config once, so on a noisy timer (a GPU shared with other work, a busy
CPU) its fastest trial is partly the luckiest one, and runs of the same tune disagree on the
winner. Interleaving spreads drift (clocks, temperature, other tenants) over every finalist
alike instead of charging it to whichever was measured during it. Deterministic runners (the
simulator, the cost model) skip this.
"""

from __future__ import annotations

import statistics
from time import monotonic
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from autotune.space import Point, SearchSpace

FINALISTS = 5  # the search's fastest configs re-timed (the default config joins them)
ROUNDS = 5


@dataclass
class Finalist:
    point: Point
    search_value: float  # what the search measured
    samples: list[float] = field(default_factory=list)  # one per round
    failure: str | None = None  # why a re-timing failed (the config is then out)
    config: Any = None  # the point as the kernel's Config (set by the tuner, for reports)

    @property
    def value(self) -> float | None:
        """The median over the rounds (None if a re-timing failed)."""
        if self.failure is not None or not self.samples:
            return None
        return float(statistics.median(self.samples))


def choose(history: Sequence[tuple[Point, float | None]], count: int = FINALISTS,
           always: Point | None = None) -> list[Finalist]:
    """The `count` configs the search measured fastest, fastest first, plus `always` (the default
    config) if it was measured and is not among them."""
    valid = sorted(((v, i, p) for i, (p, v) in enumerate(history) if v is not None),
                   key=lambda t: (t[0], t[1]))
    out = [Finalist(dict(p), v) for v, _, p in valid[:count]]
    if always is not None:
        keys = {SearchSpace.key(f.point) for f in out}
        for v, _, p in valid[count:]:
            if SearchSpace.key(p) == SearchSpace.key(always) and SearchSpace.key(p) not in keys:
                out.append(Finalist(dict(p), v))
    return out


def retime(finalists: list[Finalist], time: Callable[[Point], float], rounds: int = ROUNDS,
           failed: tuple[type[BaseException], ...] = (Exception,),
           deadline: float | None = None,
           stopped: tuple[type[BaseException], ...] = ()) -> list[Finalist]:
    """Time every finalist once per round; round r starts at finalist r (mod n) so none is
    always first. A finalist whose timing raises one of `failed` is out (its `failure` says
    why) and is not timed again. At `deadline` (time.monotonic()), or when a timing raises one
    of `stopped` (the tune's deadline came during it), the re-timing ends and keeps its
    complete rounds only (every finalist timed as often); with none, no finalist is left."""
    n = len(finalists)
    complete = 0
    try:
        for r in range(rounds):
            for j in range(n):
                f = finalists[(r + j) % n]
                if f.failure is not None:
                    continue
                if deadline is not None and monotonic() > deadline:
                    raise _Stop
                try:
                    f.samples.append(float(time(f.point)))
                except stopped:
                    raise _Stop from None
                except failed as e:
                    f.failure = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
            complete = r + 1
    except _Stop:
        if complete == 0:
            return []
        for f in finalists:
            del f.samples[complete:]
    return finalists


class _Stop(Exception):
    """The deadline came during the re-timing."""


def winner(finalists: Sequence[Finalist]) -> Finalist | None:
    """The finalist with the lowest median (ties: the search's order)."""
    timed = [(f.value, i, f) for i, f in enumerate(finalists) if f.value is not None]
    return min(timed)[2] if timed else None

