"""The tuner: a strategy searches the compiler's config space, a runner measures candidates,
every candidate's numbers are checked against NumPy, and the study lives in an Optuna storage so
an interrupted run resumes and several workers can share it. The best config goes to the cache,
where `k(*args)` finds it.
"""

from __future__ import annotations

import inspect
import json
import random
import time
import warnings
import weakref
from typing import Any, Callable

from autotune import cache, finalists as finals
from autotune.isolate import Isolated, OutOfTime, TrialFailed, fork_start
from autotune.options import MAX_SEED, TuneOptions
from autotune.prune import PRUNE_FACTOR, PRUNED, Pruner
from autotune.result import Trial, TuneResult, UNITS, baseline_unit  # noqa: F401 (re-exported)
from autotune.runners import RUNNERS, Runner, host_args, in_child
from autotune.space import Param, Point, SearchSpace
from autotune.spread import Spread
from autotune.strategies import DEFAULT, get
from autotune.strategies import optuna_adapter as studies
from autotune.timing import cuda_times_ms, wall_times_ms
from autotune.trials import TrialLog, TrialProgress
from tiledsl.runtime import registry
from tiledsl.frontend import static_args
from tiledsl.runtime.config import Config, ConfigSpace
from tiledsl.errors import BackendError, ConfigError, TileDSLError, TileDSLWarning
from tiledsl.runtime.kernel import TileKernel
from tiledsl.runtime.paths import cache_dir, writable_cache_dir

SPACE_BACKEND = {"spatial": "spatial", "numpy": "numpy", "model": "triton", "triton": "triton"}


def search_space(space: ConfigSpace) -> SearchSpace:
    """The compiler's config space as the strategies see it: the valid configs, less those
    that run exactly as another one does (the space's redundancy rules)."""
    params = [Param(p.name, tuple(p.choices)) for p in space.params]
    known: dict[tuple, bool] = {}  # constraint checks map the kernel: each point once

    def valid(point: Point) -> bool:
        key = SearchSpace.key(point)
        if key not in known:
            known[key] = space.admits(space.make(point))
        return known[key]
    return SearchSpace(params, valid=valid, default=space.values(space.default()))


MODEL_PICKS = 4  # configs the backend's estimate ranks best, tried right after the default
RANK_LIMIT = 20_000  # spaces up to this raw size are ranked whole; larger ones by a sample
RANK_SAMPLE = 2_000
# The ranking's time: past it, the configs ranked so far (in a shuffled order: a uniform
# sample) stand for the rest. The spatial estimate of a split-K GEMM with a 2048-long k took
# 10 ms a config, 53 s for its 5,394 configs, 80% of a 20-trial tune.
RANK_SECONDS = 5.0


def analytic_candidates(config_space: ConfigSpace, space: SearchSpace | None = None,
                        seed: int = 0, deadline: float | None = None) -> list[Point]:
    """Configs worth trying first: the default; the `MODEL_PICKS` points of `space` the
    backend's estimate (`ConfigSpace.estimate`) ranks best, one per distinct estimate (configs it
    cannot tell apart count once); then uniform block sizes (large first). The ranking visits
    the points in a shuffled order and stops `RANK_SECONDS` after it starts, or at `deadline`
    (time.monotonic()) if sooner; ties go to the earlier point of the space either way."""
    points = [config_space.values(config_space.default())]
    if config_space.estimate is not None and space is not None:
        points += [p for p in _model_picks(config_space, space, seed, deadline)
                   if p not in points]
    for size in (128, 64, 256, 32):
        cfg = config_space.default()
        blocks = tuple(min(size, max(p.choices)) for p in config_space.params
                       if p.name.startswith("block_sizes["))
        cfg = cfg.replace(block_sizes=list(blocks))
        if cfg in config_space and config_space.values(cfg) not in points:
            points.append(config_space.values(cfg))
    return points


