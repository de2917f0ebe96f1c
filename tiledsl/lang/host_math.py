"""torch's whole-tensor math in host code: `losses += logsumexp`, `labels == -100`,
`x.masked_fill_(mask, 0)`, `torch.exp(x)`, `torch.logsumexp(x, dim)` between a wrapper's
kernels (Unsloth's chunked cross entropy, Helion's host code). Each is a grid of its own over
the result's shape (operands broadcast as torch's, through stride-0 views), writing a new
tensor, or the left operand in place for `+=` and `masked_fill_`.

Inside the grid a tensor is memory, indexed before computing (values.py `no_math`), and
`x + offs` is Triton's pointer (pointers.py); in host code `x + k` of a number is math, as
torch's (Helion's gather_gemv wraps indices with `torch.where(idx < 0, idx + n, idx)`), and
`x + offs` of a tile stays the pointer arithmetic's error (it belongs inside the grid).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tiledsl import dtypes
from tiledsl.errors import ShapeError, TraceError, user_loc
from tiledsl.frontend.captured import capture, is_foreign_tensor
from tiledsl.frontend.loops import loop
from tiledsl.frontend.td_names import FUNCTIONS
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, TileValue, constant, no_math
from tiledsl.ir.gathers import broadcast_dims
from tiledsl.lang import language as lang
from tiledsl.lang.views import tensor_expand

Fn = Callable[..., TileValue]
_NUMBER = (bool, int, float, np.number)


def _line() -> int:
    loc = user_loc()
    return loc.line if loc is not None else 0


def _operands(what: str, xs: tuple) -> tuple[tuple, list[Tensor]] | None:
    """The operands' common shape and tensors, or None where an operand is neither a tensor
    nor a number nor a scalar (an int or float argument: `triton.cdiv(lens, BT)`)."""
    if not all(isinstance(x, (Tensor, *_NUMBER)) or isinstance(x, TileValue) and x.shape == ()
               for x in xs):
        return None
    tensors = [x for x in xs if isinstance(x, Tensor)]
    shape = broadcast_dims([t.shape for t in tensors])
    if shape is None:
        current().fail(ShapeError, f"{what}: shapes " + ", ".join(str(t.shape) for t in tensors)
                       + " do not broadcast", hint="as torch's: trailing dimensions equal or 1")
    return tuple(shape), tensors


def _dtype(fn: Fn, xs: tuple) -> Any:
    """The dtype `fn` gives on elements of `xs` (traced on scalars of theirs, then dropped)."""
    tr = current()
    block = tr.blocks[-1]
    start = len(block.ops)
    probe = [constant(0, x.dtype) if isinstance(x, Tensor) else x for x in xs]
    dtype = fn(*probe).dtype
    del block.ops[start:]
    return dtype


def elementwise(what: str, fn: Fn, *xs: Any) -> Tensor | None:
    """`fn` of the operands' elements as a new tensor (a grid of its own); None where an operand
    is not a tensor or a number."""
    got = _operands(what, xs)
    if got is None:
        return None
    shape, _ = got
    if shape == ():  # 0-d tensors (a full reduction's): on their one element
        flat = elementwise(what, fn, *(x.reshape(1) if isinstance(x, Tensor) else x for x in xs))
        return None if flat is None else flat.reshape(())  # type: ignore[attr-defined]
    out = lang.empty(shape, _dtype(fn, xs))
    spread = [tensor_expand(x, *shape) if isinstance(x, Tensor) and x.shape != shape else x
              for x in xs]

    def body(tiles: Any, env: dict) -> dict:
        out[tiles] = fn(*(x[tiles] if isinstance(x, Tensor) else x for x in spread))
        return {}

    loop(lang.tile(*shape), body, {}, (), None, _line())
    return out


def in_place(t: Tensor, what: str, fn: Fn, *xs: Any) -> Tensor:
    """`t = fn(t, *xs)` elementwise, written into t (a grid of its own); returns t."""
    got = _operands(what, (t, *xs))
    if got is None or got[0] != t.shape:
        current().fail(ShapeError, f"{what}: the result has shape {got and got[0]}, not "
                       f"'{t.name}''s {t.shape}", hint="in place, the other operands broadcast "
                       "to the tensor's shape")
    if t.shape == ():  # a 0-d tensor (a full reduction's, attorch's `output /= sum_weights`)
        flat = [x.reshape(1) if isinstance(x, Tensor) else x for x in xs]  # type: ignore[attr-defined]
        in_place(t.reshape(1), what, fn, *flat)  # type: ignore[attr-defined]
        return t
    spread = [tensor_expand(x, *t.shape) if isinstance(x, Tensor) and x.shape != t.shape else x
              for x in xs]

    def body(tiles: Any, env: dict) -> dict:
        t[tiles] = fn(t[tiles], *(x[tiles] if isinstance(x, Tensor) else x for x in spread))
        return {}

    loop(lang.tile(*t.shape), body, {}, (), None, _line())
    return t


def _binary(name: str, fn: Fn, before: Callable, swap: bool = False) -> Callable:
    """The dunder method: host math, else what the method did `before` (a pointer inside a
    grid, pointers.py; the errors of values.py)."""
    def method(self: Tensor, other: Any) -> Any:
        if other is None and name in ("==", "!="):  # `if k_cache == None:` (lightllm's), as
            return name == "!="  # Python answers it for a torch tensor: a bool
        if current(f"{self.name} {name} ...").depth == "host":
            other = _captured(other)
            args = (other, self) if swap else (self, other)
            out = elementwise(f"{self.name} {name} ...", fn, *args)
            if out is not None:
                return out
        return before(self, other)
    return method


def _inplace(name: str, fn: Fn) -> Callable:
    def method(self: Tensor, other: Any) -> Tensor:
        tr = current(f"{self.name} {name}= ...")
        if tr.depth == "host":
            other = _captured(other)
        if tr.depth == "host" and (isinstance(other, (Tensor, *_NUMBER)) or
                                   isinstance(other, TileValue) and other.shape == ()):
            return in_place(self, f"{self.name} {name}= ...", fn, other)
        return getattr(Tensor, {"+": "__add__", "-": "__sub__", "*": "__mul__",
                                "/": "__truediv__"}[name])(self, other)  # (x_ptr += k)
    return method


def _captured(v: Any) -> Any:
    """A torch tensor or NumPy array the kernel does not take (attorch's conv adds
    `self.bias.view(1, -1, 1, 1)` to its output): a hidden argument (frontend/captured.py)."""
    return capture(v, "tensor") if is_foreign_tensor(v) else v


def _unary(name: str, fn: Fn) -> Callable:
    def method(self: Tensor) -> Tensor:
        if current(f"{self.name}.{name}()").depth != "host":
            no_math(self, f"{self.name}[t].{name}()")
        out = elementwise(f"{self.name}.{name}()", fn, self)
        assert out is not None
        return out
    method.__name__ = name
    return method


def masked_fill_(t: Tensor, mask: Tensor, value: Any) -> Tensor:
    """torch's `x.masked_fill_(mask, v)` in host code: v where mask holds, in place."""
    return in_place(t, f"{t.name}.masked_fill_", lambda x, m: lang.where(m, value, x), mask)


