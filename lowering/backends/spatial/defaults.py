"""The spatial backend's default config: the one its analytic estimate (`estimate.py`) ranks
best, as the Triton backend's default is the one its cost model prices lowest.

The estimate is analytic (no dataflow config built, nothing simulated) but not free (a few
milliseconds a config on a 512^3 GEMM), and a GEMM's space holds tens of thousands of configs,
so the search is bounded and deterministic: it starts from the best of the uniform block sizes
(256, 128, ... 1, each clamped to its tile's choices) and descends, each round moving to the
best-estimated neighbour (one block size a step up or down its choices, or one knob to
another value), until no neighbour is better or `BUDGET` configs have been estimated. On every
example and preset it lands within 80% of the exhaustive optimum's throughput
(`benchmarks/spatial_default.py`). The kernel caches the space, and with it this default, per
(trace, argument shapes, architecture).
"""

from __future__ import annotations

from typing import Any, Callable

from tiledsl.runtime.config import Config, ConfigSpace, Param

BUDGET = 64  # configs estimated at most (a 512^3 GEMM on wormhole-like: about 6 ms each)
STARTS = 3  # the largest valid uniform block sizes the descent may start from
UNIFORM = (256, 128, 64, 32, 16, 8, 4, 2, 1)


def uniform_default(space: ConfigSpace, size: int) -> ConfigSpace:
    """`space` with every block size defaulting to `size`, clamped to its choices."""
    for p in space.params:
        if p.name.startswith("block_sizes["):
            space = space.with_default(p.name, max((c for c in p.choices if c <= size),
                                                   default=min(p.choices)))
    return space


def estimated_default(space: ConfigSpace, budget: int = BUDGET) -> ConfigSpace:
    """`space` with its defaults set to the best config the estimate finds (the module's
    docstring says how); unchanged where it has no estimate or no uniform start is valid."""
    estimate = space.estimate
    if estimate is None:
        return space
    costs: dict[Config, float] = {}
    estimated = 0

    def cost(c: Config) -> float | None:
        nonlocal estimated
        if c not in costs:
            if estimated >= budget or len(costs) >= 4 * budget:
                return None
            ok = space.reason(c) is None and space.duplicate(c) is None
            estimated += ok
            costs[c] = estimate(c) if ok else float("inf")
        return costs[c]

    starts: list[Config] = []
    for size in UNIFORM:  # large tiles first: small ones are costly to estimate, and slow
        c = _defaults(uniform_default(space, size))
        if len(starts) < STARTS and cost(c) not in (None, float("inf")) and c not in starts:
            starts.append(c)
    best = _argmin(starts, cost)
    if best is None:
        return space
    while True:
        step = _argmin(_neighbours(space, best), cost)
        if step is None or costs[step] >= costs[best]:
            break
        best = step
    for name, value in space.values(best).items():
        space = space.with_default(name, value)
    return space


def _defaults(space: ConfigSpace) -> Config:
    return space.make({p.name: p.default for p in space.params})


def _argmin(configs: list[Config], cost: Callable[[Config], float | None]) -> Config | None:
    """The first valid config of least cost among those the budget lets `cost` price."""
    best, least = None, float("inf")
    for c in configs:
        x = cost(c)
        if x is not None and x < least:
            best, least = c, x
    return best


def _neighbours(space: ConfigSpace, config: Config) -> list[Config]:
    """Configs one step from `config`: one block size, or two together (a GEMM's M and N tiles
    trade reuse for programs jointly; a bigger N tile fits SRAM with a smaller K one), to the
    next choice up or down; or a knob to another of its choices."""
    values = space.values(config)
    blocks = [p for p in space.params if p.name.startswith("block_sizes[")]

    def moved(p: Param, step: int) -> Any:
        j = p.choices.index(values[p.name]) + step
        return p.choices[j] if 0 <= j < len(p.choices) else None

    out = []
    for i, p in enumerate(blocks):
        for step in (-1, 1):
            for q, other in [(None, 0)] + [(q, s) for q in blocks[i + 1:] for s in (-1, 1)]:
                new = {p.name: moved(p, step)} | ({} if q is None else {q.name: moved(q, other)})
                if None not in new.values():
                    out.append(space.make({**values, **new}))
    for p in space.params:
        if p not in blocks:
            out += [space.make({**values, p.name: c}) for c in p.choices if c != values[p.name]]
    return out
