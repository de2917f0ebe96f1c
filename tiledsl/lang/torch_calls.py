"""torch's functions called on tile values, as Helion kernels write them: `torch.exp(v)`,
`torch.amax(v, dim=-1)`, `torch.where(m, a, b)`, `torch.bmm(q, k)`,
`torch.nn.functional.softmax(v, dim=1)`.

torch hands a call whose arguments hold an object with `__torch_function__` to that method
(torch's protocol for tensor-like types), so `TileValue.__torch_function__` calls the `td`
function of the same meaning (`CALLS`), with torch's arguments (`dim=`, `keepdim=`, torch
dtypes). A torch function without one is a TraceError at the user's line that says what to
write. Nothing here imports torch: a kernel that never calls it never loads it.

`td.softmax`, `td.log_softmax`, `td.bmm` and `td.baddbmm` are defined here too, for the kernels
that spell them with `td.`: a softmax over `dim` in float32 for 16-bit floats, returned in the
input's dtype (or `dtype=`), as torch's (`_stacklevel` is what `torch.nn.functional` passes on).
"""

from __future__ import annotations

import inspect
import operator
import sys
from typing import Any, Callable

from tiledsl import dtypes
from tiledsl.errors import TileDSLError, TraceError
from tiledsl.frontend.captured import capture, is_foreign_tensor
from tiledsl.frontend.td_names import FUNCTIONS, SUBSTITUTES, of_torch
from tiledsl.frontend.valued_args import need_scalar_values, need_values
from tiledsl.frontend.tracer import current
from tiledsl.lang.devices import Device
from tiledsl.frontend.values import (
    Tensor, TileValue, as_dtype, binary, broadcast_shapes, cast, to_value,
)


def softmax(x: Any, dim: int = -1, dtype: Any = None, _stacklevel: int = 3) -> TileValue:
    """`torch.softmax(x, dim)`: `exp(x - max) / sum(exp(x - max))` along `dim`."""
    current("td.softmax()")
    v, out = _float(x, dtype)
    e = _exp(v - v.max(dim, True))
    return cast(e / e.sum(dim, True), out)


def log_softmax(x: Any, dim: int = -1, dtype: Any = None, _stacklevel: int = 3) -> TileValue:
    """`torch.log_softmax(x, dim)`: `x - max - log(sum(exp(x - max)))` along `dim`."""
    current("td.log_softmax()")
    v, out = _float(x, dtype)
    shifted = v - v.max(dim, True)
    return cast(shifted - _log(_exp(shifted).sum(dim, True)), out)


def bmm(a: Any, b: Any, out_dtype: Any = None) -> TileValue:
    """`torch.bmm(a, b)` on 3-D tiles: `a @ b` (Helion's `torch.bmm(q, k, out_dtype)`)."""
    current("td.bmm()")
    p = to_value(a) @ to_value(b)
    return p if out_dtype is None else cast(p, as_dtype(out_dtype, "td.bmm"))


def baddbmm(acc: Any, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1) -> TileValue:
    """`torch.baddbmm(acc, a, b, beta=, alpha=)`: `beta * acc + alpha * (a @ b)`, in acc's dtype
    (Helion's attention accumulates `torch.baddbmm(acc, p, v)`)."""
    current("td.baddbmm()")
    c = to_value(acc)
    p = to_value(a) @ to_value(b)
    out = binary("add", c if beta == 1 else c * beta, p if alpha == 1 else p * alpha)
    return out if c.weak else cast(out, c.dtype)


def gelu(x: Any, approximate: str = "none") -> TileValue:
    """`torch.nn.functional.gelu`: `x * Phi(x)` by erf, or with `approximate="tanh"` by the
    tanh form; in float32 for 16-bit floats, returned in the input's dtype."""
    tr = current("td.gelu()")
    v, out = _float(x, None)
    if approximate == "none":
        phi = 1.0 + FUNCTIONS["erf"](v * 0.7071067811865476)
    elif approximate == "tanh":
        phi = 1.0 + FUNCTIONS["tanh"](0.7978845608028654 * (v + 0.044715 * v * v * v))
    else:
        tr.fail(TraceError, f"td.gelu: approximate={approximate!r}; expected 'none' or 'tanh'")
    return cast(0.5 * v * phi, out)


