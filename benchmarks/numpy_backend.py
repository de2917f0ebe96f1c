"""The NumPy backend against plain NumPy on ragged and aligned shapes, through `k(*args)`.

    python benchmarks/numpy_backend.py [--repeats N] [--only SUBSTRING] [--out FILE]
    OPENBLAS_NUM_THREADS=1 python benchmarks/numpy_backend.py ...  # one BLAS thread, both sides

Each case runs the kernel as a user calls it, `k(*args)` with the NumPy backend's default config
(dispatch included), against what a NumPy user writes (the example's `baseline`), interleaved
in the same run. Prints a table (median milliseconds with their min-max spread, ratio =
tiledsl median / NumPy median) and writes it as JSON with the machine, versions and date.
Ragged shapes (no power-of-two block divides them: 257x333, 1000003, 1000^3, 4099x4097) sit
next to aligned ones (256x256, 2^20, 1024^3, 4096x4096). The target of issue 32: every ratio
under 3.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import tiledsl as td
from outputs import out_help, out_path  # benchmarks/outputs.py

ROOT = Path(__file__).resolve().parent.parent
_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@td.tile_kernel
def swiglu(a, b):
    m, n = a.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        x = a[tm, tn]
        out[tm, tn] = x * td.sigmoid(x) * b[tm, tn]
    return out


def numpy_swiglu(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a / (1 + np.exp(-a)) * b


def timed(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[float]]:
    """Seconds of each call, calls interleaved so machine noise hits all alike."""
    for f in fns.values():
        f()  # warm-up: tracing, caches, BLAS threads
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            start = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - start)
    return times


def cases() -> dict[str, tuple[Any, Callable[..., Any], Callable[[np.random.Generator], tuple]]]:
    """name -> (kernel, plain NumPy function, inputs from a generator)."""
    ex = {n: example(n) for n in ("vector_add", "row_sum", "softmax", "layer_norm", "matmul",
                                  "attention")}

    def f32(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
        return lambda rng: rng.standard_normal(shape).astype(np.float32)

    def args(*makers: Callable[[np.random.Generator], Any]):
        return lambda rng: tuple(m(rng) for m in makers)

    def plain(name: str) -> Callable[..., Any]:
        return lambda *a: ex[name].baseline(np, *a)

    def norm(m: int, n: int):
        return args(f32(m, n), f32(n), f32(n), lambda rng: 1e-5)

    out: dict[str, Any] = {}
    for n in (1_000_003, 1 << 20):
        out[f"vector add {n}"] = (ex["vector_add"].vector_add, plain("vector_add"), args(f32(n), f32(n)))
    for m, n in ((257, 333), (256, 256), (4099, 4097), (4096, 4096)):
        out[f"swiglu {m}x{n}"] = (swiglu, numpy_swiglu, args(f32(m, n), f32(m, n)))
    for m, n in ((257, 333), (4099, 4097), (4096, 4096)):
        out[f"row sum {m}x{n}"] = (ex["row_sum"].row_sum, plain("row_sum"), args(f32(m, n)))
        out[f"softmax {m}x{n}"] = (ex["softmax"].softmax, plain("softmax"), args(f32(m, n)))
        out[f"layer norm {m}x{n}"] = (ex["layer_norm"].layer_norm, plain("layer_norm"), norm(m, n))
    for m, k, n in ((257, 333, 257), (1000, 1000, 1000), (1024, 1024, 1024)):
        out[f"matmul {m}x{k}x{n}"] = (ex["matmul"].matmul, plain("matmul"),
                                      args(f32(m, k), f32(k, n)))
    for b, s, d in ((8, 1000, 64), (8, 1024, 64), (4, 257, 36)):
        out[f"attention {b}x{s}x{d}"] = (ex["attention"].attention, plain("attention"),
                                         args(f32(b, s, d), f32(b, s, d), f32(b, s, d)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--out", help=out_help("numpy_backend.json"))
    opts = parser.parse_args()
    out = out_path(opts.out, "numpy_backend.json")
    rows = []
    threads = {k: os.environ[k] for k in _THREAD_VARS if k in os.environ}
    print(f"BLAS threads: {threads or 'as the library chooses'}; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'case':26} {'tiledsl ms (min-max)':>26} {'numpy ms (min-max)':>24} {'ratio':>6}")
    for name, (kernel, numpy_fn, make) in cases().items():
        if opts.only not in name:
            continue
        a = make(np.random.default_rng(0))
        t = timed({"tiledsl": lambda: kernel(*a), "numpy": lambda: numpy_fn(*a)}, opts.repeats)
        row: dict[str, Any] = {"case": name,
                               "config": str(kernel.config_space(*a, backend="numpy").default())}
        for k in ("tiledsl", "numpy"):
            row[f"{k}_ms"] = statistics.median(t[k]) * 1e3
            row[f"{k}_min_ms"], row[f"{k}_max_ms"] = min(t[k]) * 1e3, max(t[k]) * 1e3
        row["ratio"] = row["tiledsl_ms"] / row["numpy_ms"]
        rows.append(row)
        print(f"{name:26} {row['tiledsl_ms']:9.3f} ({row['tiledsl_min_ms']:.3f}-"
              f"{row['tiledsl_max_ms']:.3f}) {row['numpy_ms']:9.3f} ({row['numpy_min_ms']:.3f}-"
              f"{row['numpy_max_ms']:.3f}) {row['ratio']:6.2f}", flush=True)
    report = {
        "benchmark": "numpy_backend",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "tiledsl": td.__version__},
        "repeats": opts.repeats,
        "threads": threads,  # thread-count variables set for this run (both sides share them)
        "method": "k(*args) with the NumPy backend's default config (dispatch included) against "
                  "the example's NumPy baseline, calls interleaved; medians with min-max",
        "results": rows,
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
