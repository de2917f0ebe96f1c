"""Arrays from any library that speaks DLPack: where the caller's arrays live, zero-copy NumPy
views of CPU arrays, and outputs handed back as the caller's kind of array.

`k(*args)` accepts NumPy arrays, torch tensors, CuPy arrays, JAX arrays, or any array with
`__dlpack__`. All array arguments of one call must come from one library and one device (a
kernel cannot guess where its outputs should live otherwise):

* CPU arrays run on the NumPy backend through zero-copy views (`np.from_dlpack`; bfloat16,
  which NumPy's DLPack import does not take, goes through an int16 view of the same memory), and
  outputs come back through the caller's library without a copy where it allows one;
* GPU arrays (CuPy, torch CUDA, or another library's CUDA arrays viewed as torch tensors) run on
  the Triton backend, which returns the caller's kind of array on the inputs' device.

An output that is one of the arguments (a kernel that writes in place) is returned as the
caller's own object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from tiledsl.errors import ArgumentError

# DLPack device types (dlpack.h): the ones a kernel can run on, by backend.
_CPU_DEVICES = {1, 3}  # kDLCPU, kDLCUDAHost (pinned host memory)
_CUDA_DEVICES = {2, 13}  # kDLCUDA, kDLCUDAManaged
_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal",
                 10: "rocm", 13: "cuda_managed", 14: "oneapi"}


@dataclass(frozen=True)
class Where:
    """The library and device of a call's array arguments."""

    library: str  # "numpy", "torch", "cupy", "jax", or the array type's top-level module
    device: str  # "cpu" or "cuda:N"

    @property
    def gpu(self) -> bool:
        return self.device.startswith("cuda")


def library_of(v: Any) -> str:
    root = type(v).__module__.split(".", 1)[0]
    return "jax" if root in ("jax", "jaxlib") else root


def is_array(v: Any) -> bool:
    """Anything a kernel takes as a tensor argument (not a Python or NumPy scalar)."""
    if isinstance(v, np.ndarray):
        return v.ndim > 0
    return hasattr(v, "__dlpack__") or hasattr(v, "__cuda_array_interface__")


def device_of(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return "cpu"
    if hasattr(v, "__dlpack_device__"):
        try:
            kind, index = (int(x) for x in v.__dlpack_device__())
        except (ValueError, TypeError, BufferError):  # a device DLPack has no code for
            return str(getattr(v, "device", "an unknown device"))  # torch's meta tensors
        if kind in _CPU_DEVICES:
            return "cpu"
        if kind in _CUDA_DEVICES:
            return f"cuda:{index}"
        return f"{_DEVICE_NAMES.get(kind, f'device type {kind}')}:{index}"
    return "cuda:?"  # only __cuda_array_interface__


def where(kernel: str, names: list[str], values: list[Any]) -> Where | None:
    """The one library and device of the array arguments (None if there are none); an
    ArgumentError naming the arguments if they are mixed."""
    seen: dict[tuple[str, str], str] = {}
    for name, v in zip(names, values):
        if is_array(v):
            seen.setdefault((library_of(v), device_of(v)), name)
            if library_of(v) == "torch" and v.is_neg():
                # torch exports such a lazy negation view by DLPack and data_ptr without its
                # sign: the kernel would read the values un-negated
                raise ArgumentError(f"argument '{name}' is a torch tensor with its negative bit "
                                    "set (a lazy negation, e.g. from .conj().imag); call "
                                    ".resolve_neg() on it first", kernel=kernel)
    if not seen:
        return None
    if len(seen) > 1:
        parts = ", ".join(f"'{n}' is a {lib} array on {dev}" for (lib, dev), n in seen.items())
        raise ArgumentError(f"arguments come from different libraries or devices ({parts}); "
                            "pass arrays of one library on one device", kernel=kernel)
    (library, device), name = next(iter(seen.items()))
    if device != "cpu" and not device.startswith("cuda"):
        raise ArgumentError(f"argument '{name}' is a {library} array on {device}; tiledsl runs "
                            "on the CPU (NumPy backend) and on NVIDIA GPUs", kernel=kernel)
    return Where(library, device)


def to_numpy(v: Any, kernel: str, name: str) -> np.ndarray:
    """A zero-copy NumPy view of a CPU array of any DLPack library."""
    if isinstance(v, np.ndarray):
        return v
    library = library_of(v)
    if library == "torch" and v.requires_grad:
        v = v.detach()  # the kernel is not differentiable; torch_op is the autograd-aware path
    try:
        if library == "torch" and str(v.dtype) == "torch.bfloat16":  # (a sparse or nested
            # tensor refuses the int16 view: an ArgumentError, as for its export)
            return np.from_dlpack(v.view(_torch().int16)).view(ml_dtypes.bfloat16)
        if library == "torch" and str(v.dtype) in ("torch.float8_e4m3fn", "torch.float8_e5m2",
                                                   "torch.float8_e8m0fnu"):
            return np.from_dlpack(v.view(_torch().uint8)).view(getattr(ml_dtypes, str(v.dtype)[6:]))
        return np.from_dlpack(v)
    except (RuntimeError, TypeError, BufferError) as e:
        if library != "torch" and "bfloat16" in str(getattr(v, "dtype", "")):
            return np.asarray(v)  # JAX's bfloat16 is ml_dtypes' (a copy)
        raise ArgumentError(f"argument '{name}' ({library} array of dtype "
                            f"{getattr(v, 'dtype', '?')}) cannot be viewed as a NumPy array: {e}",
                            kernel=kernel) from None


def from_numpy(out: np.ndarray, like: Any) -> Any:
    """`out` as an array of `like`'s library, sharing memory where the library allows it."""
    library = library_of(like)
    if library == "numpy":
        return out
    if library == "torch":
        torch = _torch()
        if out.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(out.view(np.int16)).view(torch.bfloat16)
        if out.dtype in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                         ml_dtypes.float8_e8m0fnu):
            return torch.from_numpy(out.view(np.uint8)).view(getattr(torch, out.dtype.name))
        return torch.from_numpy(out)
    if library == "jax":
        import jax.numpy as jnp
        arr = jnp.asarray(out)  # JAX arrays are immutable: JAX owns a copy
        if arr.dtype != out.dtype:  # 64-bit types without jax_enable_x64: never narrow silently
            raise ArgumentError(f"an output is {out.dtype}, which JAX holds only with "
                                f"jax_enable_x64 (it would become {arr.dtype}); enable it, or "
                                "store a 32-bit dtype in the kernel")
        return arr
    xp = getattr(like, "__array_namespace__", None)
    if xp is not None:
        return xp().from_dlpack(out)
    return out


