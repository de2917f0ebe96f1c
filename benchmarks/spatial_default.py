"""How good the spatial backend's default config is: its simulated cycles against the best of
the config space, for every example on every preset, and bf16 GEMMs on wormhole-like.

    python benchmarks/spatial_default.py [--presets a,b] [--examples a,b] [--cap 40] [--pool 400]
                                         [--uniform 8] [--no-gemms] [--jobs N] [--out FILE]
                                         [--merge]

Each row simulates the default config (what `k.simulate(...)` runs without a config: the one
the analytic estimate ranks best, `lowering/backends/spatial/defaults.py`) and every config of
the space, and prints default/optimum as a throughput fraction (cycles of the best over cycles
of the default; target: >= 0.80 on every row). Simulating every config of every space takes
hours on 2 cores (a 150x100x90 matmul's configs of 1- and 2-wide blocks take seconds each), so a
space of more than `--cap` configs (not counting those its redundancy rules skip) is capped,
deterministically: of its configs (or, past `--pool`, of `--pool` drawn uniformly, seed 0), the
`--cap` - `--uniform` that the estimate ranks best and `--uniform` more drawn uniformly
(seed 0) among those it estimates within 10x of its best (the rest, tiny blocks, take minutes
to simulate and cannot be the optimum). The report is rewritten after every row. Such a row is marked capped (*): its optimum is that subset's, and one the estimate
ranks low is missed. The examples run at their DIMS (`make_inputs`); the GEMMs are 512^3, 3072^3 (the
Wormhole figures of issue 33: 23.4 and 76.3 TFLOP/s measured out of the box) and
3328x2560x2560 (82.7 measured with 416-row blocks), in bf16. With `--merge`, the rows run
replace those of the same case and preset in `--out`, the others kept (a rerun of a subset).
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from lowering.backends.spatial.arch import PRESETS
from tiledsl.runtime.config import Config, ConfigSpace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support import EXAMPLE_NAMES, example  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

GEMMS = ((512, 512, 512, 23.4), (3072, 3072, 3072, 76.3), (3328, 2560, 2560, 82.7))
RANK_POOL = 2000


def candidates(space: ConfigSpace, cap: int, pool_size: int, uniform: int
               ) -> tuple[list[Config], bool]:
    """Every config of the space that its redundancy rules keep, or (over `cap`) the capped
    subset the module's docstring describes; and whether it was capped."""
    if space.size_upper_bound <= pool_size:
        pool = [c for c in space if space.duplicate(c) is None]
        if len(pool) <= cap:
            return pool, False
    else:
        pool = [c for c in space.sample(pool_size, seed=0) if space.duplicate(c) is None]
    ranked = sorted(pool, key=space.estimate) if space.estimate is not None else []
    picked = dict.fromkeys(ranked[:max(0, cap - uniform)])
    hopeless = 10 * space.estimate(ranked[0]) if ranked else float("inf")  # (slow to simulate)
    rest = [c for c in pool if c not in picked and (not ranked or space.estimate(c) < hopeless)]
    picked.update(dict.fromkeys(random.Random(0).sample(rest, max(0, min(cap - len(picked), len(rest))))))
    return list(picked), True


def row(label: str, kernel: Any, args: tuple, arch: str, opts: Any,
        flops: float | None = None) -> dict[str, Any]:
    start = time.perf_counter()
    space = kernel.config_space(*args, backend="spatial", arch=arch)
    default = space.default()
    picked = time.perf_counter() - start
    configs, capped = candidates(space, opts.cap, opts.pool, opts.uniform)
    cycles = {c: kernel.simulate(*args, arch=arch, config=c).cycles
              for c in dict.fromkeys([default, *configs])}
    best = min(cycles, key=cycles.__getitem__)
    out = {"case": label, "arch": arch, "configs": len(cycles), "capped": capped,
           "space_upper_bound": space.size_upper_bound, "default": default.to_dict(),
           "default_cycles": cycles[default], "best": best.to_dict(),
           "best_cycles": cycles[best], "fraction": cycles[best] / cycles[default],
           "default_seconds": picked, "seconds": time.perf_counter() - start}
    if flops is not None:
        clock = PRESETS[arch]().clock_ghz
        out["default_tflops"] = flops / cycles[default] * clock / 1e3
        out["best_tflops"] = flops / cycles[best] * clock / 1e3
    return out


