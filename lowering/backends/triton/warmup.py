"""Filling Triton's JIT cache for a GPU launch ahead of time, without a GPU.

`backend="triton"` launches the generated module's `@triton.jit` kernels, and Triton compiles
each kernel the first time it is launched with a new specialization (about a second). `warm`
runs the same launch code with `kernel.warmup(...)` in place of each launch:

- on meta tensors (no memory) with the arguments' shapes, dtypes and strides, so Triton
  specializes exactly as it will for the real arrays (pointers 16-byte aligned, as every GPU
  allocation is);
- under a stand-in driver that names the target GPU (`GPUTarget("cuda", capability, 32)`, what
  Triton's CUDA driver reports), so no GPU, driver or CUDA context is needed.

Triton stores what it compiled in its on-disk cache (`TRITON_CACHE_DIR`, by default
`~/.triton/cache`), keyed by the source, the specialization, the options and the target; the
real launch later finds it there. The tuner's compile workers call this, so the measuring process
finds its candidates compiled; a build step can call it to ship a warm cache.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from lowering.backends.triton.codegen import generate_cached
from lowering.backends.triton.compile import ARCHS
from lowering.backends.triton.interpret import _torch, _torch_dtype, scalar, strides_of, to_torch
from lowering.backends.triton.loader import load
from tiledsl.runtime.config import Config
from tiledsl.errors import BackendError
from tiledsl.ir.core import Function
from tiledsl.ir.types import TensorType

# SMs assumed when none is given (an H100 SXM's): persistent kernels launch one program each.
DEFAULT_SMS = 132


class _TargetDriver:
    """What Triton's JIT asks its driver before it compiles: the device, the device's stream and
    the compile target. Nothing is launched under it."""

    def __init__(self, capability: int) -> None:
        from triton.backends.compiler import GPUTarget
        self.target = GPUTarget("cuda", capability, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target


@contextmanager
def _targeting(capability: int) -> Iterator[None]:
    from triton.runtime.driver import driver
    before = driver._active  # not `driver.active`: that would look for a GPU driver
    driver.set_active(_TargetDriver(capability))
    try:
        yield
    finally:
        driver._active = before


class _Warmup:
    """Stands in for `kernel[grid]` in the generated `launch`: compiles, never launches. The
    kernel's per-device binders are swapped out meanwhile, so a later real launch in this
    process does not reuse a binder made for the stand-in target."""

    def __init__(self, kernel: Any, compiled: list[Any]) -> None:
        self.kernel = kernel
        self.compiled = compiled

    def __getitem__(self, grid: Any) -> Any:
        def compile_only(*args: Any, **kwargs: Any) -> None:
            saved = self.kernel.device_caches
            self.kernel.device_caches = defaultdict(self.kernel.create_binder)
            try:
                self.compiled.append(self.kernel.warmup(*args, grid=grid, **kwargs))
            finally:
                self.kernel.device_caches = saved
        return compile_only


def _meta(torch: Any, a: Any) -> Any:
    """A meta tensor laid out as the launch will see `a`: a host array (NumPy, torch CPU) as its
    GPU copy (`to_torch(a).cuda()` keeps dense strides, as `empty_like` does), a GPU array as it
    is (CuPy's and other libraries' through DLPack, which keeps their strides)."""
    t = to_torch(a) if isinstance(a, np.ndarray) else a
    if isinstance(t, torch.Tensor):
        if t.is_cuda:
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        return torch.empty_like(t, device="meta")
    shape = tuple(int(n) for n in t.shape)
    itemsize = np.dtype(t.dtype).itemsize
    strides = tuple(int(s) // itemsize for s in t.strides) if hasattr(t, "strides") else \
        tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))  # JAX: always dense
    return torch.empty_strided(shape, strides, dtype=_torch_dtype(np.dtype(t.dtype).name),
                               device="meta")


def warm(fn: Function, config: Config, args: list[Any], arch: str = "sm_90",
         num_sms: int = DEFAULT_SMS) -> list[Any]:
    """Compile every kernel that launching `fn` under `config` on `args` (NumPy arrays or torch
    tensors, and scalars) would compile on a GPU of `arch` with `num_sms` SMs, into Triton's
    cache. Returns Triton's compiled kernels, one per launch."""
    match = re.fullmatch(r"sm_(\d+)", arch) if isinstance(arch, str) else None
    if match is None:  # any capability: a GPU tune warms for the GPU it finds (sm_100, ...)
        raise BackendError(f"unknown architecture {arch!r}: expected sm_<capability>, such as "
                           f"{', '.join(sorted(ARCHS))}")
    if not isinstance(num_sms, int) or isinstance(num_sms, bool) or num_sms < 1:
        raise BackendError(f"num_sms is the GPU's number of SMs (an int >= 1), got {num_sms!r}")
    torch = _torch()
    targs = [_meta(torch, a) if isinstance(v.type, TensorType) else scalar(a)
             for v, a in zip(fn.args, args)]
    module = load(generate_cached(fn, config, strides_of(fn, targs)).source, interpret=False)
    compiled: list[Any] = []

    def meta(shape: Any, dtype: str) -> Any:
        return torch.empty(shape, dtype=_torch_dtype(dtype), device="meta")

    with _targeting(int(match.group(1))):
        try:
            module.launch(*targs, empty=meta, full=lambda shape, _, dtype: meta(shape, dtype),
                          num_sms=num_sms, wrap=lambda kernel: _Warmup(kernel, compiled))
        except BackendError:
            raise
        except Exception as e:  # Triton's compiler errors carry its own source excerpt
            raise BackendError(f"Triton failed to compile {fn.name} for {arch}: {e}") from e
    return compiled
