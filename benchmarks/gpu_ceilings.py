"""The GPU's two ceilings, measured: device-to-device copy bandwidth and cuBLAS GEMM throughput.

    python benchmarks/gpu_ceilings.py [--out FILE]   # default: a scratch directory (benchmarks/outputs.py)

Copy: a 2 GiB buffer copied into another (4 GiB moved, bytes read plus bytes written).
GEMM: torch.matmul (cuBLAS) at 8192^3 in bf16 and fp16 on random data (never zeros: a product
of zeros runs faster). Both timed with CUDA events, L2 flushed before each repeat, median and
spread over the repeats (autotune/timing.py, what the tuner times candidates with).
`gpu_kernels.py --ceilings FILE` reads this report to give each kernel's fraction of them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from gpu_report import Report, spread_ms  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

COPY_BYTES = 2 * 2**30
GEMM_N = 8192


def copy_row(repeats: int) -> dict:
    import torch
    src = torch.randint(0, 255, (COPY_BYTES,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    times = spread_ms(lambda: dst.copy_(src), repeats)
    assert torch.equal(dst[:4096], src[:4096]) and torch.equal(dst[-4096:], src[-4096:])
    moved = 2 * COPY_BYTES
    return {"what": "device-to-device copy, 2 GiB (bytes read + written)", **times,
            "GBps": moved / times["ms"] / 1e6}


def gemm_row(dtype_name: str, repeats: int) -> dict:
    import torch
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(GEMM_N, GEMM_N, device="cuda", generator=gen).to(dtype)
    b = torch.randn(GEMM_N, GEMM_N, device="cuda", generator=gen).to(dtype)
    times = spread_ms(lambda: torch.matmul(a, b), repeats)
    return {"what": f"cuBLAS (torch.matmul) {dtype_name} {GEMM_N}^3, random data", **times,
            "TFLOPs": 2 * GEMM_N**3 / times["ms"] / 1e9}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--out", help=out_help("gpu_ceilings.json"))
    opts = ap.parse_args()
    out = out_path(opts.out, "gpu_ceilings.json")
    report = Report("gpu_ceilings", out)
    rows = report.data["results"] = {}
    for key, make in (("copy", lambda: copy_row(opts.repeats)),
                      ("cublas_bf16", lambda: gemm_row("bfloat16", opts.repeats)),
                      ("cublas_fp16", lambda: gemm_row("float16", opts.repeats))):
        rows[key] = report.attempt(key, make)
        report.save()
    for key, row in rows.items():
        if "error" in row:
            print(f"{key:12} failed: {row['error'].splitlines()[0][:100]}")
            continue
        rate = f"{row['GBps']:.0f} GB/s" if "GBps" in row else f"{row['TFLOPs']:.0f} TFLOP/s"
        print(f"{key:12} {rate:>16}  median {row['ms']:.3f} ms "
              f"[{row['min_ms']:.3f}, {row['max_ms']:.3f}] over {row['repeats']}")
    print(f"wrote {out}")
    return 1 if any("error" in row for row in rows.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
