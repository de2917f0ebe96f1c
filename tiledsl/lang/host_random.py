"""torch's random factories in host code: `torch.randint(2**32, (m,), dtype=torch.int64)`
(flash-attn's dropout seeds), `torch.rand(n)`, `torch.randn(m, n)`, `torch.rand_like(x)`,
`torch.randn_like(x)`, `torch.randint_like(x, low, high)`; and Python's `random.randint(a, b)`,
`random.randrange(a, b)`, `random.getrandbits(k)` (attorch's dropout seed, `randint(0, 65535)`),
a number drawn on every call from Python's generator and read on the device as `x.item()` is
(frontend/host_scalars.py). Other functions of Python's or NumPy's generators, and torch's
generator state (FlagGems' philox seed and offset), are errors: they would run once, while
tracing, and their numbers repeat on every call.

Each makes a `tensor.random` op: a new tensor whose values are drawn on every call, on the
arrays' device, from their library's generator, as torch draws them (torch.randint is
`empty(...).random_(low, high)`, rand `uniform_()`, randn `normal_()`), so `torch.manual_seed`
gives the numbers torch's own call would. A trace-time draw would repeat the same numbers on
every call. The kernel reads the tensor like any other (a seed per row loaded in the grid).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from tiledsl import dtypes
from tiledsl.dtypes import DType
from tiledsl.errors import TraceError
from tiledsl.frontend.host_scalars import HostScalar
from tiledsl.frontend.td_names import SUBSTITUTES
from tiledsl.frontend.tracer import current
from tiledsl.frontend.tensor_names import tensor_name
from tiledsl.frontend.values import Tensor, as_dtype, need_static
from tiledsl.errors import user_loc
from tiledsl.ir.types import TensorType
from tiledsl.lang.language import _host_shape, _shape_and_dtype

# torch's keywords that place or record the result; the result lives on the inputs' device
_PLACEMENT = ("device", "layout", "pin_memory", "memory_format")


def rand(*size: Any, **kwargs: Any) -> Tensor:
    """`torch.rand(*size)`: uniform floats in [0, 1)."""
    return _floats("rand", size, kwargs)


def randn(*size: Any, **kwargs: Any) -> Tensor:
    """`torch.randn(*size)`: standard normal floats."""
    return _floats("randn", size, kwargs)


def randint(*args: Any, size: Any = None, low: Any = None, high: Any = None,
            **kwargs: Any) -> Tensor:
    """`torch.randint(high, size)` or `torch.randint(low, high, size)`: ints in [low, high),
    int64 unless `dtype=`."""
    what = "torch.randint"
    args = (*args, *(() if size is None else (size,)))
    if low is not None or high is not None:  # torch.randint(low=0, high=8, size=(4,))
        args = (0 if low is None else low, high, *args)
    if len(args) == 2:
        args = (0, *args)
    if len(args) != 3:
        current().fail(TraceError, f"{what}() takes (high, size) or (low, high, size)",
                       hint="e.g. torch.randint(2**31, (n,), dtype=torch.int64)")
    lo, hi, shape = args
    return _draw("randint", shape, _dtype(kwargs, what, dtypes.int64), what, lo, hi)


def rand_like(x: Any, **kwargs: Any) -> Tensor:
    """`torch.rand_like(x)`: uniform floats of x's shape (and dtype, unless `dtype=`)."""
    return _like("rand", x, kwargs)


def randn_like(x: Any, **kwargs: Any) -> Tensor:
    """`torch.randn_like(x)`: standard normal floats of x's shape."""
    return _like("randn", x, kwargs)


