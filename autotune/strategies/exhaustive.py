"""Exhaustive search: every valid point in order (the ground truth for small spaces)."""

from __future__ import annotations

import itertools

from autotune.space import Evaluator, Point, SearchSpace
from autotune.strategies.registry import register

AHEAD = 32  # points announced for compiling ahead at a time


@register("exhaustive")
def exhaustive(space: SearchSpace, evaluate: Evaluator, seed: int, initial: list[Point]) -> None:
    for point in initial:
        evaluate(point)
    points = space.points()
    while not evaluate.done:
        batch = list(itertools.islice(points, AHEAD))
        if not batch:
            return
        evaluate.prefetch(batch)
        for point in batch:
            if evaluate.done:
                return
            evaluate(point)
