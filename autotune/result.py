"""What a tune reports: one `Trial` per config it evaluated, and the `TuneResult` (the tuned
and default configs, the baselines, the finalists' re-timing) with its table, JSON, T4 export
and convergence plot."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autotune import finalists as finals
from autotune.isolate import STOPPED
from autotune.prune import PRUNED
from autotune.spread import Spread, compare, number
from tiledsl.runtime.config import Config
from tiledsl.errors import TileDSLError

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
    # who measured it: "ran" (this run), "resumed" (an earlier run of the study) or "shared"
    # (another worker on the study, while this one ran)
    origin: str = "ran"

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
