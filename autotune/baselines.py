"""What a kernel is compared with: the computation written with an array library.

A kernel file's `baseline_<kernel>(xp, *args)` (or its `baseline`, for the file's only kernel or
the kernel named like the file: tiledsl/cli/file_hooks.py) computes what the kernel does with the
array module `xp`, and returns the result without writing into its arguments. On the GPU it
runs on CuPy (cuBLAS for the matmuls), on the CPU on NumPy. `tiledsl tune` and `tiledsl bench`
time it with the code that times the kernel.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import numpy as np

from tiledsl.cli import file_hooks
from tiledsl.runtime.kernel import TileKernel


def file_baselines(module: ModuleType, k: TileKernel, args: tuple,
                   backend: str) -> dict[str, Callable[[], Any]]:
    """name -> a call of the file's baseline on this backend's device (none if the file has
    no baseline, or on the GPU without CuPy)."""
    found = file_hooks.hook(module, k, "baseline")
    if found is None:
        return {}
    base = found[1]
    if backend == "triton":
        try:
            import cupy
        except ImportError:
            print(f"  (no CuPy baseline for {k.name}: pip install cupy-cuda13x, or tiledsl's "
                  "[gpu] extra)")
            return {}
        try:
            gpu = [cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        except Exception as e:  # noqa: BLE001 - a dtype this CuPy lacks (bfloat16 before v14)
            print(f"  (no CuPy baseline for {k.name}: CuPy cannot hold its inputs: "
                  f"{type(e).__name__}: {e})")
            return {}
        return {"CuPy (cuBLAS for GEMMs)": lambda: base(cupy, *gpu)}
    return {"NumPy": lambda: base(np, *args)}  # a baseline only reads its arguments