def masked_fill(t: Tensor, mask: Tensor, value: Any) -> Tensor:
    """torch's `x.masked_fill(mask, v)`: a new tensor."""
    out = elementwise(f"{t.name}.masked_fill", lambda x, m: lang.where(m, value, x), t, mask)
    assert out is not None
    return out


def logsumexp(t: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """torch's `torch.logsumexp(x, dim)` in host code: max, then the log of the shifted sum."""
    m = t.amax(dim, keepdim=True)  # type: ignore[attr-defined]
    s = (t - m).exp().sum(dim, keepdim=True).log() + m  # type: ignore[attr-defined]
    return s if keepdim else s.squeeze(dim)  # type: ignore[attr-defined]


def log_softmax(t: Tensor, dim: Any = -1, dtype: Any = None, _stacklevel: int = 3) -> Tensor:
    """torch's `torch.log_softmax(x, dim)` in host code (Liger's fused linear JSD): `x -
    logsumexp(x, dim)`, in float32 for 16-bit floats, in x's dtype (or `dtype`)."""
    v = t.to(dtypes.float32) if t.dtype.is_float and t.dtype.bits < 32 else t  # type: ignore[attr-defined]
    out = v - logsumexp(v, dim, keepdim=True)
    return out.to(t.dtype if dtype is None else dtype)  # type: ignore[attr-defined]


def softmax(t: Tensor, dim: Any = -1, dtype: Any = None, _stacklevel: int = 3) -> Tensor:
    """torch's `torch.softmax(x, dim)` in host code: exp of `log_softmax`, as computed there."""
    return log_softmax(t, dim, dtypes.float32).exp().to(  # type: ignore[attr-defined]
        t.dtype if dtype is None else dtype)


def _where_of_tensors(cond: Any, x: Any, y: Any) -> Tensor:
    """`td.where(cond, x, y)` (`torch.where`) of tensors in host code: a new tensor."""
    out = elementwise("td.where", lang.where, cond, x, y)
    if out is None:
        current().fail(TraceError, "td.where in host code takes tensors and numbers",
                       hint="select tiles inside a grid: td.where(m, x[t], y[t])")
    return out


_OPS: dict[str, Fn] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
}
for _dunder, _op, _swap in [
        ("__add__", "+", False), ("__radd__", "+", True), ("__sub__", "-", False),
        ("__rsub__", "-", True), ("__mul__", "*", False), ("__rmul__", "*", True),
        ("__truediv__", "/", False), ("__rtruediv__", "/", True), ("__eq__", "==", False),
        ("__ne__", "!=", False), ("__lt__", "<", False), ("__le__", "<=", False),
        ("__gt__", ">", False), ("__ge__", ">=", False), ("__floordiv__", "//", False),
        ("__rfloordiv__", "//", True), ("__mod__", "%", False), ("__rmod__", "%", True)]:
    setattr(Tensor, _dunder, _binary(_op, _OPS[_op], getattr(Tensor, _dunder), _swap))
