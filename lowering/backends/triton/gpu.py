"""`backend="triton"`: the generated module launched on an NVIDIA GPU.

Takes torch CUDA tensors (launched on torch's current stream) and CuPy arrays (viewed as torch
tensors through DLPack and launched on CuPy's current stream); outputs come back as the caller's
kind of array, on the inputs' device.
"""

from __future__ import annotations

import functools
import re
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator

from lowering.backends.triton import space as triton_space
from lowering.backends.triton.codegen import generate_cached
from lowering.backends.triton.compile import Compiled, compile_module
from lowering.backends.triton.interpret import scalar, strides_of
from lowering.backends.triton.loader import load
from lowering.backends.triton.package import export_plan
from lowering.backends.triton.targets import array_strides
from lowering.backends.triton.warmup import DEFAULT_SMS
from lowering.pipeline import lower_for_triton
from tiledsl.runtime import registry
from tiledsl.runtime.config import Config, ConfigSpace
from tiledsl.errors import ArgumentError, BackendError
from tiledsl.ir.core import Function
from tiledsl.ir.types import TensorType


def is_cupy(a: Any) -> bool:
    return type(a).__module__.startswith("cupy")


def is_torch(a: Any) -> bool:
    return type(a).__module__.startswith("torch")


def gpu_torch() -> Any:
    """torch with a usable CUDA device, or a BackendError that says what is missing."""
    try:
        import torch
    except ImportError:
        raise BackendError("backend 'triton' launches through torch: pip install torch") from None
    if not torch.cuda.is_available():
        raise BackendError("backend 'triton' needs an NVIDIA GPU and driver, and none is "
                           "available; use backend='numpy' or 'triton-interpret' on the CPU")
    return torch