# The ranking per config space and seed: the tunes of one problem in one process (a resumed
# study, a notebook's second tune, the tests) rank its space once.
_PICKS: weakref.WeakKeyDictionary[ConfigSpace, dict[tuple, list[Point]]] = \
    weakref.WeakKeyDictionary()


def _model_picks(config_space: ConfigSpace, space: SearchSpace, seed: int,
                 deadline: float | None) -> list[Point]:
    """The `MODEL_PICKS` points of `space` the estimate ranks best, one per distinct estimate
    (see `analytic_candidates`), kept for the next tune of the space in this process unless a
    tune's own deadline cut the ranking short (`RANK_SECONDS`'s cut is kept: the spatial
    estimate of a 70x50x40 GEMM takes about 7 ms a config, 5 s for its 749)."""
    key = (seed, RANK_SECONDS)  # (a longer ranking time ranks again)
    known = _PICKS.get(config_space, {}).get(key)
    if known is not None:
        return known
    rng = random.Random(seed)
    if space.size_upper_bound <= RANK_LIMIT:
        pool = list(space.points())
    else:
        pool = [p for p in (space.sample(rng, tries=200) for _ in range(RANK_SAMPLE))
                if p is not None]
    order = list(range(len(pool)))
    rng.shuffle(order)
    stop = time.monotonic() + RANK_SECONDS
    stop = stop if deadline is None else min(stop, deadline)
    scored = []
    for i in order:
        if time.monotonic() > stop:
            break
        scored.append((config_space.estimate(config_space.make(pool[i])), i))  # type: ignore[misc]
    scored.sort()
    seen: set[float] = set()
    picks = []
    for cost, i in scored:
        if len(seen) == MODEL_PICKS:
            break
        if round(cost, 6) not in seen:
            seen.add(round(cost, 6))
            picks.append(pool[i])
    if deadline is None or len(scored) == len(pool):  # not cut short by this tune's deadline
        _PICKS.setdefault(config_space, {})[key] = picks
    return picks


def _problem(key: cache.CacheKey, backend: str, arch: Any) -> tuple[str, str]:
    """What a study's trials measure (the result cache's key without the kernel's source text,
    whose comments do not change a measurement), and that in words."""
    parts = json.loads(key.text)
    identity = json.dumps({k: v for k, v in parts.items() if k != "source"}, sort_keys=True)
    args = ", ".join(f"{a[2]}{a[1]}" if a[0] == "tensor" else a[1] for a in parts["args"])
    if backend == "spatial":
        from lowering.backends.spatial.arch import preset
        where = preset(arch or "generic-8x8").name
    else:
        where = parts["device"]
    return identity, f"kernel '{parts['kernel']}' on {backend} ({where}) for ({args})"


def default_storage() -> str:
    path = cache_dir() / "studies.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not path.is_file():  # SQLite would block on a FIFO, forever
        raise ConfigError(f"the default study storage {path} is not a regular file (a FIFO, a "
                          "directory...): remove it, or pass storage=")
    return f"sqlite:///{path}"


def require_gpu(kernel: TileKernel, doing: str = "tuning",
                instead: str = "tune with backend='model' (an H100 cost model) or 'spatial' "
                               "(the simulator)") -> None:
    """A GPU tune (or benchmark) needs torch with a CUDA device: say so before any process
    starts, and what to do `instead`."""
    try:
        import torch
        found = torch.cuda.is_available()
    except ImportError:
        found = False
    if not found:
        raise BackendError(f"kernel '{kernel.name}': {doing} on backend 'triton' needs torch and "
                           f"an NVIDIA GPU, and none is available; without one, {instead}")


