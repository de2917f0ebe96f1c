"""Replay a search strategy on a brute-forced tuning space (T4 format), without a GPU.

A T4 file (`results[]`, each with `configuration`, `invalidity` ("correct" = valid) and
`measurements` [{"name": "time", "value": ms}]) becomes a SearchSpace whose points are exactly the
file's configurations; evaluating one serves its recorded time (a configuration whose
`invalidity` is not "correct" fails: None). A strategy is then scored the way Willemsen et al.
(FGCS 2024) score tuners: how many distinct evaluations it needs to get within x% of the file's
optimum, seed after seed, against random search's exact expectation (N+1)/(K+1).

    tiledsl replay SPACE.json.gz [--strategy NAME] [--seeds N] [--budget N] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.space import Evaluator, Param, Point, SearchSpace
from tiledsl.errors import ConfigError, TileDSLError
from tiledsl.progress import progress_bar

TARGETS = (0.01, 0.02, 0.05)  # within 1%, 2%, 5% of the optimum


def _sorted_values(values: set[Any]) -> tuple[Any, ...]:
    try:
        return tuple(sorted(values))
    except TypeError:  # mixed types: a stable, deterministic order
        return tuple(sorted(values, key=lambda v: (type(v).__name__, repr(v))))


def _time(result: dict[str, Any], index: int) -> float | None:
    """The recorded time of a correct configuration (None if it has none); a time that is not
    a finite number above 0 is a ConfigError: the file is corrupt."""
    for m in result.get("measurements", ()):
        if m.get("name") == "time":
            value = m.get("value")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not (math.isfinite(value) and value > 0):
                raise ConfigError(f"results[{index}] {result.get('configuration')}: the time of "
                                  f"a correct configuration must be a finite number above 0, "
                                  f"got {value!r}; the recorded space is corrupt")
            return float(value)
    return None


@dataclass(frozen=True, order=True)
class Typed:
    """A value of a parameter for which the file also has an equal value of another type
    (`true` and `1`: True == 1 in Python). It compares and hashes with its type's name, so
    that configurations differing only there stay distinct points."""

    value: Any
    type: str

    def __repr__(self) -> str:
        return repr(self.value)


def _typed(value: Any) -> Typed:
    return value if isinstance(value, Typed) else Typed(value, type(value).__name__)


@dataclass
class ReplaySpace:
    """A recorded space: the SearchSpace strategies see and the time of every configuration."""

    name: str
    space: SearchSpace
    times: dict[tuple, float | None]  # key -> time (None: the configuration failed)
    typed: frozenset[str] = frozenset()  # parameters whose values are Typed in points
    unit: str = ""  # the unit of the recorded times, as the file gives it
    valid_times: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.valid_times = sorted(t for t in self.times.values() if t is not None)
        if not self.valid_times:
            raise ConfigError(f"{self.name}: no valid configuration with a time")

    @property
    def optimum(self) -> float:
        return self.valid_times[0]

    def objective(self, point: Point) -> float | None:
        if self.typed:
            point = {k: _typed(v) if k in self.typed else v for k, v in point.items()}
        return self.times.get(SearchSpace.key(point))

    def within(self, x: float) -> int:
        """K: how many valid configurations are within x (0.02 = 2%) of the optimum."""
        bound = self.optimum * (1 + x)
        return sum(1 for t in self.valid_times if t <= bound)

    def random_expectation(self, x: float) -> float:
        """Random search's expected evaluations to get within x of the optimum: (N+1)/(K+1)."""
        return random_expectation(len(self.valid_times), self.within(x))


def random_expectation(n_valid: int, k_within: int) -> float:
    """Expected draws without replacement until one of K good items among N: (N+1)/(K+1)."""
    return (n_valid + 1) / (k_within + 1)


