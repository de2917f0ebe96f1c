"""The tuner on a registered knob: `split_k` of examples/matmul_split_k.py, tuned per shape.

    python benchmarks/tune_split_k.py [--backend spatial|model|triton] [--trials 20]
                                      [--shapes 16x2048x16,64x512x64,256x32x256] [--out FILE]

For each shape (m x k x n) the default tuner (`tune(...)`, its default strategy, cold caches)
searches the example's space, which holds `split_k` (td.register_tunable, 1 to 32) beside the
block sizes and the backend's knobs; the table shows the tuned `split_k`, the tuned value
against the space's default (split_k = 1) and the tune's wall time. A long k with a small output
needs parallelism along k; a short k over a large output has it already, and extra parts only
add atomic traffic. Backends: `spatial` (simulated cycles, the default), `model` (the analytic
H100 model's microseconds, no GPU), `triton` (measured milliseconds on a GPU; default shapes
128x65536x128 and 4096x1024x4096, fp16). Writes tune_split_k_<backend>.json where `--out` says (else benchmarks/outputs.py's
scratch directory).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = tempfile.mkdtemp(prefix="tiledsl-split-k-")
os.environ.setdefault("TILEDSL_CACHE_DIR", f"{SCRATCH}/tiledsl")  # cold, as a first tune

import numpy as np  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from support import example  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

from autotune.tuner import tune  # noqa: E402

SHAPES = {"spatial": "16x2048x16,64x512x64,256x32x256", "model": "128x65536x128,4096x1024x4096",
          "triton": "128x65536x128,4096x1024x4096"}


def tune_shape(backend: str, dims: tuple[int, int, int], trials: int, seed: int) -> dict:
    mod = example("matmul_split_k")
    m, k, n = dims
    dtype = np.float32 if backend == "spatial" else np.float16
    args = list(mod.make_inputs(np.random.default_rng(seed), {"m": m, "k": k, "n": n}, dtype))
    start = time.monotonic()
    r = tune(mod.matmul_split_k, args, backend=backend, trials=trials, seed=seed,
             storage=f"sqlite:///{SCRATCH}/{backend}-{m}x{k}x{n}.db", use_cache=False,
             check=backend != "model")
    wall = time.monotonic() - start
    by_split: dict[int, float] = {}
    for t in r.trials:
        if t.value is not None:
            s = int(t.config.get("split_k"))
            by_split[s] = min(by_split.get(s, float("inf")), t.value)
    return {"shape": f"{m}x{k}x{n}", "dtype": np.dtype(dtype).name, "trials": len(r.trials),
            "wall_s": round(wall, 1), "unit": r.unit,
            "best": r.best.to_dict() if r.best else None,
            "split_k": int(r.best.get("split_k")) if r.best else None,
            "best_value": r.best_value, "default_value": r.default_value,
            "best_by_split_k": dict(sorted(by_split.items()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=sorted(SHAPES), default="spatial")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--shapes", help="m x k x n, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help=out_help("tune_split_k_BACKEND.json"))
    opts = ap.parse_args()
    out = out_path(opts.out, f"tune_split_k_{opts.backend}.json")
    shapes = [tuple(int(x) for x in s.split("x")) for s in
              (opts.shapes or SHAPES[opts.backend]).split(",")]
    rows = []
    print(f"{'shape (m x k x n)':>20} {'split_k':>8} {'tuned':>12} {'default':>12} {'speedup':>8} "
          f"{'tune s':>7}  best per split_k")
    for dims in shapes:
        row = tune_shape(opts.backend, dims, opts.trials, opts.seed)  # type: ignore[arg-type]
        rows.append(row)
        speedup = row["default_value"] / row["best_value"] if row["best_value"] else float("nan")
        per = " ".join(f"{s}:{v:.4g}" for s, v in row["best_by_split_k"].items())
        print(f"{row['shape']:>20} {row['split_k']:>8} {row['best_value']:>12.5g} "
              f"{row['default_value']:>12.5g} {speedup:>7.2f}x {row['wall_s']:>7.1f}  {per}"
              f"  ({row['unit']})", flush=True)
    out.write_text(json.dumps({
        "benchmark": "tune_split_k", "backend": opts.backend, "trials": opts.trials,
        "seed": opts.seed, "cpus": os.cpu_count(), "results": rows,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
        indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