def tune(kernel: TileKernel, args: list[Any], *, backend: str = "spatial", arch: Any = None,
         trials: int = 40, timeout: float | None = None, strategy: str | None = None,
         storage: str | None = None, study_name: str | None = None, seed: int = 0,
         check: bool = True, isolate: bool | None = None, trial_timeout: float = 60.0,
         progress: bool | None = None, baselines: dict[str, Callable[[], Any]] | None = None,
         use_cache: bool = True, finalists: int = finals.FINALISTS,
         rounds: int = finals.ROUNDS, prune: float | None = PRUNE_FACTOR) -> TuneResult:
    """Tune `kernel` for `args` on `backend` ("spatial", "numpy", "model" or "triton").

    On the GPU, a candidate the cost model predicts more than `prune` times slower than a
    config already measured is not timed (prune.py; `prune=None` times every candidate).
    On a noisy runner (GPU or CPU timing) the `finalists` fastest configs of the search and the
    default are then re-timed interleaved over `rounds` rounds, and the lowest median wins
    (`finalists=0` keeps the search's fastest trial).

    Every candidate is checked and measured in a separate process (`isolate=True`, the default
    on every backend): one that crashes or runs past `trial_timeout` seconds fails with its
    reason, and a fresh process measures the next. `timeout` bounds the whole tune, a trial in
    flight and the finalists' re-timing included (only the default config, if no trial reached
    it, is measured past it, within `trial_timeout`). `isolate=False` measures in this process,
    where a crash ends the tune and a hang outlives `timeout` (benchmarks/isolation_overhead.py
    finds no cost to isolation above a busy machine's noise).

    `progress`: a bar of the trials, then of the finalists' re-timing, on stderr; None (the
    default) shows it on a terminal only, never in a log or a pipe; True always, False never."""
    options = TuneOptions(
        backend=backend, arch=arch, trials=trials, timeout=timeout, strategy=strategy,
        storage=storage, study_name=study_name, seed=seed, check=check,
        isolate=True if isolate is None else isolate, trial_timeout=trial_timeout,
        progress=progress, baselines=baselines or {}, use_cache=use_cache, finalists=finalists,
        rounds=rounds, prune=prune)
    return _Tune(kernel, args, options).run()


def _remaining(until: float | None) -> float | None:
    """The seconds left until `until` (time.monotonic()), for a trial in flight (None: no
    limit but the trial's own)."""
    return None if until is None else until - time.monotonic()


