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

from typing import Any, Callable

from tiledsl.errors import TraceError
from tiledsl.frontend.td_names import FUNCTIONS
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, as_dtype, binary, cast, to_value


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
         "acosh", "atanh", "hypot", "copysign", "fmod", "isnan", "isinf", "isfinite", "pow")
CALLS: dict[str, str] = {name: name for name in _SAME} | {"clip": "clamp", "mm": "matmul"}


def _torch_function(cls: type, func: Callable[..., Any], types: Any, args: tuple = (),
                    kwargs: dict | None = None) -> Any:
    """torch's protocol: `torch.<name>(...)` with a tile value among its arguments."""
    name = getattr(func, "__name__", "")
    target = CALLS.get(name)
    fn = FUNCTIONS.get(target) if target is not None else None
    if fn is None:
        module = getattr(func, "__module__", None) or "torch"
        current().fail(TraceError, f"{module}.{name} has no tiledsl counterpart on tile values",
                       hint="the torch functions a kernel may call on tiles are "
                            + ", ".join(f"torch.{n}" for n in sorted(CALLS))
                            + "; or write the td. function")
    return fn(*args, **(kwargs or {}))


TileValue.__torch_function__ = classmethod(_torch_function)  # type: ignore[attr-defined]
