"""The cost model's register estimate against what the compiler allocates, on the examples.

    python benchmarks/register_estimate.py [--arch sm_90] [--samples 2] [--out FILE]
    # default output: a scratch directory (benchmarks/outputs.py)

For every example (fp16 where it has a dot, else fp32) at a size a GPU runs, its config space's
default and `--samples` sampled configs are compiled for `--arch` without a GPU; the registers
per thread the cubin uses (cuobjdump) are set beside `estimated_resources` (what the tuner's
model prices configs with before compiling them). Prints each pair and the error, and the
share of configs within 15%. Configs that spill are left out of the share (the estimate then
only has to say "more than 255"). Compiles are cached (TILEDSL_CACHE_DIR).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support import EXAMPLE_NAMES, example  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

from lowering.backends.triton.cost import MAX_REGISTERS, estimated_resources  # noqa: E402

SIZES: dict[str, dict[str, int]] = {
    "vector_add": {"n": 1 << 24}, "axpby": {"m": 4096, "n": 4096},
    "row_sum": {"m": 8192, "n": 4096}, "row_argmax": {"m": 1024, "n": 32768},
    "row_cumsum": {"m": 4096, "n": 4096}, "center_columns": {"m": 4096, "n": 4096},
    "matmul": {"m": 4096, "k": 4096, "n": 4096},
    "batched_matmul": {"batch": 16, "m": 1024, "k": 1024, "n": 1024},
    "gemm_bias_gelu": {"m": 4096, "k": 4096, "n": 4096}, "softmax": {"m": 8192, "n": 8192},
    "layer_norm": {"m": 8192, "n": 8192}, "rms_norm": {"m": 8192, "n": 8192},
    "attention": {"batch": 128, "seq": 4096, "d": 64},
    "window_attention": {"batch": 128, "seq": 4096, "d": 64},
}
WITHIN = 0.15


def dtype_for(name: str) -> Any:
    """fp16 for the kernels with dots (what their GPU users run), fp32 for the rest."""
    return np.float16 if name in ("matmul", "batched_matmul", "gemm_bias_gelu", "attention",
                                  "window_attention") else np.float32


def rows_for(name: str, samples: int, arch: str, seed: int = 0) -> list[dict[str, Any]]:
    mod = example(name)
    kernel = getattr(mod, name)
    args = mod.make_inputs(np.random.default_rng(0), SIZES[name], dtype_for(name))
    space = kernel.config_space(*args, backend="triton")
    fn = kernel.traced(*args).for_backend("triton")
    rows = []
    for config in (space.default(), *space.sample(samples, seed=seed)):
        estimated = estimated_resources(fn, config)[0].registers
        try:  # a kernel of several grids compiles to one kernel each: the model takes the most
            reports = kernel.compile(*args, config=config, arch=arch)
        except Exception as e:  # noqa: BLE001 - recorded; the next config compiles
            rows.append({"kernel": name, "config": config.to_dict(), "error": str(e)[:300]})
            continue
        compiled = max(r.registers for r in reports)
        rows.append({"kernel": name, "config": config.to_dict(), "estimated": estimated,
                     "compiled": compiled, "spill_bytes": max(r.spill_bytes for r in reports),
                     "error_rel": (estimated - compiled) / compiled})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if "compiled" in r and r["spill_bytes"] == 0
              and r["compiled"] < MAX_REGISTERS]
    errors = [abs(r["error_rel"]) for r in scored]
    return {"configs": len(scored), "within_15pct": sum(e <= WITHIN for e in errors),
            "median_abs_error": statistics.median(errors) if errors else None,
            "worst": max(scored, key=lambda r: abs(r["error_rel"]), default=None)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="of the sampled configs (0: those the "
                    "model's constants were fitted on; others are held out)")
    ap.add_argument("--only", default="", help="only examples whose name contains this")
    ap.add_argument("--out", help=out_help("register_estimate_ARCH.json"))
    opts = ap.parse_args()
    out = out_path(opts.out, f"register_estimate_{opts.arch}.json")
    rows: list[dict[str, Any]] = []
    for name in EXAMPLE_NAMES:
        if opts.only in name and name in SIZES:  # the examples a size is chosen for
            rows += rows_for(name, opts.samples, opts.arch, opts.seed)
    print(f"{'kernel':18} {'config':58} {'estimated':>9} {'compiled':>8} {'error':>7}")
    for r in rows:
        c = r["config"]
        cfg = f"{tuple(c['block_sizes'])} w{c.get('num_warps')} s{c.get('num_stages')}" + \
            "".join(f" {k}" for k in ("tma", "persistent") if c.get(k))
        if "error" in r:
            print(f"{r['kernel']:18} {cfg:58} failed: {r['error'].splitlines()[0][:60]}")
            continue
        spill = f"  ({r['spill_bytes']} B spilled)" if r["spill_bytes"] else ""
        print(f"{r['kernel']:18} {cfg:58} {r['estimated']:9} {r['compiled']:8} "
              f"{r['error_rel']:+7.0%}{spill}")
    s = summary(rows)
    kernels = sorted({r["kernel"] for r in rows})
    print(f"{s['within_15pct']} of {s['configs']} configs that do not spill are within 15% "
          f"(median error {s['median_abs_error'] or 0:.0%})")
    out.write_text(json.dumps({
        "benchmark": "register_estimate", "arch": opts.arch, "samples": opts.samples,
        "seed": opts.seed, "summary": s, "rows": rows,
        "sizes": {n: SIZES[n] for n in kernels},  # what tests/autotune/test_model.py traces again
        "dtypes": {n: np.dtype(dtype_for(n)).name for n in kernels},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "triton": __import__("triton").__version__}, indent=1, default=str) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
