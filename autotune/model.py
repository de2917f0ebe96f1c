"""Pricing compiled configs with the Triton backend's cost model
(lowering/backends/triton/cost.py): the resource usage of what was actually compiled, from
`k.compile`'s reports (the model runner) or from the kernels Triton's JIT compiled while warming
its cache (the GPU tuner's compile workers), so a prediction costs no extra compile. A GPU tune
uses the predictions to skip timing configs far slower than one it measured (prune.py).
"""

from __future__ import annotations

from typing import Any

from lowering.backends.triton.cost import H100, Resources, predict_us
from tiledsl.runtime.config import Config
from tiledsl.runtime.kernel import TileKernel

__all__ = ["H100", "Resources", "compiled_resources", "from_jit", "from_reports", "predict",
           "predict_us", "warmed_resources"]


def from_reports(reports: list[Any]) -> list[Resources]:
    """From `k.compile`'s reports (lowering/backends/triton/compile.py `Compiled`)."""
    return [Resources(r.num_warps, r.registers, r.shared_bytes + r.static_shared_bytes,
                      r.spill_bytes) for r in reports]


def from_jit(compiled: list[Any]) -> list[Resources]:
    """From Triton's own compiled kernels (what `warmup.warm` returns): registers and spills
    from the cubin, shared memory and warps from Triton's metadata."""
    from lowering.backends.triton.compile import resource_usage
    out = []
    for ck in compiled:
        usage = resource_usage(ck.asm["cubin"])
        out.append(Resources(int(ck.metadata.num_warps), usage["registers"],
                             int(ck.metadata.shared) + usage["static_shared_bytes"],
                             usage["spill_bytes"]))
    return out


def predict(kernel: TileKernel, args: list[Any], config: Config,
            resources: list[Resources], gpu: dict[str, Any] = H100) -> float:
    """Predicted microseconds of `kernel` on `args` (bound values) under `config`."""
    return predict_us(kernel.traced_under(config, *args).for_backend("triton"), config,
                      resources, gpu)


def compiled_resources(kernel: TileKernel, args: list[Any], config: Config,
                       arch: str = "sm_90") -> list[Resources]:
    """`k.compile` (PTX and cubin in tiledsl's cache) and what its kernels use."""
    return from_reports(kernel.compile(*args, config=config, arch=arch))


def warmed_resources(kernel: TileKernel, args: list[Any], config: Config, arch: str = "sm_90",
                     num_sms: int | None = None) -> list[Resources]:
    """Fill Triton's JIT cache for launching `config` on `args`, as `k.warm` does, and what
    the kernels Triton compiled use."""
    from lowering.backends.triton.warmup import DEFAULT_SMS, warm
    from tiledsl.errors import TileDSLError
    values = kernel.bind(tuple(args), {})
    config = kernel.config_space(*values, backend="triton").validate(config)
    fn = kernel.traced_under(config, *values).for_backend("triton")
    try:
        compiled = warm(fn, config, values, arch, num_sms or DEFAULT_SMS)
    except TileDSLError as e:
        raise e.with_context(kernel=kernel.name) from None
    return from_jit(compiled)
