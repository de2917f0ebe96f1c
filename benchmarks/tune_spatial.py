"""Autotuning on the spatial backend: how close 40 trials get to each example's exhaustive
optimum, and how long a quick GEMM tune takes.

    python benchmarks/tune_spatial.py [--arch generic-8x8] [--trials 40] [--seeds 5] [--jobs N]
                                      [--t4 DIR]

Every config of each example's space (default sizes) is simulated once (the exhaustive
optimum); strategies then run against those memoized cycles, seed after seed. Examples whose
space is over `--max-configs` (default 5000) are listed and skipped: `center_columns` (two
grids, four block sizes) has 30,960 configs to search, an estimated 80 minutes of sweep on 2
cores (0.3 s a config, measured on 40). Target: within 3% of the optimum in 40 trials for
every example. The sweep runs in a process pool (`--jobs`,
default every core) and is kept in the tiledsl cache (`sweeps/`), keyed by the example's source,
the architecture, the space and the source of the spatial backend (less the estimate, which
does not change cycles) and simulator, so a rerun after an unrelated change only replays the
strategies. Also times `tiledsl tune examples/matmul.py --quick` end to end (target: under 30 s
on this machine).

`--t4 DIR` also writes each sweep as a T4 file (`DIR/<example>-<arch>_T4.json.gz`): spaces the
search strategies were not chosen on, for `python benchmarks/replay.py --spaces DIR`. With
`--seeds 0` the script only sweeps (and writes the T4 files); no strategy runs.

The searches start, as `tiledsl tune` does, from the default config and the configs the spatial
backend's analytic estimate ranks best (`--no-estimate` leaves those out); the table also shows
the estimate's rank correlation with the simulated cycles over the whole space.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import multiprocessing
import os
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support import EXAMPLE_NAMES, example  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

from autotune.space import Evaluator  # noqa: E402
from autotune.strategies import DEFAULT, get  # noqa: E402
from autotune.tuner import analytic_candidates, search_space  # noqa: E402
from tiledsl.runtime.cache_files import ignored, opened, read_entry, seal, write_entry  # noqa: E402
from tiledsl.progress import tracked  # noqa: E402


_worker: dict[str, Any] = {}


def _init(name: str, arch: str) -> None:
    mod = example(name)
    _worker.update(kernel=getattr(mod, name), args=mod.make_inputs(np.random.default_rng(0)),
                   arch=arch)
    _worker["cspace"] = _worker["kernel"].config_space(*_worker["args"], backend="spatial",
                                                       arch=arch)


def _cycles(point: dict[str, Any]) -> int:
    w = _worker
    return w["kernel"].simulate(*w["args"], arch=w["arch"], config=w["cspace"].make(point)).cycles


def _sweep_path(name: str, arch: str, space: Any) -> Path:
    from tiledsl.runtime.paths import cache_dir
    h = hashlib.sha256()
    h.update((ROOT / "examples" / f"{name}.py").read_bytes())
    h.update(f"{arch} {[(p.name, p.values) for p in space.params]}".encode())
    for d in ("lowering/backends/spatial", "csrc"):
        for f in sorted((ROOT / d).rglob("*")):
            if f.suffix in (".py", ".cpp", ".h", ".hpp", ".json") and f.name != "estimate.py":
                h.update(f.read_bytes())
    return cache_dir() / "sweeps" / f"{name}-{arch}-{h.hexdigest()[:16]}.json.gz"


def sweep(name: str, arch: str, space: Any, jobs: int) -> dict[tuple, int]:
    """Simulated cycles of every valid config of the example's space (cached)."""
    path = _sweep_path(name, arch, space)
    rows = _cached_sweep(path)
    if rows is not None:
        return {space.key(p): c for p, c in rows}
    points = list(space.points())
    with multiprocessing.Pool(jobs, _init, (name, arch)) as pool:
        values = list(tracked(pool.imap(_cycles, points, chunksize=4), f"sweeping {name}",
                              "config", total=len(points)))
    write_entry(path, gzip.compress(seal([list(row) for row in zip(points, values)])))
    return {space.key(p): v for p, v in zip(points, values)}


def _cached_sweep(path: Path) -> list | None:
    """The rows of a cached sweep; None for none, or (with a warning) for one that is no regular
    file, not gzip, or modified since it was written (its sealed digest)."""
    data = read_entry(path)
    if data is None:
        return None
    try:
        data = gzip.decompress(data)
    except (OSError, EOFError) as e:
        ignored(path, f"it is not gzip data ({e})")
        return None
    rows = opened(path, data)
    return rows if isinstance(rows, list) else None


