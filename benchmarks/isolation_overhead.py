"""What isolating the candidates of a CPU tune costs (autotune/isolate.py): every candidate is
checked and measured in a worker process, so that a crash or a hang fails one trial.

    python benchmarks/isolation_overhead.py [--runs 5] [--trials 20] [--dims m=64,k=48,n=40]

Two measurements, on this machine:
- the worker itself: starting one (a fork of the tuner on Linux) and one trial's round trip
  (a config sent, a number back) with a runner that does nothing, medians over 200 trials;
- whole tunes of examples/matmul.py at small dims (where the per-trial work is smallest, so
  the overhead shows most), `--trials` trials on the spatial and numpy backends (numpy with
  `finalists=0`: the search only), isolated and not, in alternating order, `--runs` runs each
  after one run of each to warm up; the medians of the tunes' seconds, and their difference
  per trial.
Writes its JSON report where `--out` says (else benchmarks/outputs.py's scratch directory).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
import numpy as np  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from support import example, kernel_of  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

from autotune.isolate import Isolated, fork_start  # noqa: E402
from autotune.tuner import tune  # noqa: E402
from tiledsl.runtime.config import Config  # noqa: E402


class Nothing:
    """A runner that measures nothing: what is left is the worker's own cost."""

    def measure(self, config: Config) -> float:
        return 1.0


def worker_costs(trials: int = 200) -> dict[str, float]:
    starts, trips = [], []
    for _ in range(5):
        iso = Isolated(Nothing, (), timeout=60, start=fork_start()) if fork_start() == "fork" \
            else Isolated("isolation_overhead:Nothing", (), timeout=60)
        t = time.perf_counter()
        iso.start()
        starts.append((time.perf_counter() - t) * 1e3)
        for _ in range(trials // 5):
            t = time.perf_counter()
            iso.measure(Config((1,)))
            trips.append((time.perf_counter() - t) * 1e3)
        iso.close()
    return {"start_ms": statistics.median(starts), "round_trip_ms": statistics.median(trips)}


def tunes(backend: str, dims: dict[str, int], runs: int, trials: int) -> dict[str, object]:
    k = kernel_of("matmul")
    args = list(example("matmul").make_inputs(np.random.default_rng(0), dims))
    seconds: dict[str, list[float]] = {"isolated": [], "in process": []}
    modes = [("isolated", True), ("in process", False)]
    for run in range(runs + 1):  # run 0 warms up (imports, traces, Optuna): not counted
        for mode, isolate in modes if run % 2 else modes[::-1]:
            r = tune(k, args, backend=backend, trials=trials, isolate=isolate, use_cache=False,
                     storage="sqlite:///:memory:", finalists=0)
            assert len(r.trials) == trials and not r.rejected, r.table()
            if run:
                seconds[mode].append(r.seconds)
    iso, inproc = (statistics.median(seconds[m]) for m in ("isolated", "in process"))
    return {"seconds": seconds, "median_s": {"isolated": iso, "in process": inproc},
            "overhead_ms_per_trial": (iso - inproc) / trials * 1e3,
            "overhead_percent": (iso / inproc - 1) * 100}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--dims", default="m=64,k=48,n=40")
    p.add_argument("--out", help=out_help("isolation_overhead.json"))
    opts = p.parse_args()
    out = out_path(opts.out, "isolation_overhead.json")
    dims = {k: int(v) for k, v in (kv.split("=") for kv in opts.dims.split(","))}
    os.environ.setdefault("TILEDSL_CACHE_DIR", tempfile.mkdtemp())
    report: dict[str, object] = {
        "date": datetime.date.today().isoformat(), "machine": platform.platform(),
        "cpus": os.cpu_count(), "python": platform.python_version(), "start": fork_start(),
        "dims": dims, "trials": opts.trials, "runs": opts.runs, "worker": worker_costs()}
    print("worker:", report["worker"])
    for backend in ("spatial", "numpy"):
        report[backend] = row = tunes(backend, dims, opts.runs, opts.trials)
        print(f"{backend}: median {row['median_s']} s; "
              f"{row['overhead_ms_per_trial']:.1f} ms a trial ({row['overhead_percent']:+.1f}%)")
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