def from_dlpack_like(out: Any, like: Any) -> Any:
    """A GPU output (a torch tensor) as an array of `like`'s library, without a copy."""
    if library_of(like) == "jax":
        import jax.dlpack
        return jax.dlpack.from_dlpack(out)
    xp = getattr(like, "__array_namespace__", None)
    return xp().from_dlpack(out) if xp is not None else out


def _torch() -> Any:
    import torch
    return torch


def _extent(v: Any) -> tuple[int, int] | None:
    """The bytes [first, last) a GPU array's elements span, from __cuda_array_interface__."""
    if library_of(v) == "torch":
        v = v.detach()  # torch refuses the interface of a tensor that requires grad
    try:
        cai = v.__cuda_array_interface__
    except Exception:  # none (a CPU array), or refused
        return None
    shape, itemsize = tuple(cai["shape"]), np.dtype(cai["typestr"]).itemsize
    if any(n == 0 for n in shape):
        return None
    strides = cai.get("strides") or tuple(
        int(np.prod(shape[i + 1:], dtype=np.int64)) * itemsize for i in range(len(shape)))
    ptr = int(cai["data"][0])
    low = ptr + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    high = ptr + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0) + itemsize
    return low, high


def share_memory(a: Any, b: Any) -> bool:
    """Whether two arrays may have elements at the same address: exact for NumPy arrays (within
    a bounded amount of work, else assumed), by the span of their bytes for GPU arrays."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if not np.may_share_memory(a, b):
            return False
        try:
            return bool(np.shares_memory(a, b, max_work=10_000))
        except np.exceptions.TooHardError:
            return True
    x, y = _extent(a), _extent(b)
    return x is not None and y is not None and x[0] < y[1] and y[0] < x[1]


# Up to this many elements, a layout that the sorted-strides rule cannot prove free of overlap
# is checked element by element (8 bytes each); a larger one is assumed to overlap.
EXACT_OVERLAP_ELEMENTS = 1 << 20


def byte_layout(v: Any) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    """An array's shape, strides in bytes and item size (NumPy's and CuPy's strides are in
    bytes, torch's in elements); None for a scalar."""
    strides = getattr(v, "strides", None)
    if strides is not None:
        if not hasattr(v, "shape") or not hasattr(v, "dtype"):
            return None
        return tuple(v.shape), tuple(strides), np.dtype(v.dtype).itemsize
    stride = getattr(v, "stride", None)
    if not callable(stride):
        return None
    size = v.element_size()
    return tuple(v.shape), tuple(s * size for s in stride()), size


def overlaps_itself(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Whether two elements of an array laid out so share a byte (a stride of 0 from
    `broadcast_to`, rows that overlap from `as_strided`). Dimensions sorted by |stride|, each
    stepping past everything the smaller ones span, cannot overlap; a layout that fails that
    rule is checked element by element, and assumed to overlap past EXACT_OVERLAP_ELEMENTS."""
    span = itemsize
    for step, n in sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1):
        if step < span:
            break
        span += (n - 1) * step
    else:
        return False
    if int(np.prod(shape, dtype=np.int64)) > EXACT_OVERLAP_ELEMENTS:
        return True
    offsets = np.zeros(1, dtype=np.int64)
    for n, s in zip(shape, strides):
        offsets = np.add.outer(offsets, np.arange(n, dtype=np.int64) * s).ravel()
    offsets.sort()
    return bool(np.any(np.diff(offsets) < itemsize))


def check_layouts(kernel: str, names: list[str], values: list[Any], written: list[int]) -> None:
    """An argument written in place must not have elements that share memory: which write wins
    would depend on the order the programs run in, and differ between backends."""
    for i in written:
        layout = byte_layout(values[i])
        if layout is not None and overlaps_itself(*layout):
            shape, strides, _ = layout
            raise ArgumentError(
                f"the kernel writes argument '{names[i]}' in place, but its elements share "
                f"memory (strides {strides} in bytes, shape {shape}: a broadcast, expanded or "
                "as_strided view)", kernel=kernel, hint=f"pass a copy of '{names[i]}' "
                "(np.ascontiguousarray) and read the result from it")


def check_overlap(kernel: str, names: list[str], values: list[Any], written: list[int]) -> None:
    """An argument written in place (indices `written`) must not share memory with another
    argument: a program could read elements another has already overwritten, so the result
    would depend on the order the programs run in and differ between backends."""
    for i in written:
        for j, other in enumerate(values):
            if j != i and is_array(other) and share_memory(values[i], other):
                raise ArgumentError(
                    f"arguments '{names[i]}' and '{names[j]}' share memory, and the kernel "
                    f"writes '{names[i]}' in place: programs could read elements others "
                    "have already overwritten", kernel=kernel,
                    hint=f"pass a copy of '{names[j]}' (or of '{names[i]}')")
