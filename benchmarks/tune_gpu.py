"""A full GEMM tune, cold, end to end: how long it takes and what it finds against cuBLAS.

    python benchmarks/tune_gpu.py [--dims 4096,4096,4096] [--dtype f16] [--trials 40]
                                  [--backend triton|model] [--out FILE]

On a GPU (`--backend triton`, the default there): the default strategy with compile workers
warming Triton's JIT cache ahead of an isolated measuring process (CUDA events, cold L2, median),
every candidate checked against NumPy, configs the cost model predicts more than `--prune`
times slower than a measured one left untimed, the finalists re-timed interleaved; cuBLAS
(`cupy.matmul`) timed by the same code. The target (issue 5) is under 2 minutes. Without a GPU,
`--backend model` runs the same pipeline with the analytic H100 model in place of timing (a dry
run of everything but the GPU).

Caches start empty (a temporary TRITON_CACHE_DIR and TILEDSL_CACHE_DIR), so every compile is
counted. On a GPU, once the tune is timed, the report pairs each measured config's time with the
analytic H100 model's prediction (the compile workers' own, else computed in a process pool):
its rank correlation with the measured times, and the prune factor this tune needed (the
fastest config's prediction over the lowest one measured), the data the model's calibration
and the pruning's factor need. Writes tune_gpu_<backend>.json where `--out` says (else
benchmarks/outputs.py's scratch directory).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Empty caches, made once: the compile workers (spawned) re-import this file and must find the
# parent's folders in their environment, not make their own.
if "TILEDSL_TUNE_GPU_SCRATCH" not in os.environ:
    os.environ["TILEDSL_TUNE_GPU_SCRATCH"] = tempfile.mkdtemp(prefix="tiledsl-tune-gpu-")
SCRATCH = os.environ["TILEDSL_TUNE_GPU_SCRATCH"]
os.environ["TRITON_CACHE_DIR"] = f"{SCRATCH}/triton"  # before Triton is imported: a cold start
os.environ["TILEDSL_CACHE_DIR"] = f"{SCRATCH}/tiledsl"

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from support import example  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

from autotune.precompile import default_workers  # noqa: E402
from autotune.prune import PRUNE_FACTOR  # noqa: E402
from autotune.tuner import tune  # noqa: E402
from tiledsl.runtime.config import Config  # noqa: E402

DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}


def has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("triton", "torch", "cupy-cuda13x", "cupy-cuda12x", "numpy", "optuna"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


_runner: dict[str, object] = {}


def _predict(file: str, name: str, args: list, config: dict) -> float | None:
    """The model runner's value for one config (in a worker process)."""
    from autotune.runners import from_file
    if "model" not in _runner:
        _runner["model"] = from_file(file, name, args, "model")
    try:
        return _runner["model"].time(Config.from_dict(config))  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a config the model cannot price is left out
        return None


def to_price(trials: list) -> list:
    """The measured trials the check must price from their compiled kernels: those no compile
    worker priced (a prediction from resources guessed from the IR is not the model's verdict
    on the compiled kernel, which is what the check is about)."""
    return [t for t in trials if t.value is not None and t.model_from != "compiled"]


