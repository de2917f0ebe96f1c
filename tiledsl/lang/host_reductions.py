"""Reductions and casts of whole tensors in host code, as torch writes them after a kernel's
grid: `dw = _dw.sum(dim=0).to(w.dtype)` (Liger's layer-norm backward sums the per-program
partial rows) or `grad_weight.sum(0)` (Helion's rms_norm_bwd).

Each is a grid of its own, traced as the user would write it: `x.sum(dim=d)` is a grid of
tiles over the other dimensions, each looping over tiles of dimension d and accumulating
`td.sum(x[...], axis=d)` (in float32 for 16-bit floats, as `td.sum` does), into a new tensor
of x's dtype (of int64 for a sum of smaller ints), as torch's;
`x.to(dtype)` is a grid that copies x into a new tensor of that dtype. `mean`, `amax` and
`amin` are the same as `sum`. The block sizes are tunable as any grid's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl import dtypes
from tiledsl.errors import TraceError, user_loc
from tiledsl.frontend.loops import loop
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, as_dtype, binary, cast, need_static, no_math, reduce
from tiledsl.lang.language import empty, full, grid, tile

_KINDS = {"sum": "sum", "mean": "sum", "amax": "max", "amin": "min"}  # the per-tile reduction
_COMBINE = {"sum": "add", "mean": "add", "amax": "maximum", "amin": "minimum"}


def _line() -> int:
    loc = user_loc()
    return loc.line if loc is not None else 0


def _reduction(kind: str) -> Any:
    def method(self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
               axis: Any = None, keepdims: bool | None = None) -> Tensor:
        if current().depth != "host":
            no_math(self, f"{self.name}[tm, :].{kind}(dim=1)")
        return _reduce(self, kind, axis if dim is None else dim,
                       keepdim if keepdims is None else keepdims, dtype)
    method.__name__ = method.__qualname__ = kind
    method.__doc__ = f"torch's `x.{kind}(dim, keepdim)` in host code: a grid that reduces x."
    return method


def _reduce(t: Tensor, kind: str, dim: Any, keepdim: bool, dtype: Any) -> Tensor:
    tr = current(f"{t.name}.{kind}()")
    if dim is None:  # every element: a flat view, reduced along its one dimension
        flat = t.reshape(-1)  # type: ignore[attr-defined]
        out = _reduce(flat, kind, 0, False, dtype)  # 0-d, as torch's
        return out.reshape((1,) * t.ndim) if keepdim else out  # type: ignore[attr-defined]
    if isinstance(dim, (tuple, list)):
        return _reduce_dims(t, kind, dim, keepdim, dtype)
    need_static(dim)  # an int argument: traced as that int
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or \
            not -t.ndim <= dim < t.ndim:
        tr.fail(TraceError, f"{t.name}.{kind}(): dim must be one axis of the tensor's "
                f"{t.ndim}, got {dim!r}", hint="reduce one dimension per call")
    d = int(dim) % t.ndim
    accumulate = _accumulator(t, kind)
    default = t.dtype if t.dtype.is_float else accumulate  # torch's: a float16 sum is float16
    result = default if dtype is None else as_dtype(dtype, f"{t.name}.{kind}")
    if kind == "mean" and not result.is_float:
        tr.fail(TraceError, f"{t.name}.mean(): the mean of a {t.dtype} tensor",
                hint="cast first: x.to(td.float32).mean(dim)")
    rest = [n for i, n in enumerate(t.shape) if i != d]
    out = empty(tuple(rest) or (1,), result)

    def body(tiles: Any, env: dict) -> dict:
        outer = list(tiles) if isinstance(tiles, tuple) else [tiles]
        first = full(tuple(outer) or (1,), _start(kind, accumulate), accumulate)

        def step(inner: Any, e: dict) -> dict:
            part = cast(t[tuple(outer[:d] + [inner] + outer[d:])], accumulate)
            v = reduce(_KINDS[kind], part, d, False)
            return {"acc": binary(_COMBINE[kind], e["acc"], v)}
        acc = loop(tile(t.shape[d]), step, {"acc": first}, ("acc",), None, _line())["acc"]
        if kind == "mean":
            acc = acc / t.shape[d]
        out[tuple(outer) if outer else (slice(None),)] = cast(acc, result)
        return {}

    if rest:
        loop(tile(*rest), body, {}, (), None, _line())
    else:  # a 1-D tensor: one program
        loop(grid(1), lambda _p, env: body((), env), {}, (), None, _line())
    if keepdim:
        return out.reshape(t.shape[:d] + (1,) + t.shape[d + 1:])  # type: ignore[attr-defined]
    return out if rest else out.reshape(())  # type: ignore[attr-defined]  # (0-d: torch's)


def _accumulator(t: Tensor, kind: str) -> Any:
    """The dtype a reduction of `t` accumulates in: float32 for 16-bit floats, 64-bit ints for
    a sum of smaller ints or bools (as torch's)."""
    if kind in ("sum", "prod") and (t.dtype.is_bool or t.dtype.is_int and t.dtype.bits < 64):
        return dtypes.uint64 if t.dtype.kind == "u" else dtypes.int64
    return dtypes.float32 if t.dtype.short in ("f16", "bf16") else t.dtype


def _reduce_dims(t: Tensor, kind: str, dims: Any, keepdim: bool, dtype: Any) -> Tensor:
    """torch's `x.sum(dim=(0, 1, 2))` (mamba's chunk-scan backward): one dimension at a time,
    the last first (the others keep their places), the steps before the last in the
    accumulator's dtype (no rounding between them); `dim=()` reduces every dimension."""
    if not dims:
        return _reduce(t, kind, None, keepdim, dtype)
    for d in dims:
        need_static(d)
    if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or
           not -t.ndim <= d < t.ndim for d in dims) or \
            len({int(d) % t.ndim for d in dims}) < len(dims):
        current().fail(TraceError, f"{t.name}.{kind}(): dim must be distinct axes of the "
                       f"tensor's {t.ndim}, got {tuple(dims)!r}")
    order = sorted((int(d) % t.ndim for d in dims), reverse=True)
    accumulate = _accumulator(t, kind)
    result = dtype if dtype is not None else t.dtype if t.dtype.is_float else accumulate
    out = t
    for i, d in enumerate(order):
        out = _reduce(out, kind, d, keepdim, result if i == len(order) - 1 else accumulate)
    return out


