"""The NumPy backend against plain NumPy: matmul, softmax and vector add with the default config.

    python benchmarks/numpy_backend.py [--repeats N] [--out FILE]

Prints a table (median milliseconds, ratio = tiledsl / NumPy, both measured in the same run,
interleaved) and writes it as JSON with the machine, versions and date. The target of issue 2:
a ratio under 5 for the 1024^3 float32 matmul and the 4096x4096 softmax. Ragged shapes (no
block size divides them) show the cost of partial edge tiles.
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


def example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def interleaved(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median seconds of each function, calls interleaved so machine noise hits all alike."""
    for f in fns.values():
        f()  # warm-up: tracing, caches, BLAS threads
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            start = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", help=out_help("numpy_backend.json"))
    opts = parser.parse_args()
    out = out_path(opts.out, "numpy_backend.json")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    x = rng.standard_normal((4096, 4096)).astype(np.float32)
    xr = rng.standard_normal((4099, 4097)).astype(np.float32)
    u, v = rng.standard_normal((2, 1_000_003)).astype(np.float32)
    matmul, softmax = example("matmul").matmul, example("softmax").softmax
    vector_add = example("vector_add").vector_add
    gpu_like = td.Config((64, 64, 32))
    cases = {
        "matmul 1024^3 f32": {"tiledsl": lambda: matmul(a, b), "numpy": lambda: a @ b},
        "matmul 1024^3 f32, blocks (64,64,32)": {
            "tiledsl": lambda: matmul.run(a, b, config=gpu_like), "numpy": lambda: a @ b},
        "softmax 4096x4096 f32": {"tiledsl": lambda: softmax(x), "numpy": lambda: numpy_softmax(x)},
        "softmax 4099x4097 f32 (ragged)": {"tiledsl": lambda: softmax(xr),
                                           "numpy": lambda: numpy_softmax(xr)},
        "vector add 1000003 f32 (ragged)": {"tiledsl": lambda: vector_add(u, v),
                                            "numpy": lambda: u + v},
    }
    rows = []
    for name, fns in cases.items():
        t = interleaved(fns, opts.repeats)
        rows.append({"case": name, "tiledsl_ms": t["tiledsl"] * 1e3, "numpy_ms": t["numpy"] * 1e3,
                     "ratio": t["tiledsl"] / t["numpy"]})
    print(f"{'case':40} {'tiledsl ms':>11} {'numpy ms':>9} {'ratio':>6}")
    for r in rows:
        print(f"{r['case']:40} {r['tiledsl_ms']:11.2f} {r['numpy_ms']:9.2f} {r['ratio']:6.2f}")
    report = {
        "benchmark": "numpy_backend",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpus": os.cpu_count()},
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "tiledsl": td.__version__},
        "repeats": opts.repeats,
        "default_config_note": "the NumPy backend's default config (big blocks) unless stated",
        "results": rows,
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
