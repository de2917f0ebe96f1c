"""Load and launch an ahead-of-time kernel package (written by `TileKernel.export`).

A package is a directory: manifest.json (schema: manifest.schema.json next to this file), one
cubin and PTX per generated kernel, the readable Triton module, the spatial dataflow config, and
package.sha256, the digest that load checks the rest against (tiledsl/interop/package_check.py).
The manifest spells out everything the generated `launch()` does (allocations, grids, parameters
in the cubin's order), so this module launches the cubins with CuPy alone: no Triton, no torch,
no tracing, no compiler. That is the point of a package: a deployment needs a GPU, a driver and
CuPy, and nothing that tiledsl compiles with.

The cubin is specialized: shapes, dtypes and strides are literals in its code and pointers are
assumed 16-byte aligned. So every argument is checked against the manifest before anything
touches the GPU, and a mismatch is an ArgumentError that says what was expected.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tiledsl.interop.arrays import check_overlap
from tiledsl.errors import ArgumentError, BackendError
from tiledsl.runtime import draws
from tiledsl.runtime.returns import pack
from tiledsl.interop.package_check import (  # noqa: F401 (validate_manifest, schema: this module's API)
    MANIFEST, read_package, schema, validate_manifest)

FORMAT = "tiledsl-aot"
FORMAT_VERSION = 3  # 2: package.sha256, pointer parameters' dtype and extent, bounds; 3: stride
DEFAULT_SHARED_BYTES = 48 * 1024  # beyond this a kernel must opt in to more dynamic smem
_CPU_DLPACK_DEVICES = {1, 3}  # kDLCPU, kDLCUDAHost
_INT_RANGE = {n: (int(np.iinfo(n).min), int(np.iinfo(n).max)) for n in (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")}


def load(path: str | Path) -> LoadedKernel:
    """The kernel package in directory `path`, ready to call on GPU arrays (CuPy, or anything
    exposing DLPack / `__cuda_array_interface__` on a CUDA device). Checks the package now
    (tiledsl/interop/package_check.py: its files, schema, digest, and the launch plan against the PTX and
    cubin), so a broken or modified package fails here rather than on the GPU."""
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentError(f"td.load(path): the path is a package's directory, got "
                            f"{type(path).__name__} {path!r}")
    root = Path(path)
    if not root.is_dir():
        raise BackendError(f"{root} is not a tiledsl kernel package (not a directory); write one "
                           "with kernel.export(path, *args) or `tiledsl export FILE --out DIR`")
    manifest = read_package(root, FORMAT, FORMAT_VERSION)
    return LoadedKernel(root, manifest)


@dataclass(frozen=True)
class _Array:
    """What the checks need to know about a GPU array, read without touching the GPU."""

    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...] | None  # elements; None when the array does not say


class LoadedKernel:
    """A kernel from an ahead-of-time package: call it like the kernel it was exported from,
    on GPU arrays with exactly the shapes, dtypes and strides it was exported for. Outputs are
    CuPy arrays (an output that is an argument, written in place, returns that argument)."""

    def __init__(self, root: Path, manifest: dict[str, Any]) -> None:
        self.path = root
        self.manifest = manifest
        self.name: str = manifest["kernel"]
        self.arch: str = manifest["arch"]
        self._functions: dict[tuple[int, int], Any] = {}  # (device, launch) -> CuPy function

    def __repr__(self) -> str:
        args = ", ".join(_describe_arg(a) for a in self.manifest["arguments"])
        outs = ", ".join(_type(o) for o in self.manifest["outputs"]) or "None"
        n = len(self.manifest["launches"])
        return (f"<aot kernel {self.name}({args}) -> {outs} for {self.arch}, "
                f"{n} launch{'es' if n != 1 else ''}, from {self.path}>")

    # ---- checking arguments ------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict[str, Any]) -> list[Any]:
        """The arguments in parameter order (keywords by parameter name), all of them checked
        against the manifest; raises ArgumentError before any GPU work."""
        params = self.manifest["arguments"]
        names = [p["name"] for p in params]
        if len(args) > len(params):
            raise ArgumentError(f"takes {len(params)} arguments ({', '.join(names)}), got "
                                f"{len(args) + len(kwargs)}", kernel=self.name)
        values: dict[str, Any] = dict(zip(names, args))
        for key, v in kwargs.items():
            if key not in names:
                raise ArgumentError(f"got an unexpected keyword argument {key!r} (parameters: "
                                    f"{', '.join(names)})", kernel=self.name)
            if key in values:
                raise ArgumentError(f"got argument {key!r} twice", kernel=self.name)
            values[key] = v
        missing = [n for n in names if n not in values]
        if missing:
            raise ArgumentError(f"takes {len(params)} arguments ({', '.join(names)}), got "
                                f"{len(values)}: missing {', '.join(missing)}", kernel=self.name)
        out = [values[n] for n in names]
        for p, v in zip(params, out):
            if p["kind"] == "tensor":
                self._check_tensor(p, v)
            else:
                self._check_scalar(p, v)
        return out

    def _fail(self, p: dict[str, Any], message: str) -> ArgumentError:
        return ArgumentError(f"argument '{p['name']}' {message}", kernel=self.name)

    def _check_tensor(self, p: dict[str, Any], v: Any) -> None:
        want = _describe_arg(p)
        if isinstance(v, np.ndarray):
            raise self._fail(p, f"is a NumPy array; this package runs on an NVIDIA GPU through "
                                f"CuPy: pass a GPU array ({want}), e.g. cupy.asarray(x) "
                                "(pip install cupy-cuda13x, or tiledsl's `gpu` extra)")
        info = _array_info(v)
        if info is None:
            raise self._fail(p, f"is a {_type_name(v)}; expected a GPU array {want} (CuPy, or "
                                "any array with __dlpack__ or __cuda_array_interface__ on a CUDA "
                                "device)")
        if type(v).__module__.split(".")[0] == "torch" and v.is_neg():
            raise self._fail(p, "is a torch tensor with its negative bit set (a lazy negation, "
                                "which DLPack exports without its sign); call .resolve_neg() "
                                "on it first")
        if _on_cpu(v):
            raise self._fail(p, f"is a {_type_name(v)} in host memory; this package runs on an "
                                f"NVIDIA GPU through CuPy: pass a GPU array {want}")
        shape = tuple(p["shape"])
        if info.shape != shape:
            raise self._fail(p, f"has shape {info.shape}; the package was compiled for shape "
                                f"{shape} ({want}); export again for other shapes")
        if info.dtype != p["dtype"]:
            raise self._fail(p, f"has dtype {info.dtype}; the package was compiled for "
                                f"{p['dtype']} ({want})")
        strides = tuple(p["strides"])
        if info.strides is not None and not _same_strides(info.strides, strides, shape):
            raise self._fail(p, f"has strides {info.strides} (in elements); the package was "
                                f"compiled for strides {strides}: pass an array with that "
                                "layout (e.g. cupy.ascontiguousarray(x)) or export for this one")

    def _check_layout(self, p: dict[str, Any], a: Any) -> None:
        """What only the CuPy view tells for sure: the strides (an array that only spoke DLPack
        could not say) and the alignment of the data pointer the cubin assumes."""
        got = tuple(int(s) // a.itemsize for s in a.strides)
        if not _same_strides(got, tuple(p["strides"]), tuple(p["shape"])):
            raise self._fail(p, f"has strides {got} (in elements); the package was compiled for "
                                f"strides {tuple(p['strides'])}")
        if a.data.ptr % p["align"]:
            raise self._fail(p, f"starts at an address not aligned to {p['align']} bytes, which "
                                "the compiled code assumes (pass a fresh array, not an offset "
                                "view)")

    def _check_scalar(self, p: dict[str, Any], v: Any) -> None:
        dtype = p["dtype"]
        if isinstance(v, np.ndarray) and v.ndim == 0:
            v = v[()]
        if dtype == "bool":
            ok = isinstance(v, (bool, np.bool_))
            kind = "a bool"
        elif dtype in _INT_RANGE:
            ok = isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
            kind = "an integer"
            if ok and not _INT_RANGE[dtype][0] <= int(v) <= _INT_RANGE[dtype][1]:
                raise self._fail(p, f"is {v}, out of the range of {dtype}")
        else:
            ok = isinstance(v, (int, float, np.integer, np.floating)) \
                and not isinstance(v, (bool, np.bool_))
            kind = "a real number"
        if not ok:
            raise self._fail(p, f"expects {kind} ({dtype}), got {_type_name(v)} {v!r}")

    # ---- launching ---------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Check the arguments, allocate the outputs and launch every kernel of the package on
        CuPy's current stream; returns what the kernel returns."""
        values = self.bind(args, kwargs)
        cupy = _cupy()
        params = self.manifest["arguments"]
        arrays = [_to_cupy(cupy, v) if p["kind"] == "tensor" else v
                  for p, v in zip(params, values)]
        device = self._device(cupy, params, arrays)
        for p, a in zip(params, arrays):
            if p["kind"] == "tensor":
                self._check_layout(p, a)
        check_overlap(self.name, [p["name"] for p in params], arrays,
                      [i for i, p in enumerate(params) if p.get("written")])
        with cupy.cuda.Device(device):
            by_name = {p["name"]: a for p, a in zip(params, arrays)}
            buffers = {b["name"]: _allocate(cupy, b, by_name) for b in self.manifest["buffers"]}
            sms = cupy.cuda.Device(device).attributes["MultiProcessorCount"]
            for i, launch in enumerate(self.manifest["launches"]):
                self._launch(cupy, device, i, launch, arrays, buffers, sms)
        outs = [values[o["index"]] if "arg" in o else buffers[o["buffer"]]
                for o in self.manifest["outputs"]]
        return pack(outs, self.manifest["returns"])

    def _device(self, cupy: Any, params: list[dict[str, Any]], arrays: list[Any]) -> int:
        """The one device the tensor arguments live on, checked against the package's arch."""
        devices = {a.device.id for p, a in zip(params, arrays) if p["kind"] == "tensor"}
        if len(devices) > 1:
            raise ArgumentError(f"arguments live on different devices {sorted(devices)}",
                                kernel=self.name)
        device = devices.pop() if devices else cupy.cuda.Device().id
        cc = str(cupy.cuda.Device(device).compute_capability)  # e.g. "90"
        if not _runs_on(self.arch, cc):
            raise BackendError(f"this package holds cubins for {self.arch}; device {device} is "
                               f"sm_{cc}: export it again with arch='sm_{cc}'", kernel=self.name)
        return device

    def _launch(self, cupy: Any, device: int, i: int, launch: dict[str, Any], arrays: list[Any],
                buffers: dict[str, Any], sms: int) -> None:
        key = (device, i)
        if key not in self._functions:
            module = cupy.RawModule(path=str(self.path / launch["cubin"]))
            fn = module.get_function(launch["kernel"])
            if launch["shared_bytes"] > DEFAULT_SHARED_BYTES:
                fn.max_dynamic_shared_size_bytes = launch["shared_bytes"]
            self._functions[key] = fn
        programs = launch["grid"]["programs"]
        grid = min(programs, sms) if launch["grid"]["persistent"] else programs
        params = [_param(p, arrays, buffers, sms) for p in launch["params"]]
        self._functions[key]((grid,), (launch["threads"],), tuple(params),
                             shared_mem=launch["shared_bytes"])