def tensor_to(t: Tensor, dtype: Any = None, *args: Any, **torch: Any) -> Tensor:
    """torch's `x.to(dtype)` in host code: a grid that copies x into a new tensor of `dtype`
    (the tensor itself when it has that dtype, as torch returns it); a device, positional
    (`x.to(device)`, `x.to("cuda", dtype)`) or not, changes nothing. Inside the loops, load a
    tile first (`x[t].to(dtype)`)."""
    tr = current(f"{t.name}.to()")
    if tr.depth != "host":
        no_math(t, f"{t.name}[tm, :].to(dtype)")
    if _is_device(dtype):  # `labels.to(device)`, `x.to(device, dtype)`: outputs live there
        dtype = args[0] if args else None
    elif isinstance(dtype, Tensor):  # torch's `x.to(other)`: other's dtype
        dtype = dtype.dtype
    dtype = dtype if dtype is not None else torch.get("dtype")
    if dtype is None:
        return t
    target = as_dtype(dtype, f"{t.name}.to")
    if target == t.dtype:
        return t
    out = empty(t.shape, target)
    tr.host_casts[out.value] = t.value
    src, dst = (t, out) if t.shape else (t.reshape(1), out.reshape(1))  # a 0-d: its element

    def body(tiles: Any, env: dict) -> dict:
        dst[tiles] = cast(src[tiles], target)
        return {}
    loop(tile(*src.shape), body, {}, (), None, _line())
    return out