class _Tune:
    """One tune, as the stages `run` takes in order: the options checked and the study opened,
    the spaces built, the measuring and compiling processes started, the study's earlier trials
    resumed, the search, the finalists re-timed, the winner stored and the result reported.

    The strategy calls the trial log (`TrialLog`, trials.py: a Trial record per point, observed
    by the progress bar); its objective is `_objective`: a reservation in the study, then
    `_measure` (priced by the cost model, then pruned, or checked and timed)."""

    def __init__(self, kernel: TileKernel, args: list[Any], options: TuneOptions) -> None:
        self.kernel, self.args, self.o = kernel, args, options
        self.start = time.monotonic()
        self.deadline: float | None = None  # the tune's (time.monotonic()), if it has a timeout
        self.isolated: Isolated | None = None
        self.precompiler: Any = None  # a Precompiler (precompile.py), for GPU and model tunes
        self.compiled_ahead = 0  # trials whose config a compile worker had compiled
        self.worker: Any = None  # this process's membership of the study (study_workers.py)
        self.progress: TrialProgress | None = None
        self.search_best: tuple[Point, float] | None = None
        self.finalists: list[finals.Finalist] = []

    def run(self) -> TuneResult:
        self.open_study()
        self.build_space()
        try:
            self.start_processes()
            self.resume()
            self.search()
            self.retime_finalists()
        finally:
            self.close()
        return self.store_and_report()

    # -- the stages ----------------------------------------------------------------------------

    def open_study(self) -> None:
        """Check the options, then open the study: a bad option is an error that names it (and
        the kernel) before any process starts."""
        o, kernel = self.o, self.kernel
        o.validate(kernel.name)
        if o.timeout is not None:
            self.deadline = self.start + o.timeout
        if not isinstance(o.backend, str) or o.backend not in RUNNERS:
            raise BackendError(f"kernel '{kernel.name}': no tuning backend {o.backend!r}; "
                               f"choose from {sorted(RUNNERS)}")
        if o.backend == "triton":
            require_gpu(kernel)
        if o.use_cache or o.storage is None:  # the result and the default study live there
            try:
                writable_cache_dir()
            except TileDSLError as e:
                raise e.with_context(kernel=kernel.name) from None
        self.values = kernel.bind(tuple(self.args), {})
        self.key = cache.key(kernel, self.values, o.backend, o.arch)
        self.url = o.storage or default_storage()
        self.name = o.study_name or f"{kernel.name}-{o.backend}-{self.key.digest[:12]}"
        try:
            self.strategy = get(o.strategy or DEFAULT)
            self.pruner = Pruner(o.prune)  # a bad factor is an error on every backend
            if o.backend != "triton":
                self.pruner = Pruner(None)  # the model predicts GPU times: it prunes GPU tunes
            self.study = studies.open_study(self.url, self.name)
            studies.bind_problem(self.study, *_problem(self.key, o.backend, o.arch))
        except TileDSLError as e:
            raise e.with_context(kernel=kernel.name) from None

    def build_space(self) -> None:
        """The kernel's config space for the arguments, the search space the strategy sees, the
        runner, and the trial log the strategy calls."""
        o = self.o
        self.config_space = self.kernel.config_space(
            *self.values, backend=SPACE_BACKEND[o.backend],
            **({} if o.arch is None else {"arch": o.arch}))
        self.space = search_space(self.config_space)
        self.runner: Runner = RUNNERS[o.backend](self.kernel, self.values, o.arch)
        self.default = self.config_space.default()
        self.default_point = self.config_space.values(self.default)
        self.default_key = SearchSpace.key(self.default_point)
        # GPU tunes price what no compile worker compiled on resources guessed from the IR
        self.estimate = self.config_space.estimate if o.backend == "triton" else None
        self.log = TrialLog(self._objective, o.trials, self.deadline, self.config_space.make)

    def start_processes(self) -> None:
        """The measuring process (isolation) and, on the GPU and the model, the compile-ahead
        pool, which compiles the configs the strategy hints at while others are measured.

        What they get: the arrays on the host, and the kernel's source, which they check against
        the file they import the kernel from (functions by value where pickle cannot send them:
        static_args.shippable). A CUDA context does not survive a fork: GPU and model children
        are spawned, and import the kernel from its file; CPU children are forked copies of this
        process (isolate.py)."""
        o, kernel = self.o, self.kernel
        gpu = o.backend in ("model", "triton")
        method = "spawn" if gpu else fork_start()
        host, source = host_args(self.values), kernel.source_digest
        if (o.isolate and method == "spawn") or gpu:
            host = static_args.shippable(kernel.name, list(kernel.signature.parameters), host)
        if o.isolate and method == "fork":
            self.isolated = Isolated(in_child, (kernel, self.values, o.backend, o.arch, o.check),
                                     o.trial_timeout, start="fork")
        elif o.isolate:
            self.isolated = Isolated("autotune.runners:from_file",
                                     (kernel.file, kernel.name, host, o.backend, o.arch, o.check,
                                      source), o.trial_timeout)
        self.runner.self_checking = self.runner.self_checking and o.check
        if gpu:
            from autotune.precompile import Precompiler
            if o.backend == "triton":  # fill Triton's JIT cache for this GPU
                from lowering.backends.triton.gpu import device_target
                target, sms = device_target()
                self.precompiler = Precompiler(kernel.file, kernel.name, host, "jit", target, sms,
                                               source=source, timeout=o.trial_timeout)
            else:
                self.precompiler = Precompiler(kernel.file, kernel.name, host, "aot", "sm_90",
                                               source=source, timeout=o.trial_timeout)
            self.log.on_prefetch = self._hint

    def resume(self) -> None:
        """Read back the study's earlier measurements that this tune trusts (`_trusted`), as
        trials of this run's log; then show the progress bar, which observes the trials."""
        self.trusted_records = studies.trusted_records(self.space, self._trusted)
        for point, value, attrs in studies.load_trials(self.study, self.space):
            if not self._trusted(attrs):
                continue  # measured without checking its numbers, or never timed: again
            if SearchSpace.key(point) in self.log.results:
                continue  # the point's first trusted record stands
            trial = self.log.record(point)
            status = str(attrs.get("status", ""))
            trial.status = status if status.startswith(PRUNED) else "resumed"
            trial.origin = "resumed"
            if isinstance(attrs.get("model_us"), (int, float)):
                trial.predicted = float(attrs["model_us"])
                if attrs.get("model_from") in ("compiled", "ir"):
                    trial.model_from = str(attrs["model_from"])
            self.log.store(point, value)
            self.pruner.measured(trial.predicted, value)
        self.progress = TrialProgress(
            self.kernel.name, self.log, self.o.trials, self.o.progress, self.runner.unit,
            None if self.precompiler is None else lambda: self.compiled_ahead)
        self.log.observers.append(self.progress)

    def search(self) -> None:
        """Join the study as one of its workers, then run the strategy from this worker's
        initial points. The default config is always measured, even past the deadline."""
        try:
            self.worker = studies.join(self.study)  # other workers on this study start elsewhere
        except TileDSLError as e:
            raise e.with_context(kernel=self.kernel.name) from None
        seed = (self.o.seed + 7919 * self.worker.rank) % (MAX_SEED + 1)
        initial = self._initial_points(seed)
        if self.precompiler is not None:
            self.precompiler.submit([self.config_space.make(p) for p in initial])
        self.strategy(self.space, self.log, seed, initial)
        if self.default_key not in self.log.results:
            self.log.store(self.default_point,
                           self._objective(self.default_point, budgeted=False))
        self.search_best = self.log.best

    def retime_finalists(self) -> None:
        """On a noisy runner, the search's fastest configs and the default, re-timed interleaved
        (finalists.py)."""
        o, isolated = self.o, self.isolated
        if not (self.runner.noisy and o.finalists > 0 and o.rounds > 0
                and self.search_best is not None):
            return
        timer = (lambda c: isolated.time(c, _remaining(self.deadline))) if isolated else \
            self.runner.time
        picked = finals.choose(self.log.history, o.finalists, always=self.default_point)
        assert self.progress is not None
        progress = self.progress
        progress.retiming(len(picked) * o.rounds)

        def timed(p: Point) -> float:
            try:
                return timer(self.config_space.make(p))
            finally:
                progress.timed()
        self.finalists = finals.retime(
            picked, timed, o.rounds, failed=(TrialFailed, TileDSLError, ValueError, RuntimeError),
            deadline=self.deadline, stopped=(OutOfTime,))
        for f in self.finalists:
            f.config = self.config_space.make(f.point)

    def close(self) -> None:
        """Leave the study, and stop the bar and the processes (whatever was started)."""
        if self.worker is not None:
            self.worker.leave()
        if self.progress is not None:
            self.progress.close()
        if self.isolated is not None:
            self.isolated.close()
        if self.precompiler is not None:
            self.precompiler.close()

    def store_and_report(self) -> TuneResult:
        """The winner (the finalists' lowest median, else the search's fastest trial) into the
        result cache; the baselines timed; the result."""
        o, make = self.o, self.config_space.make
        best, default_value = self.search_best, self.log.results.get(self.default_key)
        won = finals.winner(self.finalists)
        if won is not None:
            best = (won.point, won.value)  # type: ignore[assignment]
            default_value = next((f.value for f in self.finalists if f.value is not None and
                                  SearchSpace.key(f.point) == self.default_key), default_value)
        best_config = make(best[0]) if best else None
        if best_config is not None and o.use_cache:
            cache.store(self.key, best_config, best[1], self.runner.unit)  # type: ignore[index]
            self.kernel.forget_tuned()  # the in-process memo of cache lookups
        baselines = {name: Spread.of(samples) for name, samples in
                     time_baselines(self.kernel.name, o.backend, o.baselines).items()}
        trials = self.log.trials()
        return TuneResult(
            self.kernel.name, o.backend, self.runner.unit, best_config,
            best[1] if best else None, self.default, default_value, trials, self.name, self.url,
            time.monotonic() - self.start,
            baselines={name: spread.median for name, spread in baselines.items()},
            compiled_ahead=self.compiled_ahead if self.precompiler is not None else None,
            finalists=self.finalists,
            search_best=make(self.search_best[0]) if self.search_best else None,
            baseline_spreads=baselines,
            resumed=sum(t.origin == "resumed" for t in trials),
            shared=sum(t.origin == "shared" for t in trials))

    # -- a trial -------------------------------------------------------------------------------

    def _initial_points(self, seed: int) -> list[Point]:
        """Where this worker's search starts: the points the study's searches of `seed` start
        from (`analytic_candidates`), rotated by the worker's rank so that two workers do not
        chase each other (a second one takes them from the other end)."""
        initial = studies.start_points(self.study, self.space, seed, lambda: analytic_candidates(
            self.config_space, self.space, seed, self.deadline))
        rank = self.worker.rank
        if rank % 2:
            initial = initial[::-1]
        shift = rank // 2 % len(initial)
        return initial[shift:] + initial[:shift]

    def _trusted(self, attrs: dict[str, Any]) -> bool:
        """Whether a stored measurement stands: not one measured without checking its numbers
        (for a checked tune), nor one pruned, never timed (for a tune that does not prune)."""
        pruned = str(attrs.get("status", "")).startswith(PRUNED)
        return not ((self.o.check and attrs.get("checked") is False)
                    or (pruned and self.pruner.factor is None))

    def _objective(self, point: Point, budgeted: bool = True) -> float | None:
        """Measure `point` under a reservation in the study (study_workers.py), or reuse what
        another worker measured; `budgeted`: within the study's total of `trials` points."""
        claim = self.worker.claim(point, self.o.trials if budgeted else None,
                                  self.trusted_records, self.deadline if budgeted else None)
        if claim.trial_id is None:
            trial = self.log.record(point)
            trial.status, trial.origin = "from another worker", "shared"
            return claim.shared
        try:
            value = self._measure(point)
        except OutOfTime as e:  # the tune's deadline stopped it: not the config's failure,
            self.log.record(point).status = str(e)  # not stored
            self.worker.withdraw(claim)
            return None
        except BaseException:
            self.worker.withdraw(claim)
            raise
        if self.isolated is not None and self.isolated.broken is not None:
            self.worker.withdraw(claim)  # no process could measure it: not stored either
            return None
        trial = self.log.record(point)
        attrs = {"status": trial.status, "model_us": trial.predicted,
                 "model_from": trial.model_from, "checked": self.o.check}
        self.worker.finish(claim, lambda: studies.record(self.study, self.space, point, value,
                                                         attrs))
        return value

    def _measure(self, point: Point) -> float | None:
        """`point`'s value (None if it failed, or was pruned: its record says why). OutOfTime
        passes through: the tune's deadline came during it."""
        trial = self.log.record(point)
        value: float | None = None
        # the tune's deadline bounds a trial begun before it; the default config, measured
        # after it if no trial reached it, has its own trial_timeout
        until = self.deadline if self.deadline is not None and \
            time.monotonic() < self.deadline else None
        try:
            self._price(trial, until)
            pruned = None if SearchSpace.key(point) == self.default_key else \
                self.pruner.why(trial.predicted)
            if pruned is not None:
                trial.status = pruned  # not timed; recorded as failed
            else:
                value = self._time(trial.config, until)
                trial.status = "ok"
        except OutOfTime:
            raise
        except (TrialFailed, TileDSLError, ValueError, RuntimeError) as e:
            trial.status = str(e).splitlines()[0][:200]
        self.pruner.measured(trial.predicted, value)
        return value

    def _price(self, trial: Trial, until: float | None) -> None:
        """The cost model's prediction for the trial's config (GPU and model tunes): a compile
        worker's, once it compiled the config, else one on resources guessed from the IR."""
        if self.precompiler is not None and self.precompiler.wait(trial.config,
                                                                  _remaining(until)):
            self.compiled_ahead += 1
            if trial.config in self.precompiler.predicted:
                trial.predicted = self.precompiler.predicted[trial.config]
                trial.model_from = "compiled"
        if trial.predicted is None and (price := self._guess(trial.config)) is not None:
            trial.predicted, trial.model_from = price, "ir"

    def _guess(self, config: Config) -> float | None:
        """What no worker compiled is priced on resources guessed from the IR (GPU tunes)."""
        try:
            return self.estimate(config) if self.estimate is not None else None
        except Exception:  # noqa: BLE001 - a kernel the model cannot price is timed unpruned
            return None

    def _time(self, config: Config, until: float | None) -> float:
        """The config checked against NumPy (where the measuring process does not check it
        itself) and measured."""
        if self.o.check and self.isolated is None and not self.runner.self_checking:
            why = self.runner.check(config)
            if why is not None:
                raise TrialFailed(why)
        if self.isolated is not None:
            return self.isolated.measure(config, _remaining(until))
        return self.runner.measure(config)

    def _hint(self, points: list[Point]) -> None:
        """A strategy's hint: the compile workers compile these configs next (not those the
        cost model would prune)."""
        configs = [self.config_space.make(p) for p in points]
        if self.estimate is not None:
            configs = [c for c in configs
                       if c == self.default or self.pruner.why(self._guess(c)) is None]
        self.precompiler.submit(configs, replace=True)


