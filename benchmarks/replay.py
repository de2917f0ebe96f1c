"""Search strategies replayed on the shared brute-forced tuning spaces (no GPU needed).

    python benchmarks/replay.py [--strategies a,b,...] [--seeds 20] [--budget 400] [--jobs 2]
                                [--spaces DIR] [--out FILE]

For every space (../shared/tuning-spaces/*_T4.json.gz) and strategy: median over seeds of the
distinct evaluations needed to get within 1%, 2% and 5% of the space's optimum (a seed that does
not get there within the budget counts as infinitely many; '-' when the median is one of those),
and the ratio of random search's exact expectation (N+1)/(K+1) at 2% to that median (higher is
better; the issue's target: a geometric mean over spaces of at least 15, and at least 1 on every
space). Runs stop once within 1% (later evaluations cannot change the metrics).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # one BLAS thread per worker process

import argparse
import datetime
import importlib
import json
import math
import multiprocessing
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune import replay as rp
from autotune.strategies import DEFAULT
from tiledsl.progress import tracked
from outputs import out_help, out_path  # benchmarks/outputs.py

STRATEGIES = ["local", "tpe", "cmaes", "tpe+local", "bo", "bo+local"]
# random search's exact expectation, kept apart from a measured "random" strategy
EXPECTED = "random_expected"
SPACES = ROOT.parent / "shared" / "tuning-spaces"
_cache: dict[str, rp.ReplaySpace] = {}


def _job(args: tuple[str, str, int, int]) -> tuple[str, str, int, list[int | None], float]:
    path, strategy, seed, budget = args
    if path not in _cache:
        _cache[path] = rp.load(path)
    rs = _cache[path]
    start = time.process_time()
    runs = rp.replay(rs, strategy, [seed], budget, stop_within=min(rp.TARGETS))
    counts = [rp.evaluations_to(runs[0]["best_so_far"], rs.optimum, x) for x in rp.TARGETS]
    return path, strategy, seed, counts, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=400)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--spaces", default=str(SPACES))
    parser.add_argument("--out", help=out_help("replay.json"))
    opts = parser.parse_args()
    out_file = out_path(opts.out, "replay.json")
    paths = sorted(str(p) for p in Path(opts.spaces).glob("*_T4.json*"))
    if not paths:
        sys.exit(f"no T4 files in {opts.spaces}")
    strategies = opts.strategies.split(",")
    jobs = [(p, s, seed, opts.budget) for s in strategies for p in paths
            for seed in range(opts.seeds)]
    jobs.sort(key=lambda j: -("bo" in j[1]))  # the slow ones first, for a balanced pool
    wall = time.perf_counter()
    with multiprocessing.Pool(opts.jobs) as pool:
        results = list(tracked(pool.imap(_job, jobs, chunksize=1), "replaying", "run",
                               total=len(jobs)))
    wall = time.perf_counter() - wall

    keys = [f"{x:.0%}" for x in rp.TARGETS]
    table: dict[str, dict[str, dict]] = {}
    print(f"median evaluations to get within {'/'.join(keys)} of the optimum over {opts.seeds} "
          f"seeds (budget {opts.budget}); ratio = random's expectation at 2% / median at 2%")
    for path in paths:
        rs = _cache.get(path) or rp.load(path)
        rand = {k: rs.random_expectation(x) for k, x in zip(keys, rp.TARGETS)}
        table[rs.name] = {EXPECTED: {"median": rand, "ratio_2%": 1.0}}
        print(f"\n{rs.name}: {len(rs.valid_times)} valid, optimum {rs.optimum:.6g}, within "
              + ", ".join(f"{k}: {rs.within(x)}" for k, x in zip(keys, rp.TARGETS)))
        print(f"  {'strategy':<12}" + "".join(f"{k:>9}" for k in keys) + f"{'ratio 2%':>10}"
              + f"{'reached 2%':>12}{'cpu s/run':>11}")
        print(f"  {'random (exp)':<12}" + "".join(f"{rand[k]:>9.1f}" for k in keys) + f"{1.0:>10.2f}")
        for s in strategies:
            rows = [r for r in results if r[0] == path and r[1] == s]
            med = {k: rp.median_evaluations([r[3][i] for r in rows]) for i, k in enumerate(keys)}
            ratio = rand["2%"] / med["2%"] if med["2%"] else None
            reached = sum(1 for r in rows if r[3][1] is not None)
            cpu = sum(r[4] for r in rows) / len(rows)
            table[rs.name][s] = {"median": med, "ratio_2%": ratio, "reached_2%": reached,
                                 "per_seed": [{"seed": r[2], **dict(zip(keys, r[3]))}
                                              for r in sorted(rows, key=lambda r: r[2])],
                                 "cpu_s_per_run": round(cpu, 3)}
            print(f"  {s:<12}" + "".join(f"{rp._fmt(med[k]):>9}" for k in keys)
                  + f"{(f'{ratio:.2f}' if ratio else '<' + format(rand['2%'] / opts.budget, '.2f')):>10}"
                  + f"{f'{reached}/{len(rows)}':>12}{cpu:>11.2f}")
    geomean = {}
    print("\ngeometric mean over spaces of the 2% ratio ('<': a space not reached in the median "
          "within the budget, counted at its bound random/budget)")
    for s in strategies:
        logs, bounded = [], False
        for name in table:
            r = table[name][s]["ratio_2%"]
            if r is None:
                bounded = True
                r = table[name][EXPECTED]["median"]["2%"] / opts.budget
            logs.append(math.log(r))
        g = math.exp(sum(logs) / len(logs))
        geomean[s] = {"geomean_ratio_2%": g, "upper_bound": bounded}
        print(f"  {s:<12}{'<' if bounded else ' '}{g:.2f}")
    print(f"\ndefault strategy: {DEFAULT}; wall {wall:.0f} s on {opts.jobs} processes")
    out = {"benchmark": "replay", "seeds": opts.seeds, "budget": opts.budget,
           "stop_within": min(rp.TARGETS), "default": DEFAULT, "spaces": table,
           "geomean": geomean, "wall_s": round(wall, 1), "jobs": opts.jobs,
           "machine": {"platform": platform.platform(), "python": platform.python_version(),
                       "cpus": os.cpu_count()},
           "versions": {name: importlib.import_module(name).__version__
                        for name in ("numpy", "scipy", "optuna", "cmaes")},
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    out_file.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {out_file}")


if __name__ == "__main__":
    main()
