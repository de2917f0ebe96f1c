"""The spatial backend's default config: the one its analytic estimate (`estimate.py`) ranks
best, as the Triton backend's default is the one its cost model prices lowest.

The estimate is analytic (no dataflow config built, nothing simulated) but not free (a few
milliseconds a config on a 512^3 GEMM), and a GEMM's space holds tens of thousands of configs,
so the search is bounded and deterministic: it starts from the best of the largest uniform block
sizes (256, 128, ... 1, each clamped to its tile's choices), the largest also with its grid tiles
cut until every PE has a program (`filled`: a row scan of 150 rows on 64 PEs wants 2-row tiles down
512-wide column tiles, which no uniform start is near), under each grid fold; and descends until
no neighbour is better or `BUDGET` configs have been estimated. A neighbour moves one block size
a step up or down its choices, or two of one grid together (a GEMM's M and N tiles trade reuse
for programs jointly; a bigger N tile fits SRAM with a smaller K one), or one knob to another
value. Each round prices the neighbours, then also the compound of the improving moves on
disjoint parameters (the grids of a kernel are phases whose estimates add, so their best moves
combine), and takes the best; then it repeats that move while it keeps improving (a column mean
wants its column tile a few steps down from the uniform start: one estimate a step, not a
round). Where the space has no estimate (loop bounds read from the data), the default is the
largest uniform block size that fits, its grid tiles `filled`. `benchmarks/spatial_default.py`
measures the default against the best simulated config of each example and preset. The kernel
caches the space, and with it this default, per (trace, argument shapes, architecture).
"""

from __future__ import annotations

from typing import Any, Callable

from tiledsl.runtime.config import Config, ConfigSpace, Param

BUDGET = 64  # configs estimated at most (a 512^3 GEMM on wormhole-like: about 6 ms each)
STARTS = 3  # the largest valid uniform block sizes the descent may start from (each fold)
UNIFORM = (256, 128, 64, 32, 16, 8, 4, 2, 1)


def uniform_default(space: ConfigSpace, size: int) -> ConfigSpace:
    """`space` with every block size defaulting to `size`, clamped to its choices."""
    for p in space.params:
        if p.name.startswith("block_sizes["):
            space = space.with_default(p.name, max((c for c in p.choices if c <= size),
                                                   default=min(p.choices)))
    return space


def filled(space: ConfigSpace, fill: dict[str, int]) -> ConfigSpace:
    """`space` with each block size that `fill` names defaulting to at most its value (the
    largest choice not above it, else the smallest): grid tiles small enough that the grid
    has a program for every PE."""
    for p in space.params:
        if p.name in fill:
            most = min(fill[p.name], p.default)
            space = space.with_default(p.name, max((c for c in p.choices if c <= most),
                                                   default=min(p.choices)))
    return space


def estimated_default(space: ConfigSpace, budget: int = BUDGET,
                      groups: list[set[str]] | None = None,
                      fill: dict[str, int] | None = None) -> ConfigSpace:
    """`space` with its defaults set to the best config the estimate finds (the module's
    docstring says how); unchanged where it has no estimate or no uniform start is valid.
    `groups`: the block params of each grid (two move together only within one; None: one
    group); `fill`: grid tiles that give every PE a program (`filled`), tried as starts too."""
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
    folds = next((p.choices for p in space.params if p.name == "fold"), (None,))
    sizes = 0
    for size in UNIFORM:  # large tiles first: small ones are costly to estimate, and slow
        trials = [uniform_default(space, size)]
        trials += [filled(trials[0], fill)] if fill and not sizes else []  # (the largest
        # size's only: small grid tiles are slow to estimate)
        found = False
        for trial, fold in ((t, f) for t in trials for f in folds):
            # (a fold is one move from a block move: a descent does not combine them)
            c = _defaults(trial if fold is None else trial.with_default("fold", fold))
            if sizes < STARTS and c not in starts and cost(c) not in (None, float("inf")):
                starts.append(c)
                found = True
        sizes += found
    best = _argmin(starts, cost)
    if best is None:
        return space
    while True:
        moves = _neighbours(space, best, groups)
        step = _argmin(moves, cost)
        if step is None or costs[step] >= costs[best]:
            break
        better = sorted((m for m in moves if costs.get(m, float("inf")) < costs[best]),
                        key=costs.__getitem__)
        step = _argmin([step, _compound(space, best, better)], cost) or step
        while True:  # the same move again, while it keeps improving
            again = _repeated(space, best, step)
            if again is None or cost(again) is None or costs[again] >= costs[step]:
                break
            best, step = step, again
        best = step
    for name, value in space.values(best).items():
        space = space.with_default(name, value)
    return space


def _compound(space: ConfigSpace, base: Config, better: list[Config]) -> Config:
    """`base` with the changes of the improving moves `better` (best first) applied, each move
    whose parameters no earlier applied move changed."""
    old = space.values(base)
    new = dict(old)
    for move in better:
        changed = {k: v for k, v in space.values(move).items() if old[k] != v}
        if all(new[k] == old[k] for k in changed):
            new.update(changed)
    return space.make(new)


def _repeated(space: ConfigSpace, before: Config, after: Config) -> Config | None:
    """`after` moved again by the block-size steps that led from `before` to it (each along
    its choices; a step off the end is dropped), or None where no step is left."""
    old, new = space.values(before), space.values(after)
    again = dict(new)
    for p in space.params:
        if p.name.startswith("block_sizes[") and old[p.name] != new[p.name]:
            j = 2 * p.choices.index(new[p.name]) - p.choices.index(old[p.name])
            if 0 <= j < len(p.choices):
                again[p.name] = p.choices[j]
    return None if again == new else space.make(again)


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


def _neighbours(space: ConfigSpace, config: Config,
                groups: list[set[str]] | None = None) -> list[Config]:
    """Configs one step from `config`: one block size to the next choice up or down, or a knob
    to another of its choices; then two block sizes of one group together."""
    values = space.values(config)
    blocks = [p for p in space.params if p.name.startswith("block_sizes[")]

    def moved(p: Param, step: int) -> Any:
        j = p.choices.index(values[p.name]) + step
        return p.choices[j] if 0 <= j < len(p.choices) else None

    def together(p: Param, q: Param) -> bool:
        return groups is None or any(p.name in g and q.name in g for g in groups)

    singles, pairs = [], []
    for i, p in enumerate(blocks):
        for step in (-1, 1):
            singles.append({p.name: moved(p, step)})
            pairs += [{p.name: moved(p, step), q.name: moved(q, s)}
                      for q in blocks[i + 1:] if together(p, q) for s in (-1, 1)]
    for p in space.params:
        if p not in blocks:
            singles += [{p.name: c} for c in p.choices if c != values[p.name]]
    # (single moves first: where the budget runs out in a round, they are the ones priced)
    return [space.make({**values, **new}) for new in singles + pairs
            if None not in new.values()]