for _dunder, _op in [("__iadd__", "+"), ("__isub__", "-"), ("__imul__", "*"),
                     ("__itruediv__", "/")]:
    setattr(Tensor, _dunder, _inplace(_op, _OPS[_op]))
lang.host_where = _where_of_tensors
Tensor.__neg__ = _unary("neg", lambda x: -x)  # type: ignore[method-assign,assignment]
for _name, _fn in [("exp", lang.exp), ("log", lang.log), ("sqrt", lang.sqrt),
                   ("abs", lang.abs)]:
    setattr(Tensor, _name, _unary(_name, _fn))
for _name in ("floor", "ceil", "trunc", "round", "rsqrt", "sigmoid", "tanh", "exp2", "log2"):
    setattr(Tensor, _name, _unary(_name, lambda x, _n=_name: FUNCTIONS[_n](x)))  # (int4
    # quantization's `(-w_min / scale).round().clamp(0, 15)`)
Tensor.__abs__ = Tensor.abs  # type: ignore[attr-defined]
Tensor.masked_fill_ = masked_fill_  # type: ignore[attr-defined]
Tensor.masked_fill = masked_fill  # type: ignore[attr-defined]
Tensor.logsumexp = logsumexp  # type: ignore[attr-defined]
Tensor.log_softmax = log_softmax  # type: ignore[attr-defined]
Tensor.softmax = softmax  # type: ignore[attr-defined]