def time_baselines(kernel: str, backend: str,
                   baselines: dict[str, Callable[[], Any]]) -> dict[str, list[float]]:
    """name -> each repeat's milliseconds, timed as the runner times candidates. A baseline
    that fails is left out with a warning that says why: the tune's result stands without it."""
    timer = cuda_times_ms if backend == "triton" else wall_times_ms
    out = {}
    for name, fn in baselines.items():
        try:
            out[name] = timer(fn)
        except Exception as e:  # noqa: BLE001 - the user's code, or the array library's
            warnings.warn(f"kernel '{kernel}': baseline {name!r} failed, left out of the "
                          f"table: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                          TileDSLWarning, stacklevel=3)
    return out


class Tuner:
    """What tiledsl's kernels reach through the registry: tuning and cache lookups."""

    def tune(self, kernel: TileKernel, args: list[Any], **options: Any) -> TuneResult:
        known = [n for n in inspect.signature(tune).parameters if n not in ("kernel", "args")]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ConfigError(f"autotune() got unknown option(s) {', '.join(unknown)}; the "
                              f"options: {', '.join(known)}", kernel=kernel.name)
        return tune(kernel, args, **options)

    def cached_config(self, kernel: TileKernel, args: list[Any], backend: str,
                      arch: Any = None) -> Config | None:
        try:
            return cache.load(cache.key(kernel, args, backend, arch))
        except (OSError, ValueError, TileDSLError):
            return None

    def tuned_entries(self, kernel: TileKernel, args: list[Any]) -> list[Any]:
        """The result cache's tuned configs of `kernel` (cache_list.py)."""
        from autotune.cache_list import tuned_entries
        return tuned_entries(kernel, args)


registry.register_service("tuner", Tuner())
