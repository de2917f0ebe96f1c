"""Random search without replacement: the reference every other strategy is compared with."""

from __future__ import annotations

import random

from autotune.space import Evaluator, Point, SearchSpace
from autotune.strategies.registry import register


@register("random")
def random_search(space: SearchSpace, evaluate: Evaluator, seed: int,
                  initial: list[Point]) -> None:
    rng = random.Random(seed)
    for point in initial:
        evaluate(point)
    stale = 0
    while not evaluate.done and stale < 1000:
        point = space.sample(rng)
        if point is None:
            return
        before = len(evaluate.history)
        evaluate(point)
        stale = stale + 1 if len(evaluate.history) == before else 0
