"""tiledsl's Triton backend against cuBLAS (CuPy) and torch on a GPU; compile-only on a CPU.

    python benchmarks/gpu_kernels.py [--quick] [--out FILE]   # default benchmarks/results/gpu_kernels_<mode>.json

On a GPU: measures the two ceilings (device-to-device copy bandwidth, cuBLAS bf16 GEMM at 8192^3),
then times each case with CUDA events (warm-up, L2 flushed before every repeat, median) for a few
candidate configs and reports the best, as TFLOP/s or GB/s, fraction of the ceiling and ratio to
the baseline measured in the same run. Without a GPU: code generation time per config (target
< 10 ms), compile time and resource usage (registers, spills, shared memory) for sm_90.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import ml_dtypes
import numpy as np

import tiledsl as td

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support import example  # noqa: E402

from autotune.timing import cuda_median_ms  # noqa: E402

BF16 = ml_dtypes.bfloat16
# (case, example, dims, dtype, flops(dims), bytes(dims), candidate configs)
GEMM_CONFIGS = [td.Config((128, 128, 64), 4, 3, group_m=8), td.Config((128, 256, 64), 8, 3, group_m=8),
                td.Config((256, 128, 64), 8, 3, group_m=8), td.Config((128, 128, 64), 8, 4, group_m=8)]
ROW_CONFIGS = [td.Config((1,), 4, 1), td.Config((2,), 8, 1), td.Config((4,), 8, 1)]
ATTN_CONFIGS = [td.Config((128, 64), 8, 2), td.Config((64, 64), 4, 2), td.Config((128, 128), 8, 2)]
# (rows, columns) per tile for kernels that walk a row in column tiles (row_argmax, row_cumsum)
WALK_CONFIGS = [td.Config((4, 1024), 4, 2), td.Config((8, 512), 8, 2), td.Config((1, 4096), 8, 2)]


def gemm_case(m: int, n: int, k: int, dtype: Any, label: str) -> dict:
    return {"case": f"gemm {label} {m}x{n}x{k}", "example": "matmul",
            "dims": {"m": m, "n": n, "k": k}, "dtype": dtype, "flops": 2 * m * n * k,
            "configs": GEMM_CONFIGS, "baseline": "cupy.matmul (cuBLAS)"}


def cases(quick: bool) -> list[dict]:
    squares = [4096] if quick else [1024, 2048, 4096, 8192]
    out = [gemm_case(s, s, s, np.float16, "fp16") for s in squares]
    out += [gemm_case(s, s, s, BF16, "bf16") for s in squares]
    if not quick:
        out += [gemm_case(4096, 4096, 14336, BF16, "bf16"), gemm_case(8192, 1024, 8192, BF16, "bf16")]
    out.append({"case": "gemm+bias+gelu fp16 4096^3", "example": "gemm_bias_gelu",
                "dims": {"m": 4096, "n": 4096, "k": 4096}, "dtype": np.float16,
                "flops": 2 * 4096**3, "configs": GEMM_CONFIGS,
                "baseline": "cuBLAS GEMM + torch bias/GELU"})
    for name in ("softmax", "layer_norm", "rms_norm"):
        out.append({"case": f"{name} fp16 8192x8192", "example": name,
                    "dims": {"m": 8192, "n": 8192}, "dtype": np.float16,
                    "bytes": 2 * 2 * 8192 * 8192, "configs": ROW_CONFIGS, "baseline": "torch"})
    out.append({"case": "argmax fp16 1024x128256", "example": "row_argmax",  # greedy decoding
                "dims": {"m": 1024, "n": 128256}, "dtype": np.float16,
                "bytes": 2 * 1024 * 128256, "configs": WALK_CONFIGS, "baseline": "torch"})
    out.append({"case": "cumsum fp32 8192x8192", "example": "row_cumsum",
                "dims": {"m": 8192, "n": 8192}, "dtype": np.float32,
                "bytes": 2 * 4 * 8192 * 8192, "configs": WALK_CONFIGS, "baseline": "torch"})
    out.append({"case": "causal attention fwd fp16 16x4096x128", "example": "attention",
                "dims": {"batch": 16, "seq": 4096, "d": 128}, "dtype": np.float16,
                "flops": 2 * 2 * 16 * 4096 * 4096 * 128 // 2, "configs": ATTN_CONFIGS,
                "baseline": "torch scaled_dot_product_attention"})
    return out


def versions() -> dict:
    import triton
    out = {"python": platform.python_version(), "numpy": np.__version__, "triton": triton.__version__,
           "tiledsl": td.__version__}
    for mod in ("torch", "cupy"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            pass
    return out


# ---- compile-only (no GPU) -------------------------------------------------------------------
def compile_only(quick: bool) -> list[dict]:
    from lowering.backends.triton.codegen import generate
    from lowering.backends.triton.targets import array_strides
    rows = []
    for case in cases(quick):
        mod = example(case["example"])
        kernel = getattr(mod, case["example"])
        args = mod.make_inputs(np.random.default_rng(0), case["dims"], case["dtype"])
        lowered = kernel.traced(*args).lowered
        strides = array_strides(lowered, list(args))
        for config in case["configs"][:2 if quick else None]:
            start = time.perf_counter()
            for _ in range(20):
                generate(lowered, config, strides)
            codegen_ms = (time.perf_counter() - start) / 20 * 1e3
            for r in kernel.compile(*args, config=config, arch="sm_90"):
                rows.append({"case": case["case"], "config": config.to_dict(),
                             "codegen_ms": round(codegen_ms, 3),
                             "compile_s": round(r.compile_seconds, 3), "registers": r.registers,
                             "spill_bytes": r.spill_bytes, "shared_bytes": r.shared_bytes,
                             "problem": r.problem})
    print(f"{'case':42} {'config':34} {'codegen ms':>10} {'compile s':>9} {'regs':>5} "
          f"{'spill':>5} {'smem':>7}")
    for r in rows:
        cfg = f"{tuple(r['config']['block_sizes'])} w{r['config'].get('num_warps')}"
        print(f"{r['case']:42} {cfg:34} {r['codegen_ms']:10.2f} {r['compile_s']:9.2f} "
              f"{r['registers']:5} {r['spill_bytes']:5} {r['shared_bytes']:7}"
              + (f"  ({r['problem']})" if r["problem"] else ""))
    return rows


# ---- on a GPU --------------------------------------------------------------------------------
def ceilings(repeats: int) -> dict:
    import cupy
    import torch
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = cuda_median_ms(lambda: dst.copy_(src), repeats)
    a = cupy.asarray(np.random.default_rng(0).standard_normal((8192, 8192)).astype(np.float32))
    a16 = torch.from_dlpack(a).to(torch.bfloat16)
    a_cp = cupy.from_dlpack(a16)
    gemm_ms = cuda_median_ms(lambda: cupy.matmul(a_cp, a_cp), repeats)
    return {"copy_GBps": 2 * 2**30 / ms / 1e6, "cublas_bf16_8192_TFLOPs": 2 * 8192**3 / gemm_ms / 1e9}


def baseline(case: dict, targs: list[Any]) -> Callable[[], Any]:
    import cupy
    import torch
    import torch.nn.functional as F
    name = case["example"]
    if name == "matmul":
        a, b = (cupy.from_dlpack(t) for t in targs)
        return lambda: cupy.matmul(a, b)
    if name == "gemm_bias_gelu":
        a, b = (cupy.from_dlpack(t) for t in targs[:2])
        bias = targs[2]
        return lambda: F.gelu(torch.from_dlpack(cupy.matmul(a, b)) + bias)
    if name == "softmax":
        return lambda: torch.softmax(targs[0], dim=-1)
    if name == "layer_norm":
        x, w, b = targs[:3]
        return lambda: F.layer_norm(x, (x.shape[-1],), w, b)
    if name == "rms_norm":
        x, w = targs[:2]
        return lambda: F.rms_norm(x, (x.shape[-1],), w)
    if name == "row_argmax":
        return lambda: torch.argmax(targs[0], dim=-1)
    if name == "row_cumsum":
        return lambda: torch.cumsum(targs[0], dim=-1)
    q, k, v = targs[:3]
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)


def on_gpu(quick: bool, repeats: int, report: dict, save: Callable[[], None]) -> None:
    """Fills report["ceilings"] and report["results"], saving after each case: a case that
    fails is recorded with its error, and the others still run."""
    import torch

    try:
        report["ceilings"] = ceil = ceilings(repeats)
    except Exception as e:  # noqa: BLE001 - the cases are timed without the ceilings
        report["ceilings"] = ceil = {"error": f"{type(e).__name__}: {e}"}
        print(f"ceilings failed: {type(e).__name__}: {e}")
    rows = report["results"] = []
    for case in cases(quick):
        try:
            row = time_case(case, repeats, ceil)
        except Exception as e:  # noqa: BLE001 - recorded; the next case runs
            row = {"case": case["case"], "error": f"{type(e).__name__}: {e}"}
            print(f"{case['case']:42} failed: {row['error'].splitlines()[0]}")
        rows.append(row)
        save()
        torch.cuda.empty_cache()


def time_case(case: dict, repeats: int, ceil: dict) -> dict:
    from autotune.runners import to_device
    mod = example(case["example"])
    kernel = getattr(mod, case["example"])
    args = mod.make_inputs(np.random.default_rng(0), case["dims"], case["dtype"])
    targs = to_device(list(args))
    best = None
    failed = []
    for config in case["configs"]:
        try:
            kernel.run(*targs, backend="triton", config=config)
        except Exception as e:  # noqa: BLE001 - Triton's own errors too: the next config runs
            why = f"{type(e).__name__}: {e}"
            print(f"  {case['case']}: {config} failed: {why}")
            failed.append({"config": config.to_dict(), "error": why.splitlines()[0]})
            continue
        ms = cuda_median_ms(lambda: kernel.run(*targs, backend="triton", config=config),
                            repeats)
        if best is None or ms < best[0]:
            best = (ms, config)
    if best is None:
        return {"case": case["case"], "error": "no candidate config ran", "failed": failed}
    base_ms = cuda_median_ms(baseline(case, targs), repeats)
    ms, config = best
    row = {"case": case["case"], "config": config.to_dict(), "ms": ms, "baseline": case["baseline"],
           "baseline_ms": base_ms, "ratio_to_baseline": base_ms / ms, "failed": failed}
    if "flops" in case:
        row["TFLOPs"] = case["flops"] / ms / 1e9
        if "cublas_bf16_8192_TFLOPs" in ceil:
            row["fraction_of_cublas_ceiling"] = row["TFLOPs"] / ceil["cublas_bf16_8192_TFLOPs"]
    else:
        row["GBps"] = case["bytes"] / ms / 1e6
        if "copy_GBps" in ceil:
            row["fraction_of_copy_ceiling"] = row["GBps"] / ceil["copy_GBps"]
    rate = f"{row['TFLOPs']:.0f} TFLOP/s" if "TFLOPs" in row else f"{row['GBps']:.0f} GB/s"
    frac = row.get("fraction_of_cublas_ceiling", row.get("fraction_of_copy_ceiling"))
    shown = "" if frac is None else f"{frac:6.1%} of ceiling  "
    print(f"{case['case']:42} {ms:8.3f} ms {rate:>14} {shown}"
          f"x{row['ratio_to_baseline']:.2f} vs {case['baseline']}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer shapes and configs")
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--out", help="JSON report (default benchmarks/results/gpu_kernels_<mode>.json)")
    opts = parser.parse_args()
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    report: dict[str, Any] = {"benchmark": "gpu_kernels", "versions": versions(),
                              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                                  timespec="seconds")}
    out = Path(opts.out or ROOT / "benchmarks" / "results" /
               f"gpu_kernels_{'gpu' if has_gpu else 'compile_only'}.json")
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    if has_gpu:
        import torch
        report["device"] = torch.cuda.get_device_name()
        report["mode"] = "gpu"
        on_gpu(opts.quick, opts.repeats, report, save)
    else:
        report["device"] = f"none (CPU: {platform.processor() or platform.machine()})"
        report["mode"] = "compile-only (sm_90)"
        report["results"] = compile_only(opts.quick)
    save()
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