def leaky_relu(x: Any, negative_slope: float = 0.01) -> TileValue:
    """`torch.nn.functional.leaky_relu`: `x` where positive, else `negative_slope * x`."""
    current("td.leaky_relu()")
    v = to_value(x)
    return FUNCTIONS["where"](v > 0, v, cast(v * negative_slope, v.dtype))


def softplus(x: Any, beta: float = 1.0, threshold: float = 20.0) -> TileValue:
    """`torch.nn.functional.softplus`: `log(1 + exp(beta * x)) / beta`, and `x` itself where
    `beta * x > threshold`; in float32 for 16-bit floats, returned in the input's dtype."""
    current("td.softplus()")
    v, out = _float(x, None)
    soft = FUNCTIONS["log1p"](_exp(v * beta)) * (1.0 / beta)
    return cast(FUNCTIONS["where"](v * beta > threshold, v, soft), out)


def _float(x: Any, dtype: Any) -> tuple[TileValue, Any]:
    v = to_value(x)
    out = v.dtype if dtype is None else as_dtype(dtype, "softmax")
    return (cast(v, as_dtype("float32", "softmax")) if v.dtype.bits < 32 else v), out


def _exp(v: TileValue) -> TileValue:
    return FUNCTIONS["exp"](v)


def _log(v: TileValue) -> TileValue:
    return FUNCTIONS["log"](v)


# torch's name -> the td function's name (`td_names.FUNCTIONS`, looked up at the call)
_SAME = ("exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
         "tan", "tanh", "sigmoid", "abs", "erf", "floor", "ceil", "trunc", "maximum", "minimum",
         "where", "sum", "mean", "amax", "amin", "clamp", "matmul", "addmm", "relu", "silu",
         "cumsum", "cumprod", "argmax", "argmin", "sort", "argsort", "topk", "var_mean", "var",
         "std", "softmax", "log_softmax", "bmm", "baddbmm", "zeros_like", "ones_like",
         "full_like", "empty_like", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh",
         "acosh", "atanh", "hypot", "copysign", "fmod", "isnan", "isinf", "isfinite", "pow",
         "gelu", "leaky_relu", "softplus", "stack", "round")
CALLS: dict[str, str] = {name: name for name in _SAME} | {"clip": "clamp", "mm": "matmul"}


# torch's products of 16-bit floats are 16-bit (td.dot's are float32): torch.matmul(a, b) on
# tiles is `td.dot` cast to the inputs' type, as torch computes it
_TORCH_DTYPE = frozenset({"matmul", "mm", "bmm"})
# keywords of torch's that mean nothing in a kernel, at the values that change nothing
_IGNORED = {"inplace": (False,), "out": (None,), "requires_grad": (False,),
            "pin_memory": (False, None)}
_ANY_VALUE = frozenset({"device", "layout", "memory_format"})  # outputs live on the inputs'
# torch's functions that host code calls with no tile value to dispatch on:
# `torch.empty(m, n, dtype=x.dtype, device=x.device)`, `torch.promote_types(a.dtype, b.dtype)`
HOST_CALLS = ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
              "full_like", "promote_types", "result_type", "finfo", "iinfo", "atleast_1d",
              "atleast_2d", "atleast_3d", "tensor", "arange", "empty_strided")
HOST_RANDOM = ("rand", "randn", "randint", "rand_like", "randn_like", "randint_like")