def _param(p: dict[str, Any], arrays: list[Any], buffers: dict[str, Any], sms: int) -> Any:
    """One kernel parameter as CuPy passes it: arrays as pointers, scalars as NumPy scalars of
    the width the cubin reads."""
    kind = p["kind"]
    if kind == "arg":
        return arrays[p["index"]]
    if kind == "buffer":
        return buffers[p["buffer"]]
    if kind == "scalar":
        return np.dtype(p["dtype"]).type(arrays[p["index"]])
    if kind == "num_programs":
        return np.int32(min(p["programs"], sms))
    if kind == "stride":  # a loop's row stride, fixed at export
        return np.int32(p["value"])
    return np.uint64(0)  # null_pointer: Triton's unused scratch pointers


def _allocate(cupy: Any, b: dict[str, Any], args: dict[str, Any]) -> Any:
    dtype = _cupy_dtype(b["dtype"])
    if b["init"] == "empty":
        return cupy.empty(tuple(b["shape"]), dtype=dtype)
    if b["init"] in ("randint", "rand", "randn", "pyrandint"):  # drawn on each call, from CuPy's generator
        return draws.draw(cupy, b["init"], tuple(b["shape"]), dtype, b.get("low", 0),
                          b.get("high", 1))
    value = args[b["arg"]] if b["init"] == "arg" else b["value"]
    if isinstance(value, str):  # "inf", "-inf", "nan": JSON has no such numbers
        value = float(value)
    return cupy.full(tuple(b["shape"]), value, dtype=dtype)


