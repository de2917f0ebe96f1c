"""The result cache's tuned configs of one kernel, for `tiledsl show FILE --tuned`.

An entry is keyed on the kernel's source, its IR, the argument signature, the backend, the
device and the tool versions (cache.py); the listing shows every entry for the kernel's source as
it is now, and marks the ones that `k(*args)`, `k.run` and the `tiledsl` subcommands would use
for the given inputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from autotune import cache
from tiledsl.runtime.cache_files import unseal
from tiledsl.runtime.config import Config
from tiledsl.errors import TileDSLError
from tiledsl.runtime.kernel import TileKernel
from tiledsl.runtime.paths import cache_dir


@dataclass(frozen=True)
class Tuned:
    """One entry of the result cache."""

    backend: str
    device: str  # a spatial preset's name, a GPU, or the CPU
    inputs: str  # shapes and dtypes, e.g. "150x300:f32" ("300x150:f32@(1,300)": transposed)
    config: Config
    value: float
    unit: str
    current: bool  # what the kernel uses for the inputs it was listed for


def _inputs(spec: list[list[str]]) -> str:
    def one(s: list[str]) -> str:
        if s and s[0] == "tensor" and len(s) in (3, 4):  # (and the strides of another layout)
            laid = f"@{s[3].replace(' ', '')}" if len(s) == 4 else ""
            return "x".join(s[1].strip("(,)").replace(" ", "").split(",")) + f":{s[2]}{laid}"
        return ":".join(s)
    return " ".join(one(s) for s in spec)


def _spatial_presets() -> dict[str, str]:
    """device fingerprint -> preset name, for the spatial presets."""
    from lowering.backends.spatial.arch import PRESETS
    return {cache.device_fingerprint("spatial", name): name for name in PRESETS}


def _current_key(kernel: TileKernel, args: list[Any], backend: str, arch: Any) -> str | None:
    try:
        return cache.key(kernel, args, backend, arch).text
    except (OSError, ValueError, TileDSLError):
        return None


def tuned_entries(kernel: TileKernel, args: list[Any]) -> list[Tuned]:
    """The cache's entries for `kernel` as its source is now, for any inputs, backend, device
    and tool versions; `current` marks those it uses for `args`."""
    digest, presets, out = kernel.source_digest, _spatial_presets(), []
    folder = cache_dir() / "tuned"
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        data = unseal(path, cache.MAX_BYTES)
        try:
            key = json.loads(data["key"])
            if key["kernel"] != kernel.name or key["source"] != digest:
                continue
            config = Config.from_dict(data["config"])
            backend, device = key["backend"], key["device"]
            arch = presets.get(device) if backend == "spatial" else None
            out.append(Tuned(backend, arch or device, _inputs(key["args"]), config,
                             float(data["value"]), str(data["unit"]),
                             data["key"] == _current_key(kernel, args, backend, arch)))
        except (TypeError, KeyError, ValueError, TileDSLError):
            continue  # no entry, or one another tiledsl wrote (load() warns when it is used)
    return out
