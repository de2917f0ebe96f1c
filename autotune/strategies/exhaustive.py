"""Exhaustive search: every valid point in order (the ground truth for small spaces)."""

from __future__ import annotations

from autotune.space import Evaluator, Point, SearchSpace
from autotune.strategies import register


@register("exhaustive")
def exhaustive(space: SearchSpace, evaluate: Evaluator, seed: int, initial: list[Point]) -> None:
    for point in initial:
        evaluate(point)
    for point in space.points():
        if evaluate.done:
            return
        evaluate(point)
