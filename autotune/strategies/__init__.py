"""Search strategies: plain functions `strategy(space, evaluate, seed, initial)` that call
`evaluate(point)` until `evaluate.done`. They register by name in STRATEGIES."""

from __future__ import annotations

from typing import Callable

from autotune.space import Evaluator, Point, SearchSpace
from tiledsl.errors import ConfigError

Strategy = Callable[[SearchSpace, Evaluator, int, list[Point]], None]
STRATEGIES: dict[str, Strategy] = {}
DEFAULT = "bo+local"  # chosen by measurement on the replay spaces (benchmarks/replay.py)


def register(name: str) -> Callable[[Strategy], Strategy]:
    def deco(fn: Strategy) -> Strategy:
        STRATEGIES[name] = fn
        return fn
    return deco


def get(name: str) -> Strategy:
    # Importing a strategy module registers its strategies.
    from autotune.strategies import bo, exhaustive, local, random_search  # noqa: F401
    try:
        from autotune.strategies import optuna_adapter  # noqa: F401
    except ImportError:
        pass
    if name not in STRATEGIES:
        raise ConfigError(f"unknown strategy {name!r}; known: {sorted(STRATEGIES)}")
    return STRATEGIES[name]