def write_t4(path: Path, cycles: dict[tuple, int]) -> None:
    """A sweep as a brute-forced space in the T4 format (what `tiledsl replay` reads)."""
    results = [{"configuration": dict(key), "invalidity": "correct", "correctness": 1,
                "measurements": [{"name": "time", "value": value, "unit": "cycles"}], "times": {}}
               for key, value in cycles.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps({"schema_version": "1.0.0",
                                               "results": results}).encode()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="generic-8x8")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--examples", default=",".join(EXAMPLE_NAMES))
    parser.add_argument("--max-configs", type=int, default=5000,
                        help="skip examples whose search space is larger (the sweep simulates "
                             "every config: about 0.3 s each)")
    parser.add_argument("--strategies", default=f"{DEFAULT},random")
    parser.add_argument("--no-estimate", action="store_true",
                        help="start the searches without the configs the estimate ranks best")
    parser.add_argument("--out", help=out_help("tune_spatial.json"))
    parser.add_argument("--t4", metavar="DIR", help="also write every sweep as a T4 space here")
    opts = parser.parse_args()
    out = out_path(opts.out, "tune_spatial.json")
    strategies = opts.strategies.split(",") if opts.seeds > 0 else []
    rows: list[dict[str, Any]] = []
    print(f"{'example':16} {'configs':>7} {'optimum':>10} {'est. rho':>9} {'seeds gap':>9} " +
          " ".join(f"{s + ' gap':>14}" for s in strategies))
    for name in opts.examples.split(","):
        mod = example(name)
        kernel = getattr(mod, name)
        args = mod.make_inputs(np.random.default_rng(0))
        cspace = kernel.config_space(*args, backend="spatial", arch=opts.arch)
        space = search_space(cspace)
        size = sum(1 for _ in space.points())
        if size > opts.max_configs:
            print(f"{name:16} {size:7} configs: skipped (over --max-configs {opts.max_configs})")
            rows.append({"example": name, "configs": size, "skipped": "over --max-configs"})
            continue
        start = time.perf_counter()
        cycles = sweep(name, opts.arch, space, opts.jobs)
        seconds = time.perf_counter() - start
        if opts.t4:
            write_t4(Path(opts.t4) / f"{name}-{opts.arch}_T4.json.gz", cycles)
        optimum = min(cycles.values())
        keys = list(cycles)
        estimates = [cspace.estimate(cspace.make(dict(k))) for k in keys]
        rho = float(spearmanr(estimates, [cycles[k] for k in keys])[0])
        initial = analytic_candidates(
            cspace if not opts.no_estimate else dataclasses.replace(cspace, estimate=None), space)
        picks = min(cycles[space.key(p)] for p in initial) / optimum - 1
        row: dict[str, Any] = {"example": name, "configs": len(cycles), "optimum": optimum,
                               "sweep_seconds": seconds, "estimate_rank_correlation": rho,
                               "initial_points_gap": picks}
        cells = [f"{rho:.3f}", f"{picks:.1%}"]
        for strategy in strategies:
            gaps = []
            for seed in range(opts.seeds):
                ev = Evaluator(lambda p: cycles.get(space.key(p)), opts.trials)
                get(strategy)(space, ev, seed, initial)
                best = ev.best[1] if ev.best else float("inf")
                gaps.append(best / optimum - 1)
            row[strategy] = {"gaps": gaps, "median_gap": statistics.median(gaps),
                             "worst_gap": max(gaps)}
            cells.append(f"{statistics.median(gaps):6.1%}/{max(gaps):6.1%}")
        rows.append(row)
        print(f"{name:16} {len(cycles):7} {optimum:10,.0f} {cells[0]:>9} {cells[1]:>9} " +
              " ".join(f"{c:>14}" for c in cells[2:]))
    print("(est. rho: rank correlation of the analytic estimate with the simulated cycles; seeds "
          "gap: the best of the points the search starts from; gap = best after the trials / "
          "exhaustive optimum - 1: median / worst over seeds)")
    start = time.perf_counter()
    subprocess.run(["tiledsl", "tune", str(ROOT / "examples" / "matmul.py"), "--quick",
                    "--no-progress", "--storage", "sqlite:///:memory:"], check=True,
                   capture_output=True)
    quick = time.perf_counter() - start
    print(f"tiledsl tune examples/matmul.py --quick: {quick:.1f} s end to end")
    out.write_text(json.dumps({
        "benchmark": "tune_spatial", "arch": opts.arch, "trials": opts.trials,
        "seeds": opts.seeds, "estimate_seeds": not opts.no_estimate,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "examples": rows, "quick_gemm_tune_seconds": quick}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