def show(r: dict[str, Any]) -> None:
    if "error" in r:
        print(f"{r['case']:22} {r['arch']:14} {r['error'][:90]}")
        return
    extra = f" {r['default_tflops']:7.1f} {r['best_tflops']:7.1f}" if "best_tflops" in r else ""
    flag = "" if r["fraction"] >= 0.8 else "  MISS"
    print(f"{r['case']:22} {r['arch']:14} {r['configs']:6}{'*' if r['capped'] else ' '} "
          f"{r['default_cycles']:12,.0f} {r['best_cycles']:12,.0f} {r['fraction']:6.2f}"
          f"{extra}{flag}", flush=True)


def task(job: tuple[Any, str, Any]) -> dict[str, Any]:
    """One row: an example by name (its DIMS), or a GEMM (m, k, n, measured TFLOP/s)."""
    case, arch, opts = job
    if isinstance(case, tuple):
        m, k, n, measured = case
        a = np.ones((m, k), ml_dtypes.bfloat16)  # the simulator needs shapes and dtypes
        b = np.ones((k, n), ml_dtypes.bfloat16)
        r = row(f"gemm {m}x{k}x{n} bf16", example("matmul").matmul, (a, b), arch, opts,
                2.0 * m * k * n)
        return {**r, "measured_tflops": measured}
    mod = example(case)
    try:
        return row(case, getattr(mod, case), mod.make_inputs(np.random.default_rng(0)), arch,
                   opts)
    except Exception as e:  # a kernel the preset cannot map: its error is the row
        return {"case": case, "arch": arch, "error": f"{type(e).__name__}: {e}"}


def write(out: Path, opts: Any, rows: list[dict[str, Any]]) -> None:
    out.write_text(json.dumps({
        "benchmark": "spatial_default", "cap": opts.cap, "pool": opts.pool,
        "uniform": opts.uniform,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "rows": rows}, indent=1, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--examples", default=",".join(EXAMPLE_NAMES))
    parser.add_argument("--cap", type=int, default=40)
    parser.add_argument("--pool", type=int, default=400)
    parser.add_argument("--uniform", type=int, default=8)
    parser.add_argument("--no-gemms", action="store_true")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", help=out_help("spatial_default.json"))
    parser.add_argument("--merge", action="store_true",
                        help="keep --out's rows of the cases and presets not run")
    opts = parser.parse_args()
    out = out_path(opts.out, "spatial_default.json")
    kept = json.loads(out.read_text())["rows"] if opts.merge and out.exists() else []
    rows: list[dict[str, Any]] = []
    print(f"{'case':22} {'preset':14} {'configs':>7} {'default cyc':>12} {'best cyc':>12} "
          f"{'def/opt':>6} (TFLOP/s default, best)")
    tasks = [(name, arch, opts) for arch in opts.presets.split(",")
             for name in opts.examples.split(",") if name]
    tasks += [] if opts.no_gemms else [(gemm, "wormhole-like", opts) for gemm in GEMMS]
    with multiprocessing.Pool(opts.jobs) as pool:
        for r in pool.imap(task, tasks):
            rows.append(r)
            show(r)
            write(out, opts, merged(kept, rows))  # as it goes: a long run's rows so far
    ok = [r for r in rows if "fraction" in r]
    misses = [r for r in ok if r["fraction"] < 0.8]
    print(f"(* capped: the optimum is over the subset; def/opt = best cycles / default cycles; "
          f"target >= 0.80) {len(ok) - len(misses)}/{len(ok)} rows meet it; worst "
          f"{min((r['fraction'] for r in ok), default=float('nan')):.2f}; {len(rows) - len(ok)} rows do not map")
    write(out, opts, merged(kept, rows))
    print(f"wrote {out}")


def merged(kept: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`kept` with each row of the same case and preset as one of `rows` replaced by it (in
    place), and `rows` new to it appended."""
    new = {(r["case"], r["arch"]): r for r in rows}
    out = [new.pop((r["case"], r["arch"]), r) for r in kept]
    return out + [r for r in rows if (r["case"], r["arch"]) in new]


if __name__ == "__main__":
    main()