def _torch_function(cls: type, func: Callable[..., Any], types: Any, args: tuple = (),
                    kwargs: dict | None = None) -> Any:
    """torch's protocol: `torch.<name>(...)` with a tile value among its arguments."""
    name = getattr(func, "__name__", "")
    module = getattr(func, "__module__", None) or "torch"
    target = CALLS.get(name)
    fn = FUNCTIONS.get(target) if target is not None else None
    if fn is None:
        need_scalar_values([a for a in (*args, *(kwargs or {}).values())
                            if isinstance(a, TileValue)])  # (Liger's torch.equal(grad_output,
        # torch.tensor(1.0)) of a 0-d argument: its value, valued_args.py)
        current().fail(TraceError, f"{module}.{name} has no tiledsl counterpart on tile values",
                       hint="the torch functions a kernel may call on tiles are "
                            + ", ".join(f"torch.{n}" for n in sorted(CALLS))
                            + "; or write the td. function")
    out = _call(f"{module}.{name}", fn, args, kwargs or {})
    if name in _TORCH_DTYPE:
        inputs = [to_value(a).dtype for a in args[:2]]
        common = max(inputs, key=lambda d: d.bits)
        if all(d.is_float for d in inputs) and out.dtype != common:
            out = cast(out, common)
    return out


def _call(what: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """`fn(*args, **kwargs)` less torch's keywords that change nothing here; a call that does
    not fit `fn` is a TraceError at the user's line naming `what`."""
    kept = {}
    for k, v in kwargs.items():
        if k in _ANY_VALUE and k not in _parameters(fn) or \
                (k in _IGNORED and any(v is a for a in _IGNORED[k])):
            continue
        if k in _IGNORED:
            current().fail(TraceError, f"{what}(..., {k}={v!r}) has no meaning in a kernel",
                           hint=f"leave out {k}=: a kernel writes its results to the tensors "
                                "it stores into")
        kept[k] = v
    try:
        return fn(*args, **kept)
    except TypeError as e:  # torch's signature where td's differs: say which call
        if isinstance(e, TileDSLError):  # td's own error (a DTypeError) already says it
            raise
        current().fail(TraceError, f"{what}(): {e}", hint=f"the td function it stands for: "
                       f"td.{fn.__name__}{_signature(fn)}")


def _parameters(fn: Callable[..., Any]) -> Any:
    """The names of `fn`'s parameters (none where Python cannot say)."""
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _signature(fn: Callable[..., Any]) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def host_call(fn: Any) -> Callable[..., Any] | None:
    """The td function a kernel calls for torch's `fn` in HOST_CALLS (torch's factories take
    no tile value, so its protocol never sees them), else None."""
    name = getattr(fn, "__name__", None)
    if name not in HOST_CALLS + HOST_RANDOM or getattr(fn, "__module__", None) != "torch":
        return None
    torch = sys.modules.get("torch")
    if torch is None or getattr(torch, name, None) is not fn:
        return None
    if name in HOST_RANDOM:  # drawn on every call (host_random.py), not td's Philox td.rand
        from tiledsl.lang import host_random
        draw = getattr(host_random, name)

        def drawn(*args: Any, **kwargs: Any) -> Any:
            current().torch_made = True
            return draw(*args, **kwargs)
        return drawn
    td_fn = FUNCTIONS[name]

    def call(*args: Any, **kwargs: Any) -> Any:
        current().torch_made = True  # (a kernel of no array argument returns torch's tensors)
        if name == "tensor" and current().valued and _numbers(args[0] if args else None):
            # a constant beside a valued argument's real tensor (Liger's `torch.equal(
            # grad_output, torch.tensor(1.0, device=grad_output.device))`): torch's own
            return fn(*args, **{k: v for k, v in kwargs.items() if not isinstance(v, Device)})
        if name == "full" and kwargs.get("dtype") is None and len(args) == 2 and \
                isinstance(args[1], (bool, int)):  # torch.full((n,), 3) is int64, (n,), True bool
            kwargs["dtype"] = "bool" if isinstance(args[1], bool) else "int64"
        return _call(f"torch.{name}", td_fn, args, kwargs)
    return call


def _numbers(data: Any) -> bool:
    """Whether `data` is a Python number or a flat list or tuple of them."""
    kinds = (bool, int, float)
    return isinstance(data, kinds) or isinstance(data, (list, tuple)) and \
        all(isinstance(x, kinds) for x in data)


def _method(name: str) -> Callable[..., Any]:
    """torch's `v.exp()`, `v.sigmoid()`, ...: `td.<name>(v, ...)`."""
    def method(self: TileValue, *args: Any, **kwargs: Any) -> Any:
        return _call(f"Tensor.{name}", FUNCTIONS[name], (self, *args), kwargs)
    method.__name__ = name
    method.__doc__ = f"`td.{name}(v, ...)`, as torch's `Tensor.{name}`."
    return method


# torch's math methods of tensors, on tile values (F.sigmoid calls `input.sigmoid()`)
METHODS = ("exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan",
           "tanh", "sigmoid", "abs", "erf", "floor", "ceil", "trunc", "relu", "clamp", "pow",
           "isnan", "isinf", "isfinite", "round")
_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    **dict.fromkeys(("__mul__", "mul", "multiply"), operator.mul),
    **dict.fromkeys(("__add__", "add"), operator.add),
    **dict.fromkeys(("__sub__", "sub", "subtract"), operator.sub),
    **dict.fromkeys(("__truediv__", "div", "divide", "true_divide"), operator.truediv),
    "__rmul__": lambda a, b: b * a, "__radd__": lambda a, b: b + a,
    "__rsub__": lambda a, b: b - a, "__rtruediv__": lambda a, b: b / a}


