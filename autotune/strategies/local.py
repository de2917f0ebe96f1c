"""Local refinement: greedy descent over the "Hamming" neighbourhood (every valid point that
differs from the current one in exactly one parameter, whatever the distance along it).

Tuning spaces are rugged along single steps (a block size of 48 can lose to both 32 and 64 and
still be best overall) but have few local optima when a parameter may jump anywhere along its
values: the neighbourhood Kernel Tuner's greedy strategies use. `space.neighbors` (one step along
one parameter) is the special case, kept for very large value lists.

Strategies:

* "local": iterated first-improvement descent. Start from the initial points, then from uniform
  random valid points; in each descent the neighbours are tried in random order and the first
  better one is taken; at a local optimum, restart from a fresh random point. Failed evaluations
  count as worse than anything.
* "tpe+local" (and "<sampler>+local" for the Optuna samplers): a model-guided global search that
  hands each new incumbent to the same descent (a memetic search): the sampler proposes; when a
  proposal beats the best so far, the descent polishes it to a local optimum; the descent's
  evaluations are told to the sampler as ordinary trials, so its model keeps every measurement.
"""

from __future__ import annotations

import importlib.util
import math
import random
from collections.abc import Callable, Iterable

from autotune.space import Evaluator, Point, SearchSpace
from autotune.strategies.registry import register

MAX_HAMMING = 64  # parameters with more values than this move one step at a time


def hamming_neighbors(space: SearchSpace, point: Point) -> list[Point]:
    """Valid points differing from `point` in exactly one parameter."""
    out = []
    for p in space.params:
        if len(p.values) > MAX_HAMMING:
            i = p.values.index(point[p.name])
            values: Iterable = [p.values[j] for j in (i - 1, i + 1) if 0 <= j < len(p.values)]
        else:
            values = p.values
        for v in values:
            if v != point[p.name]:
                q = dict(point, **{p.name: v})
                if space.contains(q):
                    out.append(q)
    return out


def _score(v: float | None) -> float:
    return math.inf if v is None else v


def descend(space: SearchSpace, evaluate: Evaluator, start: Point, rng: random.Random,
            on_eval: Callable[[Point, float | None], None] | None = None) -> Point:
    """First-improvement descent from `start` (evaluated if new) to a local optimum, or until
    the budget is spent. Returns where it stopped. `on_eval(point, value)` sees each new
    evaluation."""

    def ev(q: Point) -> float | None:
        new = SearchSpace.key(q) not in evaluate.results
        v = evaluate(q)
        if new and on_eval is not None and SearchSpace.key(q) in evaluate.results:
            on_eval(q, v)
        return v

    current, value = start, _score(ev(start))
    while not evaluate.done:
        neighbours = hamming_neighbors(space, current)
        rng.shuffle(neighbours)
        evaluate.prefetch(neighbours)  # tried in this order until one is better
        for q in neighbours:
            if evaluate.done:
                return current
            v = _score(ev(q))
            if v < value:
                current, value = q, v
                break
        else:
            return current  # a local optimum: no neighbour is better
    return current


@register("local")
def local(space: SearchSpace, evaluate: Evaluator, seed: int, initial: list[Point]) -> None:
    """Descents from the initial points, then from uniform random points, until the budget is
    spent. (Kicking the best optimum instead of restarting -- iterated local search -- was
    measured worse on the shared spaces.)"""
    rng = random.Random(seed)
    starts = [p for p in initial if space.contains(p)]
    for p in starts:  # the initial points first; then descents from the best of them
        if evaluate.done:
            return
        evaluate(p)
    starts.sort(key=lambda p: _score(evaluate.results.get(SearchSpace.key(p))))
    stale = 0
    while not evaluate.done and stale < 1000:
        if starts:
            start = starts.pop(0)
        else:
            start = space.sample(rng)
            if start is None:
                return
            if SearchSpace.key(start) in evaluate.results:
                stale += 1
                continue
        before = len(evaluate.history)
        descend(space, evaluate, start, rng)
        stale = stale + 1 if len(evaluate.history) == before else 0


def _memetic(sampler: str) -> Callable[[SearchSpace, Evaluator, int, list[Point]], None]:
    def run(space: SearchSpace, evaluate: Evaluator, seed: int, initial: list[Point]) -> None:
        from autotune.strategies.optuna_adapter import optimize

        rng = random.Random(seed + 7919)
        best = [math.inf]
        busy = [False]
        queued = [len(initial)]  # the initial points go first, unpolished

        def on_new(point: Point, value: float | None,
                   record: Callable[[Point, float | None], None]) -> None:
            queued[0] -= 1
            if busy[0] or queued[0] > 0 or value is None or value >= best[0]:
                best[0] = min(best[0], _score(value))
                return
            best[0] = value
            busy[0] = True
            try:
                end = descend(space, evaluate, point, rng, on_eval=record)
                best[0] = min(best[0], _score(evaluate.results.get(SearchSpace.key(end))))
            finally:
                busy[0] = False

        optimize(space, evaluate, seed, initial, sampler, on_new=on_new)
    run.__name__ = f"{sampler}_local"
    return run


if importlib.util.find_spec("optuna") is not None:  # the Optuna hybrids need optuna
    for _s in ("tpe", "cmaes", "gp"):
        register(f"{_s}+local")(_memetic(_s))
