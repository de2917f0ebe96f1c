"""Strategies backed by Optuna samplers (the only module of the project that imports optuna).

Every parameter with more than one value is given to Optuna as the integer index of its value
in the Param's ordered tuple (so samplers see the order: neighbours in the tuple are neighbours
for the sampler); parameters with a single value are filled in and never shown to the sampler.

Proposals are "repaired", never wasted: a proposal that is outside the space (`space.contains`
false) or was already evaluated is replaced by the nearest valid, not yet evaluated point
(L1 distance over indices normalised to [0, 1] per parameter), which is evaluated instead. The
trial the sampler proposed is told that point's value (Baldwinian repair: the sampler optimises
f(repair(x)), a function defined everywhere), so a proposal never costs budget unless it yields
one new distinct evaluation. A failed evaluation (None) is told as the worst value seen so far
(the sampler learns to avoid the region), or as a failed trial before any value was seen.
Values are told as log(value): the order is the same (TPE and CMA-ES only use ranks), and the
GP models a log-time better.

Registered: "tpe" (multivariate TPE), "cmaes" (CMA-ES with margin), "gp" (Optuna's GPSampler).

Persistent studies (the tuner's storage: SQLite by default, any SQLAlchemy URL such as
PostgreSQL, or `journal:FILE`) are opened, read and written here too: `open_study`,
`load_trials`, `record`; workers share them through `join` (study_workers.py).

To run a sampler against a study created elsewhere (e.g. a persistent one):

    study = optuna.create_study(storage="sqlite:///tune.db", study_name="k", load_if_exists=True)
    optimize(space, evaluate, seed=0, initial=[...], sampler_name="tpe", study=study)

`optimize` replaces the study's sampler by the named one (pass sampler_name=None to keep the
study's own), enqueues the initial points, and asks/tells until `evaluate.done`. Trials already
in the study (from an earlier session) are part of the sampler's history; the points they name
are not re-evaluated when `evaluate` already knows them (the Evaluator's memory).
"""

from __future__ import annotations

import json
import math
import random
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import optuna
from optuna.distributions import IntDistribution
from optuna.trial import TrialState

from autotune.space import Evaluator, Point, SearchSpace
from tiledsl.errors import ConfigError, warn
from autotune.strategies.registry import register
from autotune.strategies.journal_file import JournalLock, set_aside_torn_tail
from autotune.strategies.study_workers import Worker, point_key
from autotune.strategies.study_workers import BudgetSpent  # noqa: F401 - the tuner's

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning,
                        module="optuna")

CONNECT_TIMEOUT_S = 15  # seconds to reach a database server
ENUMERATE_LIMIT = 2_000_000  # enumerate the valid points of spaces up to this raw size


def storage_for(url: str) -> Any:
    """An Optuna storage from a URL: `sqlite:///path.db`, any SQLAlchemy URL (PostgreSQL...),
    or `journal:/path/to/file` for a journal file (safe on NFS, no database server; a torn
    last record is set aside first, a killed writer's lock broken: journal_file.py)."""
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalStorage
        path = url[len("journal:"):]
        set_aside_torn_tail(path)  # a crash's torn last record
        return JournalStorage(JournalFileBackend(path, lock_obj=JournalLock(path)))
    engine: dict[str, Any] = {"pool_pre_ping": True}
    if url.split(":", 1)[0].split("+", 1)[0] in ("postgresql", "mysql"):
        # a server that accepts the connection and never answers fails, rather than hangs
        engine["connect_args"] = {"connect_timeout": CONNECT_TIMEOUT_S}
    return optuna.storages.RDBStorage(url, engine_kwargs=engine)


def _retrying(fn: Any, attempts: int = 8) -> Any:
    """Workers that start together race to create the schema or lock SQLite: try again."""
    for i in range(attempts):
        try:
            return fn()
        except Exception as e:  # sqlalchemy's IntegrityError/OperationalError, optuna's races
            if i == attempts - 1 or not any(s in str(e) for s in (
                    "UNIQUE constraint", "locked", "already exists", "duplicate key",
                    "could not serialize", "IntegrityError")):
                raise
            time.sleep(0.1 * (i + 1) + random.random() * 0.1)
    raise AssertionError("unreachable")


def open_study(url: str, name: str) -> Any:
    """The study `name` in storage `url`, created if it does not exist (workers share it)."""
    try:
        return _retrying(lambda: optuna.create_study(storage=storage_for(url), study_name=name,
                                                     direction="minimize", load_if_exists=True))
    except Exception as e:  # sqlalchemy's and optuna's errors: a bad URL, no server, no driver
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"cannot open the study storage {url!r}: {first} (storage URLs: "
                          "sqlite:///file.db, postgresql://user@host/db, journal:/path)") from e


