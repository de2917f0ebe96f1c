"""What the GPU benchmarks share: a JSON report saved after every part (a call cut off at its
time limit keeps what finished), the machine it ran on, and times with their spread."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import platform
import statistics
import subprocess
import traceback
from pathlib import Path
from typing import Any, Callable

PACKAGES = ("tiledsl", "triton", "torch", "cupy-cuda13x", "cupy-cuda12x", "numpy", "optuna",
            "scipy")


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def device() -> dict[str, Any]:
    """The GPU (name, SMs, capability) and its driver, or what there is instead."""
    try:
        import torch
        if not torch.cuda.is_available():
            return {"name": f"none (CPU: {platform.processor() or platform.machine()})"}
        props = torch.cuda.get_device_properties(0)
        out: dict[str, Any] = {"name": props.name, "sms": props.multi_processor_count,
                               "capability": f"sm_{props.major}{props.minor}",
                               "memory_GiB": round(props.total_memory / 2**30, 1),
                               "cuda": torch.version.cuda}
    except ImportError:
        return {"name": "none (no torch)"}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        out["driver, sm clock, mem clock"] = smi.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def spread_ms(fn: Callable[[], Any], repeats: int, warmup: int = 3) -> dict[str, Any]:
    """Median, min and max of `fn()` over `repeats` (CUDA events, L2 flushed before each)."""
    from autotune.timing import cuda_times_ms
    times = cuda_times_ms(fn, repeats, warmup)
    return {"ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "repeats": repeats}


class Report:
    """A benchmark's JSON report, written whole after each part."""

    def __init__(self, benchmark: str, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {
            "benchmark": benchmark, "device": device(), "versions": versions(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        path.parent.mkdir(parents=True, exist_ok=True)

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        tmp.replace(self.path)

    @staticmethod
    def attempt(name: str, make: Callable[[], dict]) -> dict:
        """`make()`, or a row saying how it failed (the next part still runs)."""
        try:
            return make()
        except Exception as e:  # noqa: BLE001 - recorded in the report; the others go on
            print(f"{name} failed: {type(e).__name__}: {e}")
            return {"error": f"{type(e).__name__}: {e}",
                    "where": traceback.format_exc(limit=-3).strip().splitlines()[-6:]}
