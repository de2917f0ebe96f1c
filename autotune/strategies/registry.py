"""The strategies by name: each strategy module registers its strategies here when it is
imported (`autotune.strategies.get` imports them). A strategy is a plain function
`strategy(space, evaluate, seed, initial)` that calls `evaluate(point)` until `evaluate.done`."""

from __future__ import annotations

from typing import Callable

from autotune.space import Evaluator, Point, SearchSpace

Strategy = Callable[[SearchSpace, Evaluator, int, list[Point]], None]
STRATEGIES: dict[str, Strategy] = {}


def register(name: str) -> Callable[[Strategy], Strategy]:
    def deco(fn: Strategy) -> Strategy:
        STRATEGIES[name] = fn
        return fn
    return deco
