"""Search strategies: plain functions `strategy(space, evaluate, seed, initial)` that call
`evaluate(point)` until `evaluate.done`. Each strategy module registers its strategies by name
in the registry (registry.py), which imports none of them; `get` imports them on first use
(bo.py imports SciPy)."""

from __future__ import annotations

from autotune.strategies.registry import STRATEGIES, Strategy, register  # noqa: F401
from tiledsl.errors import ConfigError

DEFAULT = "bo+local"  # chosen by measurement on the replay spaces (benchmarks/replay.py)


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
