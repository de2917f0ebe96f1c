"""The search space strategies see: named discrete parameters with ordered values, and a
validity test known before anything is evaluated (the compiler's constraints, or membership in
a recorded space). A point is a dict parameter -> value.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

Point = dict[str, Any]


@dataclass(frozen=True)
class Param:
    name: str
    values: tuple[Any, ...]  # ordered: neighbours in this tuple are neighbours in the space


class SearchSpace:
    """Parameters, a validity test, optionally the explicit list of valid points."""

    def __init__(self, params: Sequence[Param], valid: Callable[[Point], bool] | None = None,
                 points: Sequence[Point] | None = None, default: Point | None = None) -> None:
        self.params = tuple(params)
        self._valid = valid
        self._points = list(points) if points is not None else None
        self._keys = {self.key(p) for p in self._points} if self._points is not None else None
        self._default = default

    @staticmethod
    def key(point: Point) -> tuple:
        return tuple(sorted(point.items()))

    def contains(self, point: Point) -> bool:
        if self._keys is not None and self.key(point) not in self._keys:
            return False
        return self._valid is None or self._valid(point)

    @property
    def size_upper_bound(self) -> int:
        if self._points is not None:
            return len(self._points)
        n = 1
        for p in self.params:
            n *= len(p.values)
        return n

    def points(self) -> Iterator[Point]:
        """Every valid point (the explicit list, or the product filtered by validity)."""
        if self._points is not None:
            yield from (p for p in self._points if self._valid is None or self._valid(p))
            return
        names = [p.name for p in self.params]
        for combo in itertools.product(*(p.values for p in self.params)):
            point = dict(zip(names, combo))
            if self.contains(point):
                yield point

    def sample(self, rng: random.Random, tries: int = 10_000) -> Point | None:
        """A uniformly drawn valid point (None if none was found)."""
        if self._points is not None:
            for _ in range(tries):
                p = rng.choice(self._points)
                if self._valid is None or self._valid(p):
                    return dict(p)
            return None
        for _ in range(tries):
            p = {q.name: rng.choice(q.values) for q in self.params}
            if self.contains(p):
                return p
        return None

    def default(self) -> Point | None:
        return dict(self._default) if self._default is not None else None

    def index(self, point: Point) -> list[int]:
        """The point as value indices (for samplers that work on ordinal encodings)."""
        return [p.values.index(point[p.name]) for p in self.params]

    def neighbors(self, point: Point) -> list[Point]:
        """Valid points one step away along one parameter."""
        out = []
        for p in self.params:
            i = p.values.index(point[p.name])
            for j in (i - 1, i + 1):
                if 0 <= j < len(p.values):
                    q = dict(point, **{p.name: p.values[j]})
                    if self.contains(q):
                        out.append(q)
        return out


class Evaluator:
    """Wraps an objective (lower is better; None = failed): each distinct point is evaluated
    once and counts against the budget; repeated proposals are answered from memory."""

    def __init__(self, objective: Callable[[Point], float | None], budget: int) -> None:
        self.objective = objective
        self.budget = budget
        self.results: dict[tuple, float | None] = {}
        self.history: list[tuple[Point, float | None]] = []
        # Told the points a strategy expects to evaluate next (see `prefetch`).
        self.on_prefetch: Callable[[list[Point]], None] | None = None

    @property
    def wants_prefetch(self) -> bool:
        """Whether anyone listens to `prefetch` (strategies skip computing hints otherwise)."""
        return self.on_prefetch is not None

    def prefetch(self, points: Sequence[Point]) -> None:
        """A strategy's hint: the points it expects to evaluate next, most likely first. It
        changes no result; the tuner compiles them ahead, in parallel, while it measures. Each
        hint replaces the previous one."""
        if self.on_prefetch is not None:
            self.on_prefetch([p for p in points if SearchSpace.key(p) not in self.results])

    @property
    def done(self) -> bool:
        return len(self.history) >= self.budget

    def __call__(self, point: Point) -> float | None:
        key = SearchSpace.key(point)
        if key in self.results:
            return self.results[key]
        if self.done:
            return None
        value = self.objective(point)
        if value is not None and not value == value:  # NaN counts as a failure
            value = None
        self.store(point, value)
        return value

    def store(self, point: Point, value: float | None) -> None:
        """Remember `point`'s value, as its evaluation (in the history's order)."""
        self.results[SearchSpace.key(point)] = value
        self.history.append((dict(point), value))

    @property
    def best(self) -> tuple[Point, float] | None:
        valid = [(p, v) for p, v in self.history if v is not None]
        return min(valid, key=lambda pv: pv[1]) if valid else None

    def best_so_far(self) -> list[float | None]:
        """best_so_far[i]: the best valid value after i+1 distinct evaluations (None before the
        first valid one; a failed evaluation repeats the previous value)."""
        out: list[float | None] = []
        best: float | None = None
        for _, v in self.history:
            if v is not None and (best is None or v < best):
                best = v
            out.append(best)
        return out
