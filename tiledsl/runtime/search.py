"""Finding valid configs in a config space too large to enumerate (`tiledsl.runtime.config`).

A kernel with many tile loops has a product of choices far past what `itertools.product` can
walk (ten block sizes of seven choices: 282 million points), and a backend's constraints may
reject nearly all of it (tl.dot's blocks of 16 or more). Two searches that stay near a valid
point instead: `nearest` (the default config when the backend's preferred one is invalid) and
`walk` (samples when uniform draws are rejected).
"""

from __future__ import annotations

import itertools
import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tiledsl.runtime.config import Config, ConfigSpace

NEAREST_BUDGET = 20_000  # constraint checks `nearest` makes before giving up


def _valid(space: ConfigSpace, values: dict[str, Any]) -> Config | None:
    config = space.make(values)
    return config if all(c.check(config) is None for c in space.constraints) else None


def nearest(space: ConfigSpace, config: Config) -> Config | None:
    """A valid config that differs from `config` in the fewest params (rings of 1, 2, ...
    changed params, each in product order), or None past NEAREST_BUDGET checks."""
    base = space.values(config)
    names = list(base)
    others = {p.name: [c for c in p.choices if c != base[p.name]] for p in space.params}
    checks = 0
    for distance in range(1, len(names) + 1):
        for changed in itertools.combinations(names, distance):
            for combo in itertools.product(*(others[n] for n in changed)):
                found = _valid(space, base | dict(zip(changed, combo)))
                if found is not None:
                    return found
                checks += 1
                if checks >= NEAREST_BUDGET:
                    return None
    return None


def walk(space: ConfigSpace, start: Config, n: int, rng: random.Random,
         out: dict[Config, None]) -> None:
    """Add up to `n` distinct valid configs to `out` (which keeps its own): a random walk from
    valid `start` that changes one param at a time to a random choice and keeps the changes the
    constraints accept; a config is taken after each round of as many proposals as params."""
    values = space.values(start)
    params = [p for p in space.params if len(p.choices) > 1]
    out.setdefault(start, None)
    if not params:
        return
    for _ in range(50 * n):
        if len(out) >= n:
            return
        for _ in range(len(params)):
            p = rng.choice(params)
            trial = values | {p.name: rng.choice(p.choices)}
            if _valid(space, trial) is not None:
                values = trial
        out.setdefault(space.make(values), None)