def _cupy_dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _cupy() -> Any:
    try:
        import cupy
    except ImportError:
        raise BackendError("running a kernel package needs CuPy and an NVIDIA GPU: pip install "
                           "cupy-cuda13x (or tiledsl's `gpu` extra)") from None
    return cupy


def _to_cupy(cupy: Any, v: Any) -> Any:
    if type(v).__module__.startswith("cupy"):
        return v
    try:
        return cupy.from_dlpack(v)
    except Exception as e:  # e.g. a dtype this CuPy cannot hold
        raise BackendError(f"CuPy cannot view a {_type_name(v)} ({e}); pass a CuPy array") from e


def _runs_on(arch: str, cc: str) -> bool:
    """A cubin for sm_XY runs on devices of major X and minor >= Y (sm_90 code, which Triton
    builds as sm_90a, only on compute capability 9.0)."""
    want = arch.removeprefix("sm_").rstrip("a")
    if want == "90":
        return cc == "90"
    return len(cc) == len(want) and cc[:-1] == want[:-1] and int(cc[-1]) >= int(want[-1])


def _array_info(v: Any) -> _Array | None:
    """Shape, dtype name and element strides from `__cuda_array_interface__`, or from the
    array's own attributes; None if `v` is no array at all. The dtype is the array's own where
    it has one: the interface has no typestr for bfloat16, which some torch releases and other
    libraries give as float16's ("<f2")."""
    try:
        iface = v.__cuda_array_interface__
    except Exception:  # absent, or torch refusing for a CPU tensor or a bfloat16 one
        iface = None
    if isinstance(iface, dict):
        dt = np.dtype(iface["typestr"])
        shape = tuple(int(s) for s in iface["shape"])
        raw = iface.get("strides")
        strides = _contiguous(shape) if raw is None else tuple(int(s) // dt.itemsize for s in raw)
        name = _dtype_name(getattr(v, "dtype", dt))
        return _Array(shape, name, strides)
    if not (hasattr(v, "__dlpack__") or hasattr(v, "__cuda_array_interface__")) \
            or not hasattr(v, "shape") or not hasattr(v, "dtype"):
        return None
    shape = tuple(int(s) for s in v.shape)
    stride = getattr(v, "stride", None)
    if callable(stride):  # torch: elements
        strides: tuple[int, ...] | None = tuple(int(s) for s in stride())
    elif hasattr(v, "strides") and hasattr(v.dtype, "itemsize"):
        strides = tuple(int(s) // int(v.dtype.itemsize) for s in v.strides)
    else:
        strides = None
    return _Array(shape, _dtype_name(v.dtype), strides)


def _dtype_name(d: Any) -> str:
    """"float32" for NumPy, CuPy and torch dtypes alike ("torch.float32" -> "float32")."""
    name = str(getattr(d, "name", None) or d).rsplit(".", 1)[-1]
    return {"bool_": "bool"}.get(name, name)


def _on_cpu(v: Any) -> bool:
    try:
        device_type = int(v.__dlpack_device__()[0])
    except Exception:
        return False
    return device_type in _CPU_DLPACK_DEVICES


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


def _same_strides(got: tuple[int, ...], want: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Equal strides, except on dimensions of extent 1, which are never stepped along."""
    return len(got) == len(want) and all(g == w or n == 1 for g, w, n in zip(got, want, shape))


def _describe_arg(p: dict[str, Any]) -> str:
    if p["kind"] == "scalar":
        return f"{p['name']}: {p['dtype']}"
    return f"{p['name']}: {_type(p)}"


def _type(p: dict[str, Any]) -> str:
    text = f"{p['dtype']}[{', '.join(map(str, p['shape']))}]"
    strides = p.get("strides")
    if strides is not None and tuple(strides) != _contiguous(tuple(p["shape"])):
        text += f" strides {tuple(strides)}"
    return text


def _type_name(v: Any) -> str:
    t = type(v)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
