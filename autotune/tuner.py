"""The tuner: a strategy searches the compiler's config space, a runner measures candidates,
every candidate's numbers are checked against NumPy, and the study lives in an Optuna storage so
an interrupted run resumes and several workers can share it. The best config goes to the cache,
where `k(*args)` finds it.
"""

from __future__ import annotations

import inspect
import io
import json
import random
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from autotune import cache, finalists as finals
from autotune.spread import Spread, compare, number
from autotune.timing import cuda_times_ms, wall_times_ms
from autotune.isolate import STOPPED, Isolated, OutOfTime, TrialFailed, fork_start
from autotune.options import MAX_SEED, check_tune_options
from autotune.prune import PRUNE_FACTOR, PRUNED, Pruner
from autotune.runners import RUNNERS, Runner, host_args, in_child
from autotune.space import Evaluator, Param, Point, SearchSpace
from autotune.strategies import DEFAULT, get
from autotune.strategies import optuna_adapter as studies
from tiledsl import registry, static_args
from tiledsl.config import Config, ConfigSpace
from tiledsl.errors import BackendError, ConfigError, TileDSLError, TileDSLWarning
from tiledsl.kernel import TileKernel
from tiledsl.paths import cache_dir, writable_cache_dir
from tiledsl.progress import progress_bar

SPACE_BACKEND = {"spatial": "spatial", "numpy": "numpy", "model": "triton", "triton": "triton"}
# What a tune's numbers are, per backend, as its table names them on every row
UNITS = {"spatial": "simulated cycles", "model": "model us (predicted, H100)",
         "numpy": "CPU ms", "triton": "GPU ms"}


def baseline_unit(backend: str) -> str:
    """Baselines run on the GPU for a GPU tune, on the CPU otherwise."""
    return "GPU ms" if backend == "triton" else "CPU ms"


@dataclass
class Trial:
    config: Config
    value: float | None
    status: str  # "ok", "resumed", "pruned: ..." or why it failed ("timed out", "wrong numbers")
    predicted: float | None = None  # the cost model's microseconds, if it priced the config
    # what it priced: "compiled" (a compile worker's resources) or "ir" (resources guessed from
    # the IR, for a config no worker compiled)
    model_from: str | None = None

    @property
    def pruned(self) -> bool:
        return self.status.startswith(PRUNED)

    @property
    def stopped(self) -> bool:
        """Stopped by the tune's timeout while it was measured: neither measured nor failed."""
        return self.status.startswith(STOPPED)