def _tensor_function(cls: type, func: Callable[..., Any], types: Any, args: tuple = (),
                     kwargs: dict | None = None) -> Any:
    """torch's protocol for a kernel's tensors (host code's `torch.sum(x, 0)`,
    `torch.reshape(x, ...)`): the tensor's method of that name, where it has one."""
    name = getattr(func, "__name__", "")
    kwargs = dict(kwargs or {})
    if not args and isinstance(kwargs.get("input"), Tensor):  # torch.addmm(input=dw, ...)
        args = (kwargs.pop("input"),)
    if name == "where" and len(args) == 3:  # torch.where(cond, x, y): td.where's (host_math.py)
        return FUNCTIONS["where"](*args)
    if name == "broadcast_tensors" and args and all(
            isinstance(a, Tensor) or is_foreign_tensor(a) for a in args):
        shape = broadcast_shapes(current(), [tuple(a.shape) for a in args])  # (FlagGems'
        return tuple(a if tuple(a.shape) == shape else a.expand(*shape)  # masked_select; a
                     for a in args)  # valued argument's real tensor stays one: views, as torch's
    if name in _ARITHMETIC and len(args) == 2 and not kwargs and \
            any(is_foreign_tensor(a, zero_d=True) for a in args):  # a real tensor and a kernel's
        a, b = (capture(v, "operand") if is_foreign_tensor(v, zero_d=True) else v for v in args)
        return _ARITHMETIC[name](a, b)  # (Liger's JSD backward: `grad_output * dX`, a valued
        # 0-d gradient times a tensor its forward saved): host math on both (host_math.py)
    if name == "_reinterpret_tensor" and args and isinstance(args[0], Tensor):  # Inductor's
        return args[0].as_strided(*args[1:], **kwargs)  # (size, stride, offset): as_strided
    if isinstance(kwargs.get("out"), Tensor):  # torch.cumsum(x, -1, out=x) (mamba's): the
        out = kwargs.pop("out")  # result, copied into `out` (host_stores.py)
        return out.copy_(_tensor_function(cls, func, types, args, kwargs))
    if name == "einsum" and args and isinstance(args[0], str):  # (host_matmul.py)
        from tiledsl.lang.host_matmul import einsum
        return einsum(*args)
    if name == "linear" and args and isinstance(args[0], Tensor):  # nn.Linear's forward
        from tiledsl.lang.host_matmul import linear
        return _call("torch.nn.functional.linear", linear, args, kwargs or {})
    if name in ("cat", "concat", "concatenate") and args and isinstance(args[0], (list, tuple)):
        from tiledsl.lang.host_tensors import cat  # (host code's: host_tensors.py)
        return cat(*args, **(kwargs or {}))
    if args and isinstance(args[0], Tensor) and callable(getattr(args[0], name, None)):
        return getattr(args[0], name)(*args[1:], **(kwargs or {}))
    if name in HOST_CALLS and name in FUNCTIONS:  # `torch.atleast_2d([a, b])` of a list
        return _call(f"torch.{name}", FUNCTIONS[name], args, kwargs or {})
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
    known = current().constants
    if tensors and all(t.value in known for t in tensors):  # numbers known while tracing:
        import torch  # torch computes on them (Liger's `int(torch.prod(torch.tensor(batch)))`)
        from tiledsl.interop.arrays import from_numpy  # (bfloat16 through its bits)

        def real(a: Any) -> Any:
            return from_numpy(known[a.value].copy(), torch.empty(0)) \
                if isinstance(a, Tensor) else a
        return func(*map(real, args), **{k: real(v) for k, v in kwargs.items()})
    need_values(tensors)  # (torch's, on the values of small int arguments: fla's
    # repeat_interleave of chunk counts)
    current().fail(TraceError, f"torch.{name} has no tiledsl counterpart on the kernel's "
                   "tensors", hint="host code may view (reshape, permute, x[:, 1:]), reduce "
                   "(x.sum(dim), x.amax(dim), torch.logsumexp), compute elementwise (x + y, "
                   "x.exp(), torch.where, x.masked_fill_) and allocate tensors (torch.empty, "
                   "torch.zeros); anything else is written as a grid over the tensor's tiles")