def model_check(kernel: object, args: list, trials: list) -> dict:
    """The model's predictions for the measured configs, and how well they rank them."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from scipy.stats import spearmanr
    measured = [t for t in trials if t.value is not None]
    again = {id(t) for t in to_price(measured)}
    with ProcessPoolExecutor(default_workers(), mp_context=mp.get_context("spawn")) as pool:
        file, name = kernel.file, kernel.name  # type: ignore[attr-defined]
        futures = [pool.submit(_predict, file, name, args, t.config.to_dict())
                   if id(t) in again else None for t in measured]
        predicted = [t.predicted if f is None else f.result() for t, f in zip(measured, futures)]
    pairs = [(t, p) for t, p in zip(measured, predicted) if p is not None]
    out: dict = {"priced_again": len(again),
                 "pairs": [{"config": t.config.to_dict(), "measured_ms": t.value,
                            "model_us": p} for t, p in pairs]}
    if len(pairs) >= 3:
        out["spearman"] = float(spearmanr([t.value for t, _ in pairs],
                                          [p for _, p in pairs]).statistic)
        best = min(t.value for t, _ in pairs)
        favourite = min(pairs, key=lambda tp: tp[1])[0]
        out["model_favourite_over_best"] = favourite.value / best
        fastest = min(pairs, key=lambda tp: tp[0].value)[1]
        out["prune_factor_needed"] = fastest / min(p for _, p in pairs)
    return out


def write_report(out: Path, row: dict, device: str) -> None:
    out.write_text(json.dumps({
        "benchmark": "tune_gpu", "results": [row], "device": device, "cpus": os.cpu_count(),
        "versions": versions(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
        indent=1, default=float))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", default="4096,4096,4096", help="m,k,n")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f16")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--backend", choices=["triton", "model"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prune", type=float, default=PRUNE_FACTOR,
                    help="the cost model's prune factor (0: time every config)")
    ap.add_argument("--timeout", type=float,
                    help="stop the search after this many seconds (the finalists, baselines and "
                         "the model check still run after it)")
    ap.add_argument("--out", help=out_help("tune_gpu_BACKEND.json"))
    opts = ap.parse_args()
    backend = opts.backend or ("triton" if has_gpu() else "model")
    m, k, n = (int(x) for x in opts.dims.split(","))
    out = out_path(opts.out, f"tune_gpu_{backend}.json")
    mod = example("matmul")
    a, b = mod.make_inputs(np.random.default_rng(opts.seed), {"m": m, "k": k, "n": n},
                           DTYPES[opts.dtype])
    baselines = {}
    device = "CPU only (model dry run)"
    if backend == "triton":
        import cupy
        import torch
        device = torch.cuda.get_device_name()
        ga, gb = cupy.asarray(a), cupy.asarray(b)
        baselines["cuBLAS (cupy.matmul)"] = lambda: cupy.matmul(ga, gb)
    start = time.monotonic()
    result = tune(mod.matmul, [a, b], backend=backend, trials=opts.trials, seed=opts.seed,
                  storage=f"sqlite:///{SCRATCH}/study.db", check=backend == "triton",
                  baselines=baselines, use_cache=False, progress=sys.stderr.isatty(),
                  prune=opts.prune or None, timeout=opts.timeout)
    wall = time.monotonic() - start
    print(result.table())
    flops = 2.0 * m * k * n
    row = {"case": f"matmul {opts.dtype} {m}x{k}x{n}", "backend": backend,
           "trials": len(result.trials), "rejected": len(result.rejected),
           "pruned": len(result.pruned), "prune_factor": opts.prune or None,
           "compiled_ahead": result.compiled_ahead, "wall_s": round(wall, 2),
           "search_timeout_s": opts.timeout,
           "best": result.best.to_dict() if result.best else None,
           "best_value": result.best_value, "default_value": result.default_value,
           "unit": result.unit, "baselines_ms": result.baselines,
           "search_best": result.search_best.to_dict() if result.search_best else None,
           "finalists": result.to_json()["finalists"],
           "trial_log": result.to_json()["trials"]}
    if backend == "triton" and result.best_value:
        row["tuned_tflops"] = flops / (result.best_value * 1e-3) / 1e12
        for name, ms in result.baselines.items():
            row["ratio_to_" + name.split()[0]] = ms / result.best_value
    print(f"\n{row['case']} on {backend}: {row['trials']} trials in {wall:.1f} s wall "
          f"({row['compiled_ahead']} compiled ahead, {row['rejected']} rejected, "
          f"{row['pruned']} pruned); "
          f"target: under 120 s on a GPU")
    write_report(out, row, device)  # before the model check: its failure must not lose the tune
    print(f"wrote {out}")
    if backend == "triton" and result.best_value:
        try:
            row["model_check"] = check = model_check(mod.matmul, [a, b], result.trials)
        except Exception as e:  # noqa: BLE001 - reported, the tune's numbers stay
            row["model_check"] = {"error": f"{type(e).__name__}: {e}"}
            print(f"the model check failed: {type(e).__name__}: {e}")
        else:
            if "spearman" in check:
                print(f"the H100 model against the measured times: Spearman "
                      f"{check['spearman']:.2f} over {len(check['pairs'])} configs; its "
                      f"favourite measured {check['model_favourite_over_best']:.2f}x the "
                      f"fastest; the fastest was predicted {check['prune_factor_needed']:.2f}x "
                      f"the lowest prediction (pruning at {opts.prune or 'off'})")
        write_report(out, row, device)
        print(f"wrote {out} (with the model check)")


if __name__ == "__main__":
    main()
