"""How well the default strategy's hints (`Evaluator.prefetch`) name its next proposals, replayed on
the shared tuning spaces (no GPU needed).

    python benchmarks/compile_ahead.py [--seeds N] [--budget N] [--out FILE]

The tuner compiles hinted configs in a pool of W workers while it measures (autotune/precompile.py):
a proposal is compiled ahead when it was among the first W + 1 entries of the hint current when
the previous measurement started (the first entry is that measurement's own config). Counted over
the model-guided proposals, after the start points (which are all hinted before the first
measurement). Writes its JSON report where `--out` says (else benchmarks/outputs.py's scratch
directory).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
from pathlib import Path

from autotune.replay import load
from autotune.space import Evaluator, Point, SearchSpace
from autotune.strategies import DEFAULT, get
from autotune.strategies.bo import n_init
from outputs import out_help, out_path  # benchmarks/outputs.py

ROOT = Path(__file__).resolve().parent.parent
SPACES = sorted((ROOT.parent / "shared" / "tuning-spaces").glob("*_T4.json.gz"))
WORKERS = (1, 4, 15)


def hit_rates(path: Path, seed: int, budget: int) -> dict[int, float]:
    rs = load(path)
    hints: list[list[tuple]] = []
    current: list[list[tuple]] = []  # the hint current when each measurement started

    def objective(point: Point) -> float | None:
        current.append(hints[-1] if hints else [])
        return rs.objective(point)

    evaluate = Evaluator(objective, budget)
    evaluate.on_prefetch = lambda points: hints.append([SearchSpace.key(p) for p in points])
    get(DEFAULT)(rs.space, evaluate, seed, [])
    start = n_init(sum(1 for p in rs.space.params if len(p.values) > 1), len(rs.times))
    out = {}
    for w in WORKERS:
        hits = [SearchSpace.key(p) in current[j - 1][:w + 1]
                for j, (p, _) in enumerate(evaluate.history) if j >= start]
        out[w] = sum(hits) / len(hits)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--out", help=out_help("compile_ahead.json"))
    opts = ap.parse_args()
    out = out_path(opts.out, "compile_ahead.json")
    rows = {}
    print(f"{DEFAULT}: share of model proposals compiled ahead with W workers "
          f"(median over {opts.seeds} seeds, {opts.budget} evaluations)")
    print(f"  {'space':36}" + "".join(f"{f'W={w}':>8}" for w in WORKERS))
    for path in SPACES:
        runs = [hit_rates(path, seed, opts.budget) for seed in range(opts.seeds)]
        name = path.name.removesuffix(".json.gz")
        rows[name] = {str(w): {"median": statistics.median(r[w] for r in runs),
                               "min": min(r[w] for r in runs)} for w in WORKERS}
        print(f"  {name:36}" + "".join(f"{rows[name][str(w)]['median']:>8.0%}" for w in WORKERS))
    out.write_text(json.dumps({
        "benchmark": "compile_ahead", "strategy": DEFAULT, "seeds": opts.seeds,
        "budget": opts.budget, "workers": list(WORKERS), "spaces": rows,
        "machine": {"python": platform.python_version(), "cpu": platform.processor()},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
        indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