def randint_like(x: Any, *bounds: Any, low: Any = None, high: Any = None,
                 **kwargs: Any) -> Tensor:
    """`torch.randint_like(x, high)` or `(x, low, high)`: ints in [low, high) of x's shape."""
    what = "torch.randint_like"
    t = _tensor(x, what)
    if low is not None or high is not None:
        bounds = (0 if low is None else low, high, *bounds)
    if len(bounds) == 1:
        bounds = (0, *bounds)
    if len(bounds) != 2:
        current().fail(TraceError, f"{what}() takes (x, high) or (x, low, high)")
    d = _dtype(kwargs, what, t.dtype)
    return _draw("randint", t.shape, d, what, *bounds)


def _floats(kind: str, size: tuple, kwargs: dict) -> Tensor:
    what = f"torch.{kind}"
    shape, _ = _shape_and_dtype(size[0] if size else None, size[1:], None, what,
                                kwargs.pop("size", None))
    return _draw(kind, shape, _dtype(kwargs, what, _default_float()), what)


def _like(kind: str, x: Any, kwargs: dict) -> Tensor:
    what = f"torch.{kind}_like"
    t = _tensor(x, what)
    return _draw(kind, t.shape, _dtype(kwargs, what, t.dtype), what)


def _tensor(x: Any, what: str) -> Tensor:
    if not isinstance(x, Tensor):
        current().fail(TraceError, f"{what}() takes a tensor of the kernel's, got "
                       f"{type(x).__name__}", hint="in a grid, draw with td.rand(seed, offsets)")
    return x


def _dtype(kwargs: dict, what: str, default: DType) -> DType:
    """The dtype of `what`'s result; a keyword that changes what torch would draw is refused."""
    generator = kwargs.pop("generator", None)
    if generator is not None:
        current().fail(TraceError, f"{what}(..., generator=...): tiledsl draws from the "
                       "default generator of the arrays' library",
                       hint="seed it instead (torch.manual_seed), or pass the seed to the kernel "
                            "and draw with td.rand(seed, offsets) in a grid")
    if kwargs.pop("requires_grad", False) or kwargs.pop("out", None) is not None:
        current().fail(TraceError, f"{what}(..., requires_grad= / out=) has no meaning in a "
                       "kernel")
    dtype = kwargs.pop("dtype", None)
    for k in _PLACEMENT:
        kwargs.pop(k, None)
    if kwargs:
        current().fail(TraceError, f"{what}() got unexpected keywords {sorted(kwargs)}")
    return default if dtype is None else as_dtype(dtype, what)


def _default_float() -> DType:
    """torch's default dtype (float32 unless `torch.set_default_dtype`)."""
    torch = sys.modules.get("torch")
    return dtypes.float32 if torch is None else as_dtype(torch.get_default_dtype(), "torch.rand")


def _draw(kind: str, shape: Any, dtype: DType, what: str, low: Any = None,
          high: Any = None) -> Tensor:
    tr = current(what)
    if tr.depth != "host":
        tr.fail(TraceError, f"{what}() makes a tensor and cannot be used inside a tile loop",
                hint="in a grid, draw with td.rand(seed, offsets) or td.randint(seed, offsets)")
    if kind in ("rand", "randn") and not dtype.is_float:
        tr.fail(TraceError, f"{what}() makes floats; dtype {dtype.name} is not one",
                hint="for integers write torch.randint(low, high, size, dtype=...)")
    if dtype.is_fp8:
        tr.fail(TraceError, f"{what}(): torch draws no {dtype.name}", hint="draw float32 and "
                "cast")
    attrs: dict[str, Any] = {"kind": kind}
    if kind in ("randint", "pyrandint"):
        attrs.update(low=_bound(low, what, "low"), high=_bound(high, what, "high"))
        _check_bounds(attrs["low"], attrs["high"], dtype, what)
    t = TensorType(_host_shape(shape, what), dtype)
    name = tensor_name(user_loc(), kind)
    v = tr.emit("tensor.random", [], attrs=attrs, types=[t],
                hint=None if name.startswith("<") else name)[0]
    return Tensor(v, name)


