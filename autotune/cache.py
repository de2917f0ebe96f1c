"""The result cache: the best config per (kernel source, IR, argument signature, target, tool
versions). `k(*args)` uses a cached config without any tuning call; a changed kernel, shape,
dtype, stride, device or toolchain misses.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import tiledsl
from tiledsl.frontend import static_args
from tiledsl.runtime.config import Config
from tiledsl.runtime.kernel import TileKernel
from tiledsl.runtime.cache_files import ignored, seal, unseal, write_entry
from tiledsl.runtime.paths import cache_dir

MAX_BYTES = 1 << 20  # an entry is a key and a config: a few kB


def tool_versions() -> dict[str, str]:
    out = {"tiledsl": tiledsl.__version__, "numpy": np.__version__,
           "python": platform.python_version()}
    try:
        import triton
        out["triton"] = triton.__version__
    except ImportError:
        pass
    return out


def strides(args: list[Any]) -> list[Any]:
    out: list[Any] = []
    for a in args:
        if hasattr(a, "stride") and callable(a.stride):
            out.append(list(a.stride()))
        elif hasattr(a, "strides") and hasattr(a, "dtype"):
            out.append([int(s) // np.dtype(a.dtype).itemsize for s in a.strides])
        else:
            out.append(None)
    return out


def device_fingerprint(backend: str, arch: Any = None) -> str:
    """What the measurement depends on besides the kernel: the GPU, the simulated
    architecture, or the CPU."""
    if backend == "spatial":
        from lowering.backends.spatial.arch import preset
        a = preset(arch or "generic-8x8")
        return "spatial:" + hashlib.sha256(a.to_json().encode()).hexdigest()[:16]
    if backend in ("triton", "model"):
        try:
            import torch
            if torch.cuda.is_available():
                p = torch.cuda.get_device_properties(0)
                return f"cuda:{p.name}:{p.major}.{p.minor}"
        except ImportError:
            pass
        return f"{backend}:sm_90"
    return f"cpu:{platform.machine()}:{os.cpu_count()}"


@dataclass(frozen=True)
class CacheKey:
    text: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:32]


def key(kernel: TileKernel, args: list[Any], backend: str, arch: Any = None) -> CacheKey:
    spec = kernel.arg_spec(args)
    ir = kernel.traces.get(spec).hash  # first: a kernel without source fails here, clearly
    parts = {
        "kernel": kernel.name,
        "source": kernel.source_digest,
        "ir": ir,
        "args": [list(map(str, s)) for s in spec],
        "strides": strides(static_args.flatten_arrays(args)),
        "backend": backend,
        "device": device_fingerprint(backend, arch),
        "versions": tool_versions(),
    }
    return CacheKey(json.dumps(parts, sort_keys=True))


def _path(k: CacheKey) -> Path:
    return cache_dir() / "tuned" / f"{k.digest}.json"


def load(k: CacheKey) -> Config | None:
    """The cached best config for `k`; None for a miss. An entry that is no regular file, was
    modified (its digest), or holds another key or no valid config is ignored with a warning."""
    path = _path(k)
    data = unseal(path, MAX_BYTES)
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("key") != k.text:
        ignored(path, "it holds the result for another key (a hash collision or a copied file)")
        return None
    try:
        return Config.from_dict(data["config"])
    except (KeyError, TypeError, ValueError, tiledsl.TileDSLError) as e:
        ignored(path, f"its config is not valid ({e})")
        return None


def store(k: CacheKey, config: Config, value: float, unit: str) -> Path:
    path = _path(k)
    write_entry(path, seal({"key": k.text, "config": config.to_dict(), "value": value,
                            "unit": unit}))
    return path