def _is_device(v: Any) -> bool:
    """Whether `v` names a device: `x.device`, a torch.device, or "cuda", "cuda:0", "cpu"."""
    return type(v).__name__ in ("Device", "device") or \
        isinstance(v, str) and v.split(":")[0] in ("cuda", "cpu", "xpu", "mps", "meta")


def _start(kind: str, dtype: Any) -> Any:
    """The accumulator's first value: the reduction's identity."""
    if kind in ("sum", "mean"):
        return 0
    if dtype.is_float:
        return -np.inf if kind == "amax" else np.inf
    info = np.iinfo(np.dtype(dtype.name))
    return info.min if kind == "amax" else info.max


for _kind in ("sum", "mean", "amax", "amin"):
    setattr(Tensor, _kind, _reduction(_kind))


class _Extremes(tuple):
    """torch's `x.max(dim)`: (values, indices), also as `.values` and `.indices`."""

    @property
    def values(self) -> Tensor:
        return self[0]

    @property
    def indices(self) -> Tensor:
        return self[1]


def _extreme(kind: str) -> Any:
    def method(self: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
        if dim is None:
            return _reduce(self, kind, None, keepdim, None)
        values = _reduce(self, kind, dim, keepdim, None)
        return _Extremes((values, _positions(self, "arg" + kind[1:], dim, keepdim)))
    method.__name__ = method.__qualname__ = kind[1:]
    method.__doc__ = (f"torch's `x.{kind[1:]}()` in host code: the {kind[1:]} of every "
                      f"element; `x.{kind[1:]}(dim)`, (values, indices) along dim.")
    return method


def _positions(t: Tensor, kind: str, dim: Any, keepdim: bool) -> Tensor:
    """torch's indices of `x.max(dim)` (int64): a grid over the other dimensions, each
    program `td.argmax` of a whole row along dim (the first on ties, and a NaN's, as torch)."""
    from tiledsl.frontend.td_names import FUNCTIONS
    need_static(dim)
    d = int(dim) % t.ndim
    rest = [n for i, n in enumerate(t.shape) if i != d]
    out = empty(tuple(rest) or (1,), dtypes.int64)

    def body(tiles: Any, env: dict) -> dict:
        outer = list(tiles) if isinstance(tiles, tuple) else [tiles]
        row = t[tuple(outer[:d] + [slice(None)] + outer[d:])]
        at = cast(FUNCTIONS[kind](row, axis=d), dtypes.int64)
        out[tuple(outer) if outer else (slice(None),)] = at if outer else at.reshape(1)
        return {}

    if rest:
        loop(tile(*rest), body, {}, (), None, _line())
    else:
        loop(grid(1), lambda _p, env: body((), env), {}, (), None, _line())
    if keepdim:
        return out.reshape(t.shape[:d] + (1,) + t.shape[d + 1:])  # type: ignore[attr-defined]
    return out if rest else out.reshape(())  # type: ignore[attr-defined]


Tensor.max, Tensor.min = _extreme("amax"), _extreme("amin")  # type: ignore[attr-defined]
Tensor.to = tensor_to  # type: ignore[attr-defined]
# `x.cuda()` / `x.cuda(i)` (lightllm's `weight.cuda(tp_rank)`): a kernel's tensors are there
Tensor.cuda = lambda self, device=None, non_blocking=False, **_: self  # type: ignore[attr-defined]
for _name, _dtype in (("float", "float32"), ("double", "float64"), ("half", "float16"),
                      ("bfloat16", "bfloat16"), ("int", "int32"), ("long", "int64"),
                      ("bool", "bool")):  # torch's `x.float()`: `x.to(torch.float32)`
    setattr(Tensor, _name, lambda self, _d=_dtype, **_: tensor_to(self, _d))
Tensor.detach = lambda self: self  # type: ignore[attr-defined] (a kernel has no autograd)
# torch's `x.data` (Triton's `triton.reinterpret(x, tl.float8e5)` wraps `x.data`): x itself
Tensor.data = property(lambda self: self)  # type: ignore[attr-defined]