def _bound(b: Any, what: str, name: str) -> int:
    need_static(b)  # an int argument: the kernel traces again with it as a Python int
    if isinstance(b, (int, np.integer)) and not isinstance(b, bool):
        return int(b)
    current().fail(TraceError, f"{what}(): its {name} bound must be an int known when the "
                   f"kernel traces, got {b!r}", hint="bounds from shapes and int arguments are")
    raise AssertionError  # (fail raises)


def _check_bounds(low: int, high: int, dtype: DType, what: str) -> None:
    tr = current()
    if low >= high:
        tr.fail(TraceError, f"{what}(): low ({low}) must be below high ({high})")
    if dtype.kind in "iu":
        info = np.iinfo(dtype.np)
        if low < int(info.min) or high - 1 > int(info.max):
            tr.fail(TraceError, f"{what}(): [{low}, {high}) does not fit {dtype.name}",
                    hint="pass dtype=torch.int64")
    elif dtype.is_bool and (low < 0 or high > 2):
        tr.fail(TraceError, f"{what}(): [{low}, {high}) does not fit bool")


def _python_randint(a: Any, b: Any) -> HostScalar:
    return _python(a, _bound(b, "random.randint", "b") + 1, "random.randint")


def _python_randrange(start: Any, stop: Any = None, step: Any = 1) -> HostScalar:
    if step != 1:
        current().fail(TraceError, "random.randrange(..., step): only a step of 1 is drawn per "
                       "call", hint="draw random.randrange(n) and scale it")
    low, high = (0, start) if stop is None else (start, stop)
    return _python(low, _bound(high, "random.randrange", "stop"), "random.randrange")


def _python_getrandbits(k: Any) -> HostScalar:
    return _python(0, 2**_bound(k, "random.getrandbits", "k"), "random.getrandbits")


# torch's generator state read in host code (FlagGems' `philox_backend_seed_offset`: the CUDA
# generator's seed and offset, advanced by the draw's size): read once, while tracing
_TORCH_STATE = frozenset({"get_state", "set_state", "graphsafe_get_state", "seed",
                          "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all",
                          "manual_seed", "seed_all"})
_PYTHON = {"randint": _python_randint, "randrange": _python_randrange,
           "getrandbits": _python_getrandbits}


def _python(low: Any, high: int, what: str) -> HostScalar:
    low = _bound(low, what, "low")
    _check_bounds(low, high, dtypes.int64, what)
    t = _draw("pyrandint", (1,), dtypes.int64, what, low, high)
    return HostScalar(t)


def generator_call(fn: Any) -> Any:
    """A function of Python's or NumPy's global generator called in host code: the per-call
    draws above, or an error (SUBSTITUTES)."""
    owner, name = getattr(fn, "__self__", None), getattr(fn, "__name__", "")
    rnd, torch = sys.modules.get("random"), sys.modules.get("torch")
    if torch is not None and (isinstance(owner, torch.Generator) and name in _TORCH_STATE or
                              getattr(fn, "__module__", None) in ("torch.random",
                                                                   "torch.cuda.random")
                              and name in _TORCH_STATE):  # FlagGems' philox seed and offset
        where = "torch.Generator" if isinstance(owner, torch.Generator) else \
            fn.__module__.replace(".random", "")
    elif rnd is not None and isinstance(owner, rnd.Random):
        if owner is getattr(rnd, "_inst", None) and name in _PYTHON:
            return _PYTHON[name]
        where = "random" if owner is getattr(rnd, "_inst", None) else "a random.Random"
    elif isinstance(owner, (np.random.RandomState, np.random.Generator)):
        where = "numpy.random"
    else:
        return None

    def refused(*args: Any, **kwargs: Any) -> Any:
        current().fail(TraceError, f"{where}.{name}() in a kernel would run once, while it "
                       "traces: its numbers would repeat on every call",
                       hint="draw with random.randint(a, b) (Python's generator) or "
                            "torch.randint / rand / randn, which draw on every call; or pass "
                            "the seed as an argument")
    return refused


SUBSTITUTES.insert(0, generator_call)