PROBLEM_ATTR = "tiledsl_problem"  # the study's user attribute naming what its trials measure


def bind_problem(study: Any, identity: str, description: str) -> None:
    """Tie the study to one tuning problem (kernel IR, argument shapes/dtypes/strides, backend,
    device, tool versions: `identity`, a JSON object), or refuse it if its trials measure another
    one, or were written by another tool: a reused study name must not feed one problem's
    measurements to another."""
    # The trials first: a tiledsl worker binds the study before it adds any trial, so a study
    # with trials and no binding was not made by tiledsl (and not by a worker starting now).
    trials = study.get_trials(deepcopy=False)
    attrs = study.user_attrs
    held = attrs.get(PROBLEM_ATTR)
    if held is None and trials:
        raise ConfigError(f"study '{study.study_name}' holds {len(trials)} trial(s) that tiledsl "
                          "did not record (a study made with Optuna directly, or by another "
                          "tool); name another study, or leave the name out (the default name "
                          "is one per problem)")
    if held is None:
        _retrying(lambda: study.set_user_attr(PROBLEM_ATTR, identity))
        _retrying(lambda: study.set_user_attr(PROBLEM_ATTR + "_description", description))
    elif held != identity:
        other = attrs.get(PROBLEM_ATTR + "_description", "another problem")
        differ = _differences(held, identity)
        raise ConfigError(f"study '{study.study_name}' holds trials of {other}, not of "
                          f"{description}" + (f" (they differ in {differ})" if differ else "")
                          + "; name another study, or leave the name out (the default name is "
                          "one per problem)")