def load(path: str | Path) -> ReplaySpace:
    """Load a T4 file (gzipped or not) as a ReplaySpace: parameter values are the sorted unique
    values of each parameter; validity is membership in the file."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        data = json.load(f)
    results = data.get("results") if isinstance(data, dict) else data
    if not isinstance(results, list):
        raise ConfigError("not a T4 file: no list of `results`")
    records: list[tuple[Point, float | None]] = []
    unit = ""
    values: dict[str, dict[tuple[str, Any], Any]] = {}  # name -> (type, value) -> value
    for i, r in enumerate(results):
        config = r.get("configuration") if isinstance(r, dict) else None
        if not isinstance(config, dict) or not all(isinstance(k, str) for k in config):
            raise ConfigError(f"results[{i}]: a result is an object with a `configuration` "
                              "object of parameter names and values")
        if records and set(config) != set(records[0][0]):
            raise ConfigError(f"results[{i}] has the parameters {sorted(config)}, results[0] "
                              f"has {sorted(records[0][0])}: every configuration of a space "
                              "sets the same parameters")
        measurements = r.get("measurements", [])
        if not isinstance(measurements, list) or not all(isinstance(m, dict)
                                                         for m in measurements):
            raise ConfigError(f"results[{i}]: `measurements` is a list of objects "
                              '({"name": ..., "value": ...})')
        try:
            hash(tuple(config.values()))
        except TypeError:
            raise ConfigError(f"results[{i}]: parameter values are numbers, strings or "
                              f"booleans, got {config}") from None
        for k, v in config.items():
            values.setdefault(k, {})[type(v).__name__, v] = v
        records.append((config, _time(r, i) if r.get("invalidity") == "correct" else None))
        unit = unit or next((m["unit"] for m in measurements if m.get("name") == "time"
                             and isinstance(m.get("unit"), str)), "")
    # Parameters with equal values of different types (true and 1) keep them apart as Typed.
    typed = frozenset(k for k, vs in values.items() if len(set(vs.values())) < len(vs))
    points: list[Point] = []
    times: dict[tuple, float | None] = {}
    for config, t in records:
        point = {k: _typed(v) if k in typed else v for k, v in config.items()}
        key = SearchSpace.key(point)
        if key in times:  # a duplicate record: keep the first
            continue
        points.append(point)
        times[key] = t
    params = [Param(k, _sorted_values({_typed(v) if k in typed else v for v in vs.values()}))
              for k, vs in values.items()]
    name = path.name.removesuffix(".gz").removesuffix(".json")
    return ReplaySpace(name, SearchSpace(params, points=points), times, typed, unit)


def evaluations_to(best_so_far: Sequence[float | None], optimum: float, x: float) -> int | None:
    """Distinct evaluations needed to get within x of the optimum (None: never, in budget)."""
    bound = optimum * (1 + x)
    for i, b in enumerate(best_so_far):
        if b is not None and b <= bound:
            return i + 1
    return None


def median_evaluations(counts: Sequence[int | None]) -> float | None:
    """Median over seeds; a seed that never got there counts as infinitely many (None if the
    median itself is one of those)."""
    m = statistics.median([math.inf if c is None else c for c in counts])
    return None if math.isinf(m) else float(m)


class _StopEvaluator(Evaluator):
    """An Evaluator that also reports done once a value at or under `stop_at` was seen (the
    benchmark's shortcut: later evaluations cannot change the metrics)."""

    def __init__(self, objective: Any, budget: int, stop_at: float) -> None:
        super().__init__(objective, budget)
        self.stop_at = stop_at
        self._reached = False

    @property
    def done(self) -> bool:
        return self._reached or len(self.history) >= self.budget

    def __call__(self, point: Point) -> float | None:
        value = super().__call__(point)
        if value is not None and value <= self.stop_at:
            self._reached = True
        return value


def replay(path: str | Path | ReplaySpace, strategy: str, seeds: int | Sequence[int],
           budget: int, stop_within: float | None = None,
           progress: bool | None = False) -> list[dict[str, Any]]:
    """Run `strategy` once per seed on the recorded space, each with a fresh Evaluator of
    `budget` distinct evaluations. Returns [{"seed": s, "best_so_far": [...]}, ...].

    `stop_within` (e.g. 0.01) ends a run early once within that fraction of the optimum (the
    metrics at that or looser targets are unchanged; best_so_far is then shorter).
    `progress`: a bar of the evaluations on stderr (None: on a terminal only; see
    tiledsl/progress.py)."""
    from autotune.strategies import get

    rs = path if isinstance(path, ReplaySpace) else load(path)
    fn = get(strategy)
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    runs = []
    bar = progress_bar(len(seed_list) * budget, f"replaying {strategy} on {rs.name}",
                       "evaluation", progress)

    def counted(point: Point) -> float | None:
        bar.update(1)
        return rs.objective(point)
    try:
        for i, seed in enumerate(seed_list):
            bar.set_postfix_str(f"seed {seed} ({i + 1} of {len(seed_list)})", refresh=False)
            if stop_within is None:
                evaluate = Evaluator(counted, budget)
            else:
                evaluate = _StopEvaluator(counted, budget, rs.optimum * (1 + stop_within))
            fn(rs.space, evaluate, seed, [])
            bar.update((i + 1) * budget - bar.n)  # a run that stopped early: its share is done
            runs.append({"seed": seed, "best_so_far": evaluate.best_so_far()})
    finally:
        bar.close()
    return runs


def summarize(rs: ReplaySpace, runs: list[dict[str, Any]],
              targets: Sequence[float] = TARGETS) -> dict[str, Any]:
    """Per seed evaluations to each target, their medians, and random's expectation."""
    per_seed = [{"seed": r["seed"],
                 **{f"{x:.0%}": evaluations_to(r["best_so_far"], rs.optimum, x) for x in targets}}
                for r in runs]
    return {
        "per_seed": per_seed,
        "median": {f"{x:.0%}": median_evaluations([s[f"{x:.0%}"] for s in per_seed])
                   for x in targets},
        "random": {f"{x:.0%}": rs.random_expectation(x) for x in targets},
        "within": {f"{x:.0%}": rs.within(x) for x in targets},
        "n_valid": len(rs.valid_times),
    }


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"


def _range(counts: Sequence[int | None]) -> str:
    """The seeds' min-max ('-' for a seed that did not get there in budget)."""
    low, high = min(counts, key=_order), max(counts, key=_order)
    return "-" if low is None else f"{_fmt(low)}-{_fmt(high)}"


def _order(count: int | None) -> float:
    return math.inf if count is None else count


def format_table(rs: ReplaySpace, strategy: str, summary: dict[str, Any]) -> str:
    """Every seed's evaluations (distinct configurations measured) to each target, then their
    median with the seeds' range beside it, and random search's expectation."""
    keys = list(summary["median"])
    unit = f" {rs.unit}" if rs.unit else ""
    lines = [(f"{rs.name}: {summary['n_valid']} valid configurations, "
              f"optimum {rs.optimum:.6g}{unit}; strategy {strategy}"),
             f"evaluations to get within {'/'.join(keys)} of the optimum ('-': not in budget)",
             f"{'seed':>10} " + " ".join(f"{k:>8}" for k in keys)]
    for s in summary["per_seed"]:
        lines.append(f"{s['seed']:>10} " + " ".join(f"{_fmt(s[k]):>8}" for k in keys))
    lines.append(f"{'median':>10} " + " ".join(f"{_fmt(summary['median'][k]):>8}" for k in keys))
    lines.append(f"{'min-max':>10} " + " ".join(
        f"{_range([s[k] for s in summary['per_seed']]):>8}" for k in keys))
    lines.append(f"{'random':>10} " + " ".join(f"{summary['random'][k]:>8.1f}" for k in keys) +
                 "  (expected, exact)")
    return "\n".join(lines)


def cmd_replay(args: argparse.Namespace) -> int:
    from autotune.strategies import get

    try:
        get(args.strategy)
    except ConfigError as e:
        print(f"tiledsl: {e}", file=sys.stderr)
        return 2
    if args.seeds < 1 or args.budget < 1:
        print("tiledsl: --seeds and --budget must be at least 1", file=sys.stderr)
        return 2
    try:
        rs = load(args.space)
    except (OSError, ValueError, TileDSLError) as e:
        print(f"tiledsl: cannot load {args.space}: {e}", file=sys.stderr)
        return 2
    runs = replay(rs, args.strategy, args.seeds, args.budget,
                  progress=False if args.no_progress else None)
    if args.json:
        print(json.dumps({"space": str(args.space), "strategy": args.strategy,
                          "optimum": rs.optimum, "runs": runs}))
    else:
        print(format_table(rs, args.strategy, summarize(rs, runs)))
    return 0


def add(subparsers: Any) -> None:
    from autotune.strategies import DEFAULT

    p = subparsers.add_parser(
        "replay", help="replay a search strategy on a brute-forced tuning space (T4 file)",
        description="Replay a search strategy on a recorded T4 tuning space: evaluations "
                    "needed per seed to get within 1/2/5 percent of the optimum, their medians, and "
                    "random search's expectation (N+1)/(K+1).")
    p.add_argument("space", help="a T4 results file (.json or .json.gz)")
    p.add_argument("--strategy", default=DEFAULT, help=f"search strategy (default: {DEFAULT})")
    p.add_argument("--seeds", type=int, default=10, help="runs, seeds 0..N-1 (default: 10)")
    p.add_argument("--budget", type=int, default=400,
                   help="distinct evaluations per run (default: 400)")
    p.add_argument("--json", action="store_true",
                   help='print one JSON object {"space", "strategy", "optimum", "runs": '
                        '[{"seed", "best_so_far"}]}')
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (by default one shows on a terminal, never in a log or "
                        "a pipe)")
    p.set_defaults(func=cmd_replay)


def _register() -> None:
    from tiledsl.runtime import registry

    registry.register_command("replay", add)


_register()