@dataclass
class TuneResult:
    kernel: str
    backend: str
    unit: str
    best: Config | None
    best_value: float | None
    default: Config
    default_value: float | None
    trials: list[Trial]
    study: str
    storage: str
    seconds: float
    baselines: dict[str, float] = field(default_factory=dict)  # name -> milliseconds (median)
    compiled_ahead: int | None = None  # trials a compile worker had compiled (GPU and model)
    # Noisy runners: the search's fastest configs and the default, re-timed interleaved
    # (finalists.py); best_value and default_value are then their medians over the rounds.
    finalists: list[finals.Finalist] = field(default_factory=list)
    search_best: Config | None = None  # the search's own fastest trial
    # name -> the baseline's median and range over its timed repeats
    baseline_spreads: dict[str, Spread] = field(default_factory=dict)
    resumed: int = 0  # trials read back from the study, measured by an earlier run
    shared: int = 0  # trials another worker on the study measured while this one ran

    @property
    def ran(self) -> int:
        """Trials this run measured itself (the default config included, if it measured it)."""
        return len(self.trials) - self.resumed - self.shared

    @property
    def best_so_far(self) -> list[float | None]:
        out: list[float | None] = []
        best: float | None = None
        for t in self.trials:
            if t.value is not None and (best is None or t.value < best):
                best = t.value
            out.append(best)
        return out

    @property
    def rejected(self) -> list[Trial]:
        """Trials that failed or gave wrong numbers (not the pruned ones, nor one the tune's
        timeout stopped)."""
        return [t for t in self.trials if t.value is None and not t.pruned and not t.stopped]

    @property
    def pruned(self) -> list[Trial]:
        """Trials not timed: the cost model predicted them far slower than a measured one."""
        return [t for t in self.trials if t.pruned]

    def spread(self, config: Config | None) -> Spread | None:
        """`config`'s median and range over the finalists' re-timing rounds (None where it was
        not re-timed: a deterministic runner, or `finalists=0`)."""
        return next((Spread.of(f.samples) for f in self.finalists
                     if f.config == config and f.failure is None and f.samples), None)

    def table(self) -> str:
        """The tuned and default configs and the baselines, one row each with its median, its
        range (min-max) and its unit, then the ratios, each marked "within noise" where the two
        ranges overlap. The header says how many trials this run measured and how many it
        resumed from the study."""
        unit, base_unit = UNITS.get(self.backend, self.unit), baseline_unit(self.backend)
        rows = [("tuned", str(self.best), self.best_value, self.spread(self.best), unit),
                ("default", str(self.default), self.default_value, self.spread(self.default),
                 unit)]
        rows += [(f"baseline: {name}", "", ms, self.baseline_spreads.get(name), base_unit)
                 for name, ms in self.baselines.items()]
        cells = [(name, cfg, "-" if value is None else number(value),
                  self._range_text(value, spread, row_unit), row_unit)
                 for name, cfg, value, spread, row_unit in rows]
        header = ("", "config", "median", "range (min-max)", "unit")
        widths = [max(len(c[i]) for c in cells + [header]) for i in range(4)]
        lines = [self._summary()]
        for c in [header] + cells:
            lines.append(f"  {c[0]:{widths[0]}}  {c[1]:{widths[1]}}  {c[2]:>{widths[2]}}  "
                         f"{c[3]:{widths[3]}}  {c[4]}".rstrip())
        lines += self._comparisons(unit, base_unit)
        if self.finalists:
            rounds = max(len(f.samples) for f in self.finalists)
            verdict = ("kept the search's fastest trial" if self.best == self.search_best else
                       f"the search's fastest trial was {self.search_best}")
            failed = sum(f.failure is not None for f in self.finalists)
            lines.append(f"  {len(self.finalists)} finalists re-timed interleaved, {rounds} rounds "
                         f"(medians){f', {failed} failed' if failed else ''}: {verdict}")
        return "\n".join(lines)

    def _summary(self) -> str:
        """The header: what ran, what was resumed, what was rejected or pruned."""
        done = f"resumed {self.resumed}, " if self.resumed else ""
        done += f"{self.shared} from other workers, " if self.shared else ""
        ahead = "" if self.compiled_ahead is None else f", {self.compiled_ahead} compiled ahead"
        pruned = f", {len(self.pruned)} pruned by the cost model" if self.pruned else ""
        pruned += ", 1 stopped by the timeout" if any(t.stopped for t in self.trials) else ""
        return (f"{self.kernel} on {self.backend}: {len(self.trials)} trials ({done}ran "
                f"{self.ran}), {len(self.rejected)} rejected{pruned}{ahead}; {self.seconds:.1f} s "
                f"in all (study {self.study!r})")

    def _range_text(self, value: float | None, spread: Spread | None, unit: str) -> str:
        if spread is not None:
            return spread.range_text
        if value is None:
            return "-"
        if unit == UNITS.get(self.backend) and self.backend in ("spatial", "model"):
            return "exact (deterministic)"
        return "one trial (not re-timed)"

    def _comparisons(self, unit: str, base_unit: str) -> list[str]:
        """The tuned config against the default and against the baselines measured in its
        unit; a baseline in another unit is said not to compare."""
        lines = []
        best_spread = self.spread(self.best)
        if self.best_value and self.default_value:
            lines.append("  tuned vs the default config: " + compare(
                self.default_value, self.best_value, self.spread(self.default), best_spread))
        for name, ms in self.baselines.items():
            if base_unit == unit and self.best_value and ms:
                lines.append(f"  tuned vs {name}: " + compare(
                    ms, self.best_value, self.baseline_spreads.get(name), best_spread))
        if self.baselines and base_unit != unit:
            lines.append(f"  (the baselines are {base_unit}, the configs {unit}: the two do not "
                         "compare)")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "backend": self.backend, "unit": self.unit,
                "best": self.best.to_dict() if self.best else None, "best_value": self.best_value,
                "default": self.default.to_dict(), "default_value": self.default_value,
                "trials": [{"config": t.config.to_dict(), "value": t.value, "status": t.status,
                            "model_us": t.predicted, "model_from": t.model_from}
                           for t in self.trials],
                "best_so_far": self.best_so_far, "baselines_ms": self.baselines,
                "baselines_range_ms": {name: [s.low, s.high]
                                       for name, s in self.baseline_spreads.items()},
                "resumed": self.resumed, "shared": self.shared, "ran": self.ran,
                "study": self.study, "storage": self.storage, "seconds": self.seconds,
                "compiled_ahead": self.compiled_ahead,
                "search_best": self.search_best.to_dict() if self.search_best else None,
                "finalists": [{"config": f.config.to_dict(), "search_value": f.search_value,
                               "value": f.value, "samples": f.samples, "failure": f.failure}
                              for f in self.finalists]}

    def to_t4(self) -> dict[str, Any]:
        """The study in the T4 format of the FAIR Benchmark Hub (what `tiledsl replay` reads).
        Pruned trials, and one the tune's timeout stopped, are left out: they were never
        measured, and they did not fail."""
        results = []
        for t in self.trials:
            if t.pruned or t.stopped:
                continue
            d = t.config.to_dict()
            configuration = {k: v for k, v in d.items() if k != "block_sizes"}
            configuration.update({f"block_{i}": b for i, b in enumerate(d["block_sizes"])})
            results.append({
                "configuration": configuration,
                "invalidity": "correct" if t.value is not None else
                ("correctness" if t.status.startswith("wrong numbers") else "runtime"),
                "correctness": 1 if t.value is not None else 0,
                "measurements": [{"name": "time", "value": t.value, "unit": self.unit}]
                if t.value is not None else [],
                "times": {}})
        return {"schema_version": "1.0.0", "metadata": {"kernel": self.kernel,
                                                        "backend": self.backend,
                                                        "study": self.study},
                "results": results}

    def plot(self, path: str | Path) -> None:
        """A convergence plot: every trial's value and the best so far (PNG, or the format
        `path`'s suffix names)."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise TileDSLError("plots need matplotlib: pip install matplotlib") from None
        fig, ax = plt.subplots(figsize=(6, 3.5))
        xs = [i + 1 for i, t in enumerate(self.trials) if t.value is not None]
        ax.scatter(xs, [t.value for t in self.trials if t.value is not None], s=10,
                   color="0.6", label="trial")
        best = self.best_so_far
        ax.step(range(1, len(best) + 1), [b if b is not None else np.nan for b in best],
                where="post", label="best so far")
        if self.default_value is not None:
            ax.axhline(self.default_value, color="tab:red", ls="--", lw=1, label="default config")
        ax.set_xlabel("trial")
        ax.set_ylabel(self.unit)
        ax.set_title(f"{self.kernel} ({self.backend})")
        ax.legend()
        fig.tight_layout()
        # Rendered in memory, then written: matplotlib's own file writes let a failed flush
        # pass (a full disk reported success).
        image = io.BytesIO()
        fig.savefig(image, format=Path(path).suffix.lower().lstrip(".") or "png", dpi=120)
        plt.close(fig)
        Path(path).write_bytes(image.getvalue())


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
            scored.append((config_space.estimate(config_space.make(pool[i])), i))
        scored.sort()
        seen: set[float] = set()
        for cost, i in scored:
            if len(seen) == MODEL_PICKS:
                break
            if round(cost, 6) not in seen:
                seen.add(round(cost, 6))
                if pool[i] not in points:
                    points.append(pool[i])
    for size in (128, 64, 256, 32):
        cfg = config_space.default()
        blocks = tuple(min(size, max(p.choices)) for p in config_space.params
                       if p.name.startswith("block_sizes["))
        cfg = cfg.replace(block_sizes=list(blocks))
        if cfg in config_space and config_space.values(cfg) not in points:
            points.append(config_space.values(cfg))
    return points


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


class _Budget(Evaluator):
    """An Evaluator that also stops at a wall-clock deadline, or when the objective finds the
    study's budget spent (by all its workers together)."""

    def __init__(self, objective: Callable[[Point], float | None], budget: int,
                 deadline: float | None) -> None:
        super().__init__(objective, budget)
        self.deadline = deadline
        self.spent = False

    def __call__(self, point: Point) -> float | None:
        try:
            return super().__call__(point)
        except studies.BudgetSpent:
            self.spent = True
            return None

    @property
    def done(self) -> bool:
        return super().done or self.spent or (self.deadline is not None
                                              and time.monotonic() > self.deadline)


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
    start = time.monotonic()
    check_tune_options(kernel.name, trials=trials, timeout=timeout, strategy=strategy,
                       prune=prune, finalists=finalists, seed=seed, trial_timeout=trial_timeout)
    if not isinstance(backend, str) or backend not in RUNNERS:
        raise BackendError(f"kernel '{kernel.name}': no tuning backend {backend!r}; "
                           f"choose from {sorted(RUNNERS)}")
    if backend == "triton":
        require_gpu(kernel)
    if use_cache or storage is None:  # the result and the default study live there
        try:
            writable_cache_dir()
        except TileDSLError as e:
            raise e.with_context(kernel=kernel.name) from None
    values = kernel.bind(tuple(args), {})
    key = cache.key(kernel, values, backend, arch)
    url = storage or default_storage()
    name = study_name or f"{kernel.name}-{backend}-{key.digest[:12]}"
    try:  # the options' errors before any process starts
        search = get(strategy or DEFAULT)
        pruner = Pruner(prune)  # a bad factor is an error on every backend
        if backend != "triton":
            pruner = Pruner(None)  # the model predicts GPU times: it prunes GPU tunes only
        study = studies.open_study(url, name)
        studies.bind_problem(study, *_problem(key, backend, arch))
    except TileDSLError as e:
        raise e.with_context(kernel=kernel.name) from None
    config_space = kernel.config_space(*values, backend=SPACE_BACKEND[backend],
                                       **({} if arch is None else {"arch": arch}))
    space = search_space(config_space)
    runner: Runner = RUNNERS[backend](kernel, values, arch)
    # What the measuring process and the compile workers get: the arrays on the host, and the
    # kernel's source, which they check against the file they import the kernel from.
    # (functions by value where pickle cannot send them: static_args.shippable)
    # A CUDA context does not survive a fork: GPU and model children are spawned, and import
    # the kernel from its file; CPU children are forked copies of this process (isolate.py).
    method = "spawn" if backend in ("model", "triton") else fork_start()
    isolate = True if isolate is None else isolate
    host, source = host_args(values), kernel.source_digest
    if (isolate and method == "spawn") or backend in ("model", "triton"):
        host = static_args.shippable(kernel.name, list(kernel.signature.parameters), host)
    isolated = None
    if isolate and method == "fork":
        isolated = Isolated(in_child, (kernel, values, backend, arch, check), trial_timeout,
                            start="fork")
    elif isolate:
        isolated = Isolated("autotune.runners:from_file",
                            (kernel.file, kernel.name, host, backend, arch, check, source),
                            trial_timeout)
    runner.self_checking = runner.self_checking and check
    deadline = start + timeout if timeout is not None else None

    def remaining(until: float | None) -> float | None:
        """The seconds left until `until` (time.monotonic()), for a trial in flight (None: no
        limit but the trial's own)."""
        return None if until is None else until - time.monotonic()
    precompiler = None
    compiled_ahead = 0
    if backend in ("model", "triton"):  # compile ahead, in parallel, while measuring
        from autotune.precompile import Precompiler
        if backend == "triton":  # fill Triton's JIT cache for this GPU
            from lowering.backends.triton.gpu import device_target
            target, sms = device_target()
            precompiler = Precompiler(kernel.file, kernel.name, host, "jit", target, sms,
                                      source=source, timeout=trial_timeout)
        else:
            precompiler = Precompiler(kernel.file, kernel.name, host, "aot", "sm_90",
                                      source=source, timeout=trial_timeout)
    statuses: dict[tuple, str] = {}
    predictions: dict[tuple, float] = {}  # the cost model's microseconds (GPU and model tunes)
    priced_from: dict[tuple, str] = {}  # "compiled" or "ir": what each prediction priced
    estimate = config_space.estimate if backend == "triton" else None

    def guess(config: Config) -> float | None:
        """What no worker compiled is priced on resources guessed from the IR (GPU tunes)."""
        try:
            return estimate(config) if estimate is not None else None
        except Exception:  # noqa: BLE001 - a kernel the model cannot price is timed unpruned
            return None
    default = config_space.default()
    default_point = config_space.values(default)
    default_key = SearchSpace.key(default_point)

    def trusted(attrs: dict[str, Any]) -> bool:
        """Whether a stored measurement stands: not one measured without checking its numbers
        (for a checked tune), nor one pruned, never timed (for a tune that does not prune)."""
        pruned = str(attrs.get("status", "")).startswith(PRUNED)
        return not ((check and attrs.get("checked") is False)
                    or (pruned and pruner.factor is None))
    records = studies.trusted_records(space, trusted)
    stopped: set[tuple] = set()  # points the tune's deadline stopped mid-measurement

    def objective(point: Point, budgeted: bool = True) -> float | None:
        """Measure `point` under a reservation in the study (study_workers.py), or reuse what
        another worker measured; `budgeted`: within the study's total of `trials` points."""
        claim = worker.claim(point, trials if budgeted else None, records,
                             deadline if budgeted else None)
        if claim.trial_id is None:
            statuses[SearchSpace.key(point)] = "from another worker"
            return claim.shared
        try:
            value = measure(point)
        except BaseException:
            worker.withdraw(claim)
            raise
        key = SearchSpace.key(point)
        if key in stopped or (isolated is not None and isolated.broken is not None):
            worker.withdraw(claim)  # the tune's deadline stopped it, or no process could
            return None             # measure it: not the config's failure, not stored
        attrs = {"status": statuses[key], "model_us": predictions.get(key),
                 "model_from": priced_from.get(key), "checked": check}
        worker.finish(claim, lambda: studies.record(study, space, point, value, attrs))
        return value

    def measure(point: Point) -> float | None:
        config = config_space.make(point)
        key = SearchSpace.key(point)
        nonlocal compiled_ahead
        value: float | None = None
        # the tune's deadline bounds a trial begun before it; the default config, measured
        # after it if no trial reached it, has its own trial_timeout
        until = deadline if deadline is not None and time.monotonic() < deadline else None
        try:
            if precompiler is not None and precompiler.wait(config, remaining(until)):
                compiled_ahead += 1
                if config in precompiler.predicted:
                    predictions[key] = precompiler.predicted[config]
                    priced_from[key] = "compiled"
            if key not in predictions and (price := guess(config)) is not None:
                predictions[key] = price
                priced_from[key] = "ir"
            pruned = None if key == default_key else pruner.why(predictions.get(key))
            if pruned is not None:
                statuses[key] = pruned  # not timed; recorded as failed
            else:
                if check and isolated is None and not runner.self_checking:
                    why = runner.check(config)  # (a measuring process checks where it measures)
                    if why is not None:
                        raise TrialFailed(why)
                value = isolated.measure(config, remaining(until)) if isolated else \
                    runner.measure(config)
                statuses[key] = "ok"
        except OutOfTime as e:  # the tune's deadline, not the config's failure: not stored
            statuses[key] = str(e)
            stopped.add(key)
            return None
        except (TrialFailed, TileDSLError, ValueError, RuntimeError) as e:
            statuses[key] = str(e).splitlines()[0][:200]
        pruner.measured(predictions.get(key), value)
        return value

    evaluate = _Budget(objective, trials, deadline)
    if precompiler is not None:
        pool = precompiler

        def hint(points: list[Point]) -> None:
            configs = [config_space.make(p) for p in points]
            if estimate is not None:  # not worth compiling what the model would prune
                configs = [c for c in configs if c == default or pruner.why(guess(c)) is None]
            pool.submit(configs, replace=True)
        evaluate.on_prefetch = hint
    resumed: set[tuple] = set()  # points measured by an earlier run of the study
    for point, value, attrs in studies.load_trials(study, space):  # resume: earlier measurements
        k = SearchSpace.key(point)
        if not trusted(attrs):
            continue  # measured without checking its numbers, or never timed: evaluate again
        if k not in evaluate.results:
            evaluate.results[k] = value
            evaluate.history.append((point, value))
            status = str(attrs.get("status", ""))
            statuses[k] = status if status.startswith(PRUNED) else "resumed"
            resumed.add(k)
            if isinstance(attrs.get("model_us"), (int, float)):
                predictions[k] = float(attrs["model_us"])
                if attrs.get("model_from") in ("compiled", "ir"):
                    priced_from[k] = str(attrs["model_from"])
            pruner.measured(predictions.get(k), value)
    bar = progress_bar(trials, f"tuning {kernel.name}" + (f" (resumed {len(resumed)})"
                                                        if resumed else ""),
                       "trial", progress, initial=len(evaluate.history))
    inner = evaluate.objective

    def counted(point: Point) -> float | None:
        value = inner(point)
        values = [v for _, v in evaluate.history] + [value]  # history gets `point` after
        best = min((v for v in values if v is not None), default=None)
        pruned = sum(s.startswith(PRUNED) for s in statuses.values())
        failed = values.count(None) - pruned
        shown = [f"best {best:.4g} {runner.unit}" if best is not None else "no valid trial"]
        shown += [f"{compiled_ahead} compiled ahead"] * (precompiler is not None)
        shown += [f"{failed} rejected"] * bool(failed) + [f"{pruned} pruned"] * bool(pruned)
        bar.n += 1
        bar.set_postfix_str(", ".join(shown))  # refreshes: each trial shows
        return value
    evaluate.objective = counted
    chosen: list[finals.Finalist] = []
    search_best: tuple[Point, float] | None = None
    worker = None
    try:
        try:
            worker = studies.join(study)  # other workers on this study start elsewhere
        except TileDSLError as e:
            raise e.with_context(kernel=kernel.name) from None
        rank = worker.rank
        seed = (seed + 7919 * rank) % (MAX_SEED + 1)
        initial = studies.start_points(study, space, seed, lambda: analytic_candidates(
            config_space, space, seed, start + timeout if timeout is not None else None))
        if rank % 2:  # a second worker takes them from the other end, so the two do not chase
            initial = initial[::-1]
        initial = initial[rank // 2 % len(initial):] + initial[:rank // 2 % len(initial)]
        if precompiler is not None:
            precompiler.submit([config_space.make(p) for p in initial])
        search(space, evaluate, seed, initial)
        if default_key not in evaluate.results:  # always measured, even past a deadline
            evaluate.results[default_key] = objective(default_point, budgeted=False)
            evaluate.history.append((default_point, evaluate.results[default_key]))
        search_best = evaluate.best
        measured = list(evaluate.history)
        if evaluate.results[default_key] is not None and \
                all(SearchSpace.key(p) != default_key for p, _ in measured):
            measured.append((default_point, evaluate.results[default_key]))
        if runner.noisy and finalists > 0 and rounds > 0 and search_best is not None:
            timer = (lambda c: isolated.time(c, remaining(deadline))) if isolated else \
                runner.time
            picked = finals.choose(measured, finalists, always=default_point)
            bar.close()
            bar = progress_bar(len(picked) * rounds, f"re-timing {kernel.name}'s finalists",
                               "timing", progress)

            def timed(p: Point) -> float:
                try:
                    return timer(config_space.make(p))
                finally:
                    bar.update(1)
            chosen = finals.retime(picked, timed, rounds,
                                   failed=(TrialFailed, TileDSLError, ValueError, RuntimeError),
                                   deadline=deadline, stopped=(OutOfTime,))
            for f in chosen:
                f.config = config_space.make(f.point)
    finally:
        if worker is not None:
            worker.leave()
        bar.close()
        if isolated is not None:
            isolated.close()
        if precompiler is not None:
            precompiler.close()
    best = search_best
    default_value = evaluate.results.get(default_key)
    won = finals.winner(chosen)
    if won is not None:
        best = (won.point, won.value)  # type: ignore[assignment]
        default_value = next((f.value for f in chosen if SearchSpace.key(f.point) == default_key
                              and f.value is not None), default_value)
    best_config = config_space.make(best[0]) if best else None
    if best_config is not None and use_cache:
        cache.store(key, best_config, best[1], runner.unit)  # type: ignore[index]
        kernel.forget_tuned()  # the in-process memo of cache lookups
    timed_baselines = {name: Spread.of(samples) for name, samples in
                       time_baselines(kernel.name, backend, baselines or {}).items()}
    shared = sum(statuses.get(SearchSpace.key(p)) == "from another worker"
                 for p, _ in evaluate.history)
    return TuneResult(
        kernel.name, backend, runner.unit, best_config, best[1] if best else None, default,
        default_value,
        [Trial(config_space.make(p), v, statuses.get(SearchSpace.key(p), "ok"),
               predictions.get(SearchSpace.key(p)), priced_from.get(SearchSpace.key(p)))
         for p, v in evaluate.history],
        name, url, time.monotonic() - start,
        {name: spread.median for name, spread in timed_baselines.items()},
        compiled_ahead if precompiler is not None else None, chosen,
        config_space.make(search_best[0]) if search_best else None, timed_baselines,
        sum(SearchSpace.key(p) in resumed for p, _ in evaluate.history), shared)


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