TileValue.__torch_function__ = classmethod(_torch_function)  # type: ignore[attr-defined]
Tensor.__torch_function__ = classmethod(_tensor_function)  # type: ignore[attr-defined]
for _name in METHODS:
    if not hasattr(TileValue, _name):
        setattr(TileValue, _name, _method(_name))
SUBSTITUTES.append(host_call)


def dtype_arguments(fn: Any) -> Callable[..., Any] | None:
    """Another torch function given a kernel tensor's dtype (FlagGems' `is_integer_dtype(
    x.dtype)` from torch._prims_common, `torch.promote_types(x.dtype, ...)`): called with
    torch's dtype of that name."""
    if not of_torch(fn) or isinstance(fn, type):
        return None

    def call(*args: Any, **kwargs: Any) -> Any:
        if any(isinstance(a, Device) for a in (*args, *kwargs.values())):  # (FlagGems'
            # randperm's torch.randint(..., device=x.device): real torch would want CUDA)
            current().fail(TraceError, f"{fn.__module__}.{fn.__name__}(..., device=x.device) "
                           "makes a tensor on the kernel's device that tiledsl has no "
                           "counterpart of in host code",
                           hint="allocate with torch.empty / zeros / full and fill it in a grid "
                                "(td.randint, td.rand for random numbers)")
        if not any(isinstance(a, dtypes.DType) for a in (*args, *kwargs.values())):
            return fn(*args, **kwargs)
        torch = sys.modules["torch"]
        as_torch = lambda a: getattr(torch, a.name) if isinstance(a, dtypes.DType) else a  # noqa: E731
        return fn(*map(as_torch, args), **{k: as_torch(v) for k, v in kwargs.items()})
    return call


SUBSTITUTES.append(dtype_arguments)


def is_tensor(fn: Any) -> Callable[..., Any] | None:
    """`torch.is_tensor(x)`: True of a kernel's tensors, as `isinstance(x, torch.Tensor)` is
    (FlagGems' generated ops count `t.ndim for t in args if torch.is_tensor(t)`)."""
    if getattr(fn, "__name__", None) != "is_tensor" or not of_torch(fn):
        return None
    return lambda obj: isinstance(obj, Tensor) or isinstance(obj, TileValue) and not obj.weak \
        or fn(obj)


SUBSTITUTES.insert(0, is_tensor)  # (before dtype_arguments, which would call torch's)
