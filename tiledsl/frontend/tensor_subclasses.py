"""torch tensor subclasses made in host code around a kernel's tensors, as torchao's float8
wrappers return theirs: `Float8TrainingTensor(output_buffer, scale, orig_dtype=x.dtype, ...)`.

Such a class (a `torch.Tensor` subclass with torch's `__tensor_flatten__` and
`__tensor_unflatten__`) is built while tracing around stand-ins: each kernel tensor among its
arguments is a `meta` tensor of its shape, strides and dtype, a td dtype is torch's and a device
the meta device; its `__tensor_flatten__` then names its inner tensors, which must be stand-ins
of kernel tensors (a tensor its constructor computes has no counterpart), and those attributes
are set to the kernel tensors, so host code reads them as the kernel's. Returned, the object is
its inner tensors, the kernel's outputs, and a form that rebuilds it on every call
(runtime/returns.py `Rebuild`: `cls.__tensor_unflatten__(inner, ctx, size, stride)` on the
outputs as torch tensors). A kernel returning one is not packaged or made a custom op.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from tiledsl import dtypes
from tiledsl.errors import TraceError
from tiledsl.frontend.td_names import SUBSTITUTES
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor


def subclass_call(fn: Any) -> Callable[..., Any] | None:
    """What host code calls for `cls(...)`, `cls` such a subclass: built around stand-ins where
    a kernel tensor is among its arguments, else `cls` itself."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(fn, type) or fn is torch.Tensor or \
            not issubclass(fn, torch.Tensor) or not hasattr(fn, "__tensor_unflatten__") or \
            not hasattr(fn, "__tensor_flatten__"):
        return None

    def make(*args: Any, **kwargs: Any) -> Any:
        if not any(isinstance(a, Tensor) for a in (*args, *kwargs.values())):
            return fn(*args, **kwargs)
        return _made(torch, fn, args, kwargs)
    return make


def _made(torch: Any, cls: type, args: tuple, kwargs: dict) -> Any:
    tr = current(f"{cls.__name__}(...)")
    kernel_tensors: dict[int, tuple[Any, Tensor]] = {}  # id(stand-in) -> (it, the tensor)

    def stand_in(v: Any) -> Any:
        if isinstance(v, Tensor):
            meta = torch.empty_strided(tuple(v.shape), tuple(v.stride()),
                                       dtype=getattr(torch, v.dtype.name), device="meta")
            kernel_tensors[id(meta)] = (meta, v)
            return meta
        if isinstance(v, dtypes.DType):
            return getattr(torch, v.name)
        if type(v).__module__ == "tiledsl.lang.devices":  # (x.device)
            return torch.device("meta")
        return v
    try:
        obj = cls(*map(stand_in, args), **{k: stand_in(v) for k, v in kwargs.items()})
        names, _ = obj.__tensor_flatten__()
    except Exception as e:  # noqa: BLE001 - the class's own code: say where
        tr.fail(TraceError, f"{cls.__name__}(...) around the kernel's tensors: "
                f"{type(e).__name__}: {e}")
    for name in names:
        inner = getattr(obj, name)
        if id(inner) not in kernel_tensors:
            tr.fail(TraceError, f"{cls.__name__}(...): its inner tensor '{name}' is none of the "
                    "kernel's tensors it was given (its constructor made it)",
                    hint="make that tensor in the kernel's code and pass it in")
        setattr(obj, name, kernel_tensors[id(inner)][1])
    return obj


SUBSTITUTES.insert(0, subclass_call)