class TritonBackend:
    name = "triton"

    def extend_space(self, space: ConfigSpace, fn: Function, arch: str | None = None,
                     **_: Any) -> ConfigSpace:
        """The knobs, constraints and default for `arch` (default: this machine's GPU, else
        sm_90): an A100's shared memory and model differ from an H100's."""
        arch = arch or local_arch()
        if not isinstance(arch, str) or re.fullmatch(r"sm_\d+", arch) is None:
            raise BackendError(f"unknown architecture {arch!r}: expected sm_<capability>, "
                               "such as sm_80 or sm_90")
        return triton_space.extend(space, fn, arch)

    def lower(self, fn: Function) -> Function:
        """The backend's own passes (lowering.pipeline.TRITON) on a copy of `fn`."""
        return lower_for_triton(fn)

    def compile(self, fn: Function, config: Config, args: list[Any], arch: str) -> list[Compiled]:
        """PTX and cubin for `arch`, with resource usage (works without a GPU)."""
        return compile_module(generate_cached(fn, config, array_strides(fn, args)), arch)

    def warm(self, fn: Function, config: Config, args: list[Any], arch: str,
             num_sms: int | None = None) -> int:
        """Compile into Triton's JIT cache what launching on `args` would compile on `arch`
        (works without a GPU; see warmup.py). Returns the number of kernels."""
        from lowering.backends.triton.warmup import warm
        return len(warm(fn, config, args, arch, DEFAULT_SMS if num_sms is None else num_sms))

    def export_plan(self, fn: Function, config: Config, args: list[Any],
                    arch: str) -> dict[str, Any]:
        """What an ahead-of-time package needs (see package.export_plan): the manifest's
        arguments, buffers, outputs and launches, and the files to copy (works without a GPU)."""
        return export_plan(fn, config, args, arch)

    def run(self, fn: Function, args: list[Any], config: Config, **_: Any) -> list[Any]:
        tensors = [(v, a) for v, a in zip(fn.args, args) if isinstance(v.type, TensorType)]
        for v, a in tensors:
            if not (is_cupy(a) or (is_torch(a) and a.is_cuda)):
                raise BackendError(f"backend 'triton' runs on GPU arrays (CuPy or torch CUDA); "
                                   f"argument '{v.hint}' is a {type(a).__module__}."
                                   f"{type(a).__qualname__}",
                                   hint="on the CPU, backend='triton-interpret' runs the "
                                        "generated Triton code in Triton's interpreter "
                                        "(no TRITON_INTERPRET needed)")
        torch = gpu_torch()
        cupy_in = any(is_cupy(a) for _, a in tensors)
        if cupy_in and not all(is_cupy(a) for _, a in tensors):
            raise BackendError("mixing CuPy arrays and torch tensors in one call")
        targs = [_from_cupy(torch, v, a) if is_cupy(a) else a if isinstance(v.type, TensorType)
                 else scalar(a) for v, a in zip(fn.args, args)]
        devices = {t.device for v, t in zip(fn.args, targs) if isinstance(v.type, TensorType)}
        if len(devices) > 1:
            raise BackendError(f"arguments live on different devices: {sorted(map(str, devices))}")
        device = devices.pop() if devices else torch.device("cuda")
        if not cupy_in:  # torch tensors: what the dispatch cache calls again (prepare)
            return self.prepare(fn, args, config)(args)
        stream = torch.cuda.stream(_cupy_stream(torch, device))
        module = load(generate_cached(fn, config, strides_of(fn, targs)).source, interpret=False)

        def dtype(name: str) -> Any:
            return torch.bool if name == "bool" else getattr(torch, name)

        by_tensor = {id(t): a for t, a in zip(targs, args)}
        with torch.cuda.device(device), stream, _triton_errors(fn.name):
            outs = module.launch(
                *targs, empty=lambda s, d: torch.empty(s, dtype=dtype(d), device=device),
                full=lambda s, x, d: torch.full(s, x, dtype=dtype(d), device=device),
                num_sms=torch.cuda.get_device_properties(device).multi_processor_count)
            # handed to CuPy on the stream that wrote them (torch's current one in here)
            return [by_tensor[id(o)] if id(o) in by_tensor else _to_cupy(o) for o in outs]

    def prepare(self, fn: Function, args: list[Any], config: Config) -> Any:
        """`run` on arguments of this layout, with the work that depends on the layout alone
        done once: `k(*args)`'s dispatch cache calls the result on later torch CUDA tensors of
        the same dtypes, shapes, strides and device (tiledsl/runtime/dispatch.py). None for CuPy
        arrays, whose stream is read at each call."""
        if any(is_cupy(a) for a in args):
            return None
        from triton.errors import TritonError
        torch = gpu_torch()
        tensor = [isinstance(v.type, TensorType) for v in fn.args]
        targs = [a if t else scalar(a) for a, t in zip(args, tensor)]
        device = next((a.device for a, t in zip(args, tensor) if t), torch.device("cuda"))
        module = load(generate_cached(fn, config, strides_of(fn, targs)).source, interpret=False)
        index, num_sms = device.index, _num_sms(torch, device)
        torch_dtypes = {d: torch.bool if d == "bool" else getattr(torch, d)
                        for d in ("bool", "float16", "bfloat16", "float32", "float64", "int8",
                                  "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                  "uint64", "float8_e4m3fn", "float8_e5m2")}
        torch_dtypes["float8_e8m0fnu"] = torch.uint8  # (its bits: tiledsl/lang/fp8.py)
        e8m0 = [i for i, r in enumerate(fn.outputs) if r.type.dtype.short == "f8e8m0"]

        def empty(shape: Any, d: str) -> Any:
            return torch.empty(shape, dtype=torch_dtypes[d], device=device)

        def full(shape: Any, x: Any, d: str) -> Any:
            return torch.full(shape, x, dtype=torch_dtypes[d], device=device)

        def launch(values: list[Any]) -> list[Any]:
            targs = [(bits(a) if t else scalar(a)) for a, t in zip(values, tensor)]
            if torch.cuda.current_device() == index:  # Triton launches on the current device
                outs = list(module.launch(*targs, empty=empty, full=full, num_sms=num_sms))
            else:
                with torch.cuda.device(device):
                    outs = list(module.launch(*targs, empty=empty, full=full, num_sms=num_sms))
            for i in e8m0:  # float8_e8m0fnu outputs: their bits back as that dtype
                outs[i] = outs[i].view(torch.float8_e8m0fnu)
            return outs

        def bits(a: Any) -> Any:  # a float8_e8m0fnu tensor as Triton takes it: its bits
            return a.view(torch.uint8) if a.dtype == torch.float8_e8m0fnu else a

        def checked(values: list[Any]) -> list[Any]:
            try:  # as _triton_errors, without a context manager's cost on every call
                return launch(values)
            except TritonError as e:
                raise BackendError(f"Triton could not compile or launch {fn.name} on this "
                                   f"GPU: {type(e).__name__}: {e}") from e
        return checked

    def launch_traced(self, fn: Function, args: list[Any], config: Config, wrap: Any) -> list[Any]:
        """Launch through `wrap` (torch.library.wrap_triton) on torch tensors, real or fake:
        the body of a `torch.library.triton_op`, which torch.compile traces into. Streams are
        torch's business there (Triton launches on its current one); an eager call launches on
        the tensors' device."""
        import torch

        if config.get("tma", False):  # Inductor (torch 2.11) takes no host TensorDescriptor
            config = config.replace(tma=False)  # arguments: "KeyError: 'a_desc'" on an H200
        # sizes torch.compile made symbolic stay symbolic (scalar() would make a SymInt a float)
        symbolic = (torch.SymInt, torch.SymFloat, torch.SymBool)
        targs = [a if isinstance(v.type, TensorType) or isinstance(a, symbolic) else scalar(a)
                 for v, a in zip(fn.args, args)]
        device = next((t.device for v, t in zip(fn.args, targs) if isinstance(v.type, TensorType)),
                      torch.device("cuda"))
        module = load(generate_cached(fn, config, strides_of(fn, targs)).source, interpret=False)

        def dtype(name: str) -> Any:
            return torch.bool if name == "bool" else getattr(torch, name)

        # an eager call launches right here, on the current device: make it the tensors' one
        on_device: Any = torch.cuda.device(device) if torch.cuda.is_available() else nullcontext()
        with on_device, _triton_errors(fn.name):
            outs = module.launch(
                *targs, empty=lambda s, d: torch.empty(s, dtype=dtype(d), device=device),
                full=lambda s, x, d: torch.full(s, x, dtype=dtype(d), device=device),
                num_sms=_num_sms(torch, device), wrap=wrap)
        return list(outs)


def _cupy_stream(torch: Any, device: Any) -> Any:
    """CuPy's current stream on `device` (CuPy keeps one per device) as a torch stream."""
    import cupy
    ptr = cupy.cuda.get_current_stream(device.index).ptr
    if ptr == 0:  # the legacy default stream, which is torch's default stream too; an
        # ExternalStream of 0 would be a new stream from torch's pool, unordered with it
        return torch.cuda.default_stream(device)
    return torch.cuda.ExternalStream(ptr, device=device)


@contextmanager
def _triton_errors(kernel: str) -> Iterator[None]:
    """Triton's errors as BackendErrors: a config that needs more shared memory or threads than
    this GPU has (OutOfResources), or a kernel Triton fails to compile."""
    from triton.errors import TritonError
    try:
        yield
    except TritonError as e:
        raise BackendError(f"Triton could not compile or launch {kernel} on this GPU: "
                           f"{type(e).__name__}: {e}") from e


def _from_cupy(torch: Any, v: Any, a: Any) -> Any:
    """A torch view of CuPy array `a` (argument `v`) through DLPack."""
    try:
        return torch.from_dlpack(a)
    except Exception as e:  # e.g. a dtype or layout torch cannot view
        raise ArgumentError(f"argument '{v.hint}' (a CuPy array of dtype {a.dtype}, strides "
                            f"{a.strides}) cannot be viewed as a torch tensor: {e}") from e


def _to_cupy(out: Any) -> Any:
    """An output (a torch CUDA tensor) as a CuPy array, through DLPack."""
    import cupy
    try:
        return cupy.from_dlpack(out)
    except Exception as e:  # bfloat16 needs a CuPy with ml_dtypes support
        raise BackendError(f"CuPy cannot take an output of dtype {out.dtype} ({e}); pass torch "
                           "tensors, or use a CuPy that supports this dtype") from e


def device_target(device: int | None = None) -> tuple[str, int]:
    """The current (or given) GPU as ("sm_<capability>", SM count): what `warm` compiles for
    so that launches on this GPU find their kernels compiled."""
    torch = gpu_torch()
    index = torch.cuda.current_device() if device is None else device
    major, minor = torch.cuda.get_device_capability(index)
    return f"sm_{major}{minor}", _num_sms(torch, index)


@functools.cache
def local_arch() -> str:
    """This machine's GPU as "sm_<capability>" (the first one), or sm_90 without one."""
    try:
        import torch
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability(0)
            return f"sm_{major}{minor}"
    except ImportError:
        pass
    return "sm_90"


def _num_sms(torch: Any, device: Any) -> int:
    """The device's SM count (an H100's when there is no device: fake tensors)."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(device).multi_processor_count
    return DEFAULT_SMS


registry.register_backend(TritonBackend())
