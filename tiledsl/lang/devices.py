"""The kernel's device, as a wrapper asks about it: `x.device`, `torch.device(x.device)`,
`torch.cuda.device(...)`, `torch.cuda.current_device()`, `torch.cuda.get_device_properties(...)`
and `torch.cuda.get_device_capability()` in host code (SUBSTITUTES, frontend/td_names.py);
`torch.cuda.is_available()` in the kernel's code (not tiledsl's own) is True.

A kernel is traced once for whatever runs it, so the answers are a GPU's: `x.device.type` is
"cuda" (Triton's, whichever backend runs), and the properties are those of the CUDA device
torch sees when there is one, else an H100 SXM's (132 SMs, compute capability 9.0), the GPU
tiledsl's defaults are tuned for. A persistent kernel's grid (`NUM_SMS =
torch.cuda.get_device_properties("cuda").multi_processor_count`) is then sized for that GPU;
its results do not depend on it.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager, nullcontext
from types import SimpleNamespace
from typing import Any, Callable, Iterator

from tiledsl.frontend.td_names import SUBSTITUTES, of_torch
from tiledsl.frontend.tracer import WHILE_TRACING
from tiledsl.frontend.values import Tensor, TileValue

H100 = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
                       total_memory=85_520_809_984, L2_cache_size=52_428_800, warp_size=32,
                       regs_per_multiprocessor=65_536, max_threads_per_multi_processor=2048,
                       gcnArchName="NVIDIA H100 80GB HBM3", is_integrated=False,
                       is_multi_gpu_board=False)


class Device:
    """What `x.device` gives in a kernel: the device of the inputs, where outputs are made
    (`device=` is accepted everywhere a tensor is made, and changes nothing); a context
    manager that changes nothing (Liger's `with torch_device_fn.device(x.device):`)."""

    type = "cuda"
    index = 0

    def __repr__(self) -> str:
        return "<the kernel's device>"

    def __str__(self) -> str:  # (`assert "cuda" in str(x.device)`, as torch spells it)
        return "cuda:0"

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *_: Any) -> None:
        return None


DEVICE = Device()


def _properties(*_: Any, **__: Any) -> Any:
    torch = sys.modules["torch"]
    return torch.cuda.get_device_properties(0) if torch.cuda.is_available() else H100


def _capability(*_: Any, **__: Any) -> tuple[int, int]:
    p = _properties()
    return (p.major, p.minor)


def _device_of(fn: Callable[..., Any]) -> Callable[..., Any]:
    """torch's `device(...)`: the kernel's device where it is given the kernel's device (or,
    for `torch.cuda.device`, any index or CUDA device: FlagGems' `torch.cuda.device(
    x.device.index)`, `torch.cuda.device(torch.device("cuda"))`)."""
    cuda = getattr(fn, "__module__", "") == "torch.cuda"

    def call(*args: Any, **kwargs: Any) -> Any:
        given = (*args, *kwargs.values())
        if any(isinstance(a, Device) for a in given) or cuda and all(
                a is None or type(a) is int or getattr(a, "type", None) == "cuda" or
                isinstance(a, str) and a.startswith("cuda") for a in given):
            return DEVICE
        return fn(*args, **kwargs)
    return call


_QUERIES: dict[str, Callable[..., Any]] = {
    "get_device_properties": _properties, "get_device_capability": _capability,
    "current_device": lambda: 0}


def device_call(fn: Any) -> Any:
    """What a kernel calls for torch's device functions, else None."""
    module, name = getattr(fn, "__module__", None) or "", getattr(fn, "__name__", None)
    if name == "device" and of_torch(fn):
        return _device_of(fn)
    if name == "autocast" and of_torch(fn):  # `with torch.autocast("cuda",
        return lambda *_, **__: nullcontext()  # dtype=x.dtype)` (attorch): kernels set dtypes
    if name == "_DeviceGuard" and of_torch(fn):  # `with torch.cuda.
        return lambda *_, **__: nullcontext()  # _DeviceGuard(x.device.index)` (FlagGems')
    if module == "torch.cuda" and name == "is_available" and \
            getattr(sys.modules["torch"].cuda, name, None) is fn:  # the kernel's device is a
        return lambda: True  # GPU (Liger's `infer_device()` picks its CUDA branch)
    if module == "torch.cuda" and name in _QUERIES and \
            getattr(sys.modules["torch"].cuda, name, None) is fn:
        return _QUERIES[name]
    return None


SUBSTITUTES.append(device_call)


@contextmanager
def answering() -> Iterator[None]:
    """While a kernel traces on a machine without a GPU: torch's device queries and Triton's
    active driver answer as in host code, also where the rewrite does not reach (a
    `@triton.heuristics` lambda, attorch's `lambda _: allow_tf32()`; a library's helper, its
    `is_hip()` asking `triton.runtime.driver.active.get_current_target()`)."""
    torch, triton = sys.modules.get("torch"), sys.modules.get("triton")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    patched = {} if cuda is None or cuda.is_available() else \
        {name: getattr(cuda, name) for name in _QUERIES if hasattr(cuda, name)}
    for name in patched:
        setattr(cuda, name, _QUERIES[name])
    driver = _no_driver(triton)
    try:
        yield
    finally:
        for name, fn in patched.items():
            setattr(cuda, name, fn)
        if driver is not None:
            driver._active = None


def _no_driver(triton: Any) -> Any:
    """Triton's DriverConfig, given a stand-in for its active driver if none can start here
    (no GPU): else None."""
    config = getattr(getattr(triton, "runtime", None), "driver", None)  # (the instance)
    config = getattr(config, "driver", config)  # (the module, where it is not re-exported)
    if config is None or getattr(config, "_active", True) is not None:
        return None
    try:
        config.active  # a GPU's driver starts, and answers itself
        return None
    except RuntimeError:  # "0 active drivers"
        config._active = _Driver()
        return config


class _Driver:
    """Triton's active driver as a wrapper asks it, for the GPU `_properties` describes."""

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget
        major, minor = _capability()
        return GPUTarget("cuda", major * 10 + minor, 32)

    def get_current_device(self) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        return DEVICE

    @property
    def utils(self) -> Any:
        p = _properties()
        props = {"multiprocessor_count": p.multi_processor_count, "warpSize": p.warp_size,
                 "max_num_regs": p.regs_per_multiprocessor, "max_shared_mem": 232_448}
        return SimpleNamespace(get_device_properties=lambda *_: props)


WHILE_TRACING.append(answering)
Tensor.device = property(lambda self: DEVICE)  # type: ignore[attr-defined]
# a tile value's too: torch code in a kernel makes tiles on it (Helion's flex attention's
# mask_mod, `torch.zeros_like(b, device=b.device)`)
TileValue.device = property(lambda self: DEVICE)  # type: ignore[attr-defined]