def _differences(held: Any, identity: str) -> str:
    """The fields of two problem identities that differ, in words ('' if unreadable)."""
    try:
        a, b = json.loads(held), json.loads(identity)
    except (TypeError, ValueError):
        return ""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return ""
    names = {"ir": "the kernel's IR", "args": "argument shapes or dtypes", "strides": "strides",
             "device": "device or architecture", "versions": "tool versions"}
    return ", ".join(names.get(k, k) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def join(study: Any) -> Worker:
    """Register a worker with the study (study_workers.py): its `rank` among the live workers
    (0 for the first) starts its search elsewhere; its reservations keep two workers from
    measuring one point and bound the study's total. Call `leave()` when done."""
    return Worker(study, _retrying)


def start_points(study: Any, space: SearchSpace, seed: int,
                 compute: Callable[[], list[Point]]) -> list[Point]:
    """The points a search of `seed` starts from: those the study's first search of that seed
    stored, else `compute()`'s, stored. The estimate's ranking stops after a time (and at the
    deadline), so it may rank fewer configs another time: a resumed search must start where
    the interrupted one did to make the same trials."""
    attr = f"tiledsl_start_points_{seed}"
    try:
        held = json.loads(study.user_attrs.get(attr, "null"))
    except (TypeError, ValueError):
        held = None
    params = {p.name: p.values for p in space.params}
    if isinstance(held, list) and held and all(
            isinstance(p, dict) and set(p) == set(params)
            and all(v in params[k] for k, v in p.items()) for p in held):
        return held
    points = compute()
    _retrying(lambda: study.set_user_attr(attr, json.dumps(points)))
    return points


def stored_point(trial: Any) -> Point | None:
    """The point a trial recorded, or None if it recorded none or it cannot be read back (a
    hand-edited or foreign record)."""
    raw = trial.user_attrs.get("point")
    if not isinstance(raw, str):
        return None
    try:
        point = json.loads(raw)
    except ValueError:
        return None
    return point if isinstance(point, dict) else None


def in_space(space: SearchSpace, point: Point) -> bool:
    """Whether a stored point names exactly the space's parameters, with values of theirs
    (of the same type: True is not 1), and is valid."""
    if set(point) != {p.name for p in space.params}:
        return False
    if not all(any(type(v) is type(point[p.name]) and v == point[p.name] for v in p.values)
               for p in space.params):
        return False
    try:
        return space.contains(point)
    except Exception:  # noqa: BLE001 - a point the compiler cannot even build is not in it
        return False


def _read(trial: Any, space: SearchSpace | None
          ) -> tuple[Point, float | None, dict[str, Any]] | None | bool:
    """A finished record's (point, value, attrs); False for a trial that is no record (a
    worker's marker or reservation, a trial still running); None for a record that cannot be
    read, or (with `space`) whose point is not in it or whose value is no positive finite time."""
    if "point" not in trial.user_attrs or trial.state not in (TrialState.COMPLETE,
                                                              TrialState.FAIL):
        return False
    point = stored_point(trial)
    value = float(trial.value) if trial.state == TrialState.COMPLETE and \
        trial.value is not None else None
    if point is None or (space is not None and (
            not in_space(space, point) or (trial.state == TrialState.COMPLETE and not (
                value is not None and math.isfinite(value) and value > 0)))):
        return None
    return point, value, {k: v for k, v in trial.user_attrs.items() if k != "point"}


def load_trials(study: Any, space: SearchSpace | None = None
                ) -> list[tuple[Point, float | None, dict[str, Any]]]:
    """Every finished evaluation of the study (failed ones as None), in trial order, with the
    attributes it was recorded with (`record`'s `attrs`). With `space`, a trial whose point is
    not in it, cannot be read, or whose value is not a positive finite time is left out, with
    a warning: it was edited by hand or written by something else, and must not win."""
    out: list[tuple[Point, float | None, dict[str, Any]]] = []
    ignored = 0
    for t in study.get_trials(deepcopy=False):
        read = _read(t, space)
        if read is None:
            ignored += 1
        elif read is not False:
            out.append(read)
    if ignored and space is not None:
        warn(f"study '{study.study_name}': {ignored} stored trial(s) are unreadable, outside "
             "the kernel's config space, or hold no valid time (edited by hand, or written by "
             "another tool); they are ignored")
    return out


def trusted_records(space: SearchSpace, trust: Callable[[dict[str, Any]], bool]
                    ) -> Callable[[list[Any]], dict[str, float | None]]:
    """trials -> point key (study_workers.point_key) -> value of the first record of each
    point whose attributes `trust` accepts (a checked tune does not reuse an unchecked
    measurement): what a worker reuses instead of measuring, and counts against the budget."""
    def records(trials: list[Any]) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for t in trials:
            read = _read(t, space)
            if read and trust(read[2]):
                out.setdefault(point_key(read[0]), read[1])
        return out
    return records


def record(study: Any, space: SearchSpace, point: Point, value: float | None,
           attrs: dict[str, Any] | None = None) -> None:
    """Add one finished evaluation to the study (so it persists and other workers see it)."""
    dists = {p.name: optuna.distributions.CategoricalDistribution(list(p.values))
             for p in space.params}
    state = optuna.trial.TrialState.COMPLETE if value is not None else optuna.trial.TrialState.FAIL
    trial = optuna.trial.create_trial(
        params={k: point[k] for k in dists}, distributions=dists,
        value=value if value is not None else None, state=state,
        user_attrs={"point": json.dumps(point), **(attrs or {})})
    _retrying(lambda: study.add_trial(trial))


class Repair:
    """Maps any index vector to the nearest valid point not yet evaluated."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self.free = [p for p in space.params if len(p.values) > 1]
        self.fixed = {p.name: p.values[0] for p in space.params if len(p.values) == 1}
        self.scale = np.array([1.0 / (len(p.values) - 1) for p in self.free])
        self.points: list[Point] | None = None
        if space.size_upper_bound <= ENUMERATE_LIMIT:
            self.points = list(space.points())
            self.keys = {SearchSpace.key(p): i for i, p in enumerate(self.points)}
            self.coords = np.array([[p.values.index(pt[p.name]) for p in self.free]
                                    for pt in self.points], dtype=float).reshape(
                                        len(self.points), len(self.free)) * self.scale
            self.used = np.zeros(len(self.points), dtype=bool)

    def decode(self, idx: list[int]) -> Point:
        point = {p.name: p.values[i] for p, i in zip(self.free, idx)}
        point.update(self.fixed)
        return {p.name: point[p.name] for p in self.space.params}

    def encode(self, point: Point) -> dict[str, int]:
        return {p.name: p.values.index(point[p.name]) for p in self.free}

    def mark(self, point: Point) -> None:
        if self.points is not None:
            i = self.keys.get(SearchSpace.key(point))
            if i is not None:
                self.used[i] = True

    def nearest(self, idx: list[int], seen: Callable[[Point], bool],
                rng: random.Random) -> Point | None:
        """The nearest valid point not `seen` (None when every valid point was seen)."""
        if self.points is not None:
            x = np.asarray(idx, dtype=float) * self.scale
            d = np.abs(self.coords - x).sum(axis=1) if len(self.free) else np.zeros(
                len(self.points))
            d[self.used] = np.inf
            i = int(np.argmin(d)) if len(d) else -1
            if i < 0 or math.isinf(d[i]):
                return None
            return dict(self.points[i])
        # A space too big to enumerate: widening random moves around the proposal, then any
        # unseen sample.
        for radius in range(1, 8):
            for _ in range(50 * radius):
                j = [min(len(p.values) - 1, max(0, i + rng.randint(-radius, radius)))
                     for p, i in zip(self.free, idx)]
                q = self.decode(j)
                if self.space.contains(q) and not seen(q):
                    return q
        for _ in range(1000):
            q = self.space.sample(rng)
            if q is None:
                return None
            if not seen(q):
                return q
        return None


def make_sampler(name: str, seed: int, n_params: int = 1) -> optuna.samplers.BaseSampler:
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True,
                                          n_startup_trials=max(10, 2 * n_params))
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, with_margin=True,
                                            n_startup_trials=0, warn_independent_sampling=False)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=max(10, 2 * n_params))
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise KeyError(f"unknown optuna sampler {name!r}")


def optimize(space: SearchSpace, evaluate: Evaluator, seed: int, initial: list[Point],
             sampler_name: str | None = "tpe", study: optuna.Study | None = None,
             stop: Callable[[], bool] | None = None, lamarckian: bool = False,
             max_repeats: int = 0,
             on_new: Callable[[Point, float | None, Callable[[Point, float | None], None]],
                              None] | None = None) -> optuna.Study:
    """Ask/tell `study` (a fresh in-memory one if None) with the named sampler until
    `evaluate.done` (or `stop()`), each trial yielding one new distinct evaluation (see the
    module docstring for the repair of invalid or repeated proposals). Returns the study.

    Measured variants (benchmarks/replay.py): `lamarckian=True` fails the proposed trial and
    adds the repaired point as its own trial instead (worse for TPE on the shared spaces, and
    CMA-ES cannot learn from added trials); `max_repeats=k` answers up to k consecutive
    repeated proposals from memory before repairing (also worse). `on_new(point, value,
    record)` sees each new evaluation; `record(point, value)` adds an evaluation made outside
    the sampler (e.g. by a local descent) to the study as a finished trial."""
    rng = random.Random(seed)
    repair = Repair(space)
    n = len(repair.free)
    if study is None:
        study = optuna.create_study(direction="minimize",
                                    sampler=make_sampler(sampler_name or "tpe", seed, n))
    elif sampler_name is not None:
        study.sampler = make_sampler(sampler_name, seed, n)
    dists = {p.name: IntDistribution(0, len(p.values) - 1) for p in repair.free}
    for point in initial:
        if all(point.get(p.name) in p.values for p in repair.free):
            study.enqueue_trial(repair.encode(point), skip_if_exists=True)
    for point, _ in evaluate.history:
        repair.mark(point)
    seen_key = evaluate.results.__contains__

    def seen(q: Point) -> bool:
        return seen_key(SearchSpace.key(q))

    worst: float | None = None
    for _, v in evaluate.history:
        if v is not None and v > 0:
            worst = max(worst or v, v)

    def told(value: float | None) -> float | None:
        """What the sampler is told for an objective value (None: fail the trial)."""
        if value is not None and value > 0:
            return math.log(value)
        if value is not None:
            return value
        return math.log(worst) if worst is not None else None

    def record(point: Point, value: float | None) -> None:
        """Add an evaluation made outside the sampler's proposals as a finished trial."""
        t = told(value)
        state = TrialState.COMPLETE if t is not None else TrialState.FAIL
        study.add_trial(optuna.trial.create_trial(
            params=repair.encode(point), distributions=dists, value=t, state=state))

    lamarck = lamarckian and not isinstance(study.sampler, optuna.samplers.CmaEsSampler)
    repeats = 0
    while not evaluate.done and not (stop is not None and stop()):
        trial = study.ask(dists)
        idx = [trial.params[p.name] for p in repair.free]
        point = repair.decode(idx)
        inside = space.contains(point)
        if inside and seen(point) and repeats < max_repeats:
            # A repeated proposal: answered from memory, costs nothing.
            repeats += 1
            t = told(evaluate(point))
            study.tell(trial, t) if t is not None else study.tell(trial, state=TrialState.FAIL)
            continue
        repeats = 0
        repaired = False
        if not inside or seen(point):
            q = repair.nearest(idx, seen, rng)
            if q is None:  # every valid point was evaluated
                study.tell(trial, state=TrialState.FAIL)
                return study
            point, repaired = q, True
        value = evaluate(point)
        repair.mark(point)
        if value is not None and value > 0:
            worst = value if worst is None else max(worst, value)
        t = told(value)
        if repaired and lamarck:
            study.tell(trial, state=TrialState.FAIL)  # the sampler learns the real point
            record(point, value)
        elif t is None:
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, t)
        if on_new is not None:
            on_new(point, value, record)
    return study


def _strategy(name: str) -> Callable[[SearchSpace, Evaluator, int, list[Point]], None]:
    def run(space: SearchSpace, evaluate: Evaluator, seed: int, initial: list[Point]) -> None:
        optimize(space, evaluate, seed, initial, name)
    run.__name__ = f"optuna_{name}"
    run.__doc__ = f"Optuna {name} sampler over index-encoded parameters, proposals repaired."
    return run


for _name in ("tpe", "cmaes", "gp"):
    register(_name)(_strategy(_name))

