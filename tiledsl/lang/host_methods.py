"""torch's method and function spellings of host math, made of the operators and reductions
host code already has (host_math.py, host_reductions.py, host_matmul.py): `x.ne(v)` and the
other comparisons, `x.add(y, alpha=)`, `x.sub`, `x.mul`, `x.div(y, rounding_mode=)`,
`x.pow(y)` and `**`, `x.clamp(min=, max=)` and `x.clamp_`, `x.reshape_as(y)`,
`x.gather(dim, index)`, `torch.searchsorted`, `torch.diff(x)` (fla's `prepare_lens`),
`torch.count_nonzero(x)` (Unsloth's cross entropy), `torch.matmul(a, b, out=)` (and
`torch.mm`), `x.addmm_(a, b, alpha=)` / `torch.addmm(input=, mat1=, mat2=, out=)`
(Unsloth's LoRA, fla's fused KL divergence), and the in-place `x.add_(y, alpha=)`, `x.sub_`,
`x.mul_`, `x.div_` (Liger's fused linear JSD). Each is a grid of its own, as the operators it
stands for.
"""

from __future__ import annotations

from typing import Any

from tiledsl import dtypes
from tiledsl.errors import ShapeError, TraceError, user_loc
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, no_math, to_value
from tiledsl.frontend.loops import loop
from tiledsl.lang import language as lang
from tiledsl.lang.host_math import elementwise, in_place
from tiledsl.lang.host_matmul import matmul
from tiledsl.lang.host_tensors import cat
from tiledsl.lang.views import tensor_index


def _method(name: str, op: str) -> Any:
    def method(self: Tensor, other: Any) -> Any:
        return getattr(Tensor, op)(self, other)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"torch's `x.{name}(y)`: `x.{op}(y)` in host code."
    return method


def _one(v: Any) -> bool:
    """Whether a scale is the number 1 (a runtime scalar is not known to be)."""
    return isinstance(v, (int, float)) and v == 1


def add(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    """torch's `x.add(y, alpha=a)`: `x + a * y`."""
    return self + (other if _one(alpha) else other * alpha)  # type: ignore[operator]


def sub(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    """torch's `x.sub(y, alpha=a)`: `x - a * y`."""
    return self - (other if _one(alpha) else other * alpha)  # type: ignore[operator]


def div(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """torch's `x.div(y, rounding_mode=None | "floor" | "trunc")`."""
    if rounding_mode is None:
        return self / other  # type: ignore[operator]
    if rounding_mode == "floor":
        return self // other  # type: ignore[operator]
    if rounding_mode == "trunc":
        out = elementwise(f"{self.name}.div(..., rounding_mode='trunc')",
                          lambda a, b: _trunc_div(a, b), self, other)
        if out is not None:
            return out
    current().fail(TraceError, f"{self.name}.div(..., rounding_mode={rounding_mode!r}): torch's "
                   "modes are None, 'floor' and 'trunc' (of a tensor and a tensor or number)")


def _trunc_div(a: Any, b: Any) -> Any:
    """The quotient rounded toward zero: of floats, trunc(a / b); of ints, exactly, the floor
    quotient moved one toward zero where it went past (signs differ, remainder not zero)."""
    from tiledsl.frontend.td_names import FUNCTIONS
    a, b = to_value(a), to_value(b)
    if a.dtype.is_float or b.dtype.is_float:
        return FUNCTIONS["trunc"](a / b)
    q = a // b
    return FUNCTIONS["where"](((a % b) != 0) & ((a < 0) != (b < 0)), q + 1, q)


def _power(swap: bool) -> Any:
    """`x ** y` (`x.pow(y)`), or `y ** x` where `swap`, of a tensor x in host code."""
    def method(self: Tensor, other: Any) -> Tensor:
        what = f"... ** {self.name}" if swap else f"{self.name} ** ..."
        if current(what).depth != "host":
            no_math(self, f"2 ** {self.name}[t]" if swap else f"{self.name}[t] ** 2")
        out = elementwise(what, (lambda a, b: b ** a) if swap else (lambda a, b: a ** b),
                          self, other)
        if out is None:
            current().fail(TraceError, f"{what}: host code raises tensors and numbers to "
                           f"tensors and numbers, not a {type(other).__name__}")
        return out
    return method


_pow, _rpow = _power(False), _power(True)


def _in_place_method(name: str, fn: Any) -> Any:
    """torch's `x.add_(y, alpha=)`, `x.sub_`, `x.mul_(y)`, `x.div_(y)` in host code: x
    updated in place (Liger's fused linear JSD: `grad_weight.add_(g.t() @ x)`), a grid."""
    def method(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
        if current(f"{self.name}.{name}()").depth != "host":
            no_math(self, f"{self.name}[t] = {self.name}[t] ...")
        scaled = other if _one(alpha) else other * alpha
        return in_place(self, f"{self.name}.{name}(...)", fn, scaled)
    method.__name__ = method.__qualname__ = name
    return method


def clamp(self: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 (torch's)
    """torch's `x.clamp(min=, max=)` (and `torch.clamp`, `x.clip`) in host code."""
    from tiledsl.frontend.td_names import FUNCTIONS
    out = elementwise(f"{self.name}.clamp(...)", lambda v: FUNCTIONS["clamp"](v, min, max), self)
    assert out is not None  # (one tensor operand)
    return out


def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """torch's `x.clamp_(min=, max=)`: x clamped in place (SGLang's top-k renorm)."""
    from tiledsl.frontend.td_names import FUNCTIONS
    return in_place(self, f"{self.name}.clamp_(...)", lambda v: FUNCTIONS["clamp"](v, min, max))


def gather(self: Tensor, dim: int, index: Any, *, sparse_grad: bool = False) -> Tensor:
    """torch's `x.gather(dim, index)` (and `torch.gather`) in host code: a grid over index's
    shape reading `x` at index's values along `dim` and at each element's own position along
    the others (SGLang's renorms: `sorted_probs.gather(1, cutoff.unsqueeze(1))`)."""
    tr = current(f"{self.name}.gather()")
    if not isinstance(index, Tensor) or index.ndim != self.ndim or not index.dtype.is_int:
        tr.fail(ShapeError, f"{self.name}.gather({dim}, index): the index is an integer tensor "
                f"of x's rank ({self.ndim})")
    axis = dim % self.ndim
    if any(n > m for d, (n, m) in enumerate(zip(index.shape, self.shape)) if d != axis):
        tr.fail(ShapeError, f"{self.name}.gather({dim}, index): index shape {index.shape} is "
                f"larger than x's {self.shape} off dimension {dim} (torch's rule)")
    out = lang.empty(index.shape, self.dtype)

    def body(tiles: Any, env: dict) -> dict:
        tiles = tiles if isinstance(tiles, tuple) else (tiles,)
        keys = [index[tiles] if d == axis else tiles[d].index[tuple(
            slice(None) if e == d else None for e in range(self.ndim))]
            for d in range(self.ndim)]
        out[tiles] = self[tuple(keys)]
        return {}

    loc = user_loc()
    loop(lang.tile(*index.shape), body, {}, (), None, loc.line if loc is not None else 0)
    return out


def searchsorted(self: Tensor, values: Any, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Any = None) -> Tensor:
    """torch's `torch.searchsorted(sorted_sequence, values, right=)` in host code: for each
    value, how many elements of its row of the sequence lie below it (`<=` with `right=True`):
    a grid over the values, each counting its row tile by tile (SGLang's top-p renorm)."""
    tr = current(f"torch.searchsorted({self.name}, ...)")
    from tiledsl.frontend.td_names import FUNCTIONS
    right = right or side == "right"
    if sorter is not None or not isinstance(values, Tensor) or values.ndim == 0 or \
            self.ndim > 1 and tuple(values.shape[:-1]) != tuple(self.shape[:-1]):
        tr.fail(ShapeError, "torch.searchsorted in host code takes a sorted tensor and a tensor "
                "of values with its leading dimensions (no sorter=)")
    n = self.shape[-1]
    out = lang.empty(values.shape, dtypes.int32 if out_int32 else dtypes.int64)
    loc = user_loc()
    line = loc.line if loc is not None else 0

    def body(tiles: Any, env: dict) -> dict:
        tiles = tiles if isinstance(tiles, tuple) else (tiles,)
        lead = (slice(None),) * (values.ndim - 1)
        vals = values[tiles][(*lead, slice(None), None)]  # (..., values, 1)

        def step(tk: Any, e: dict) -> dict:
            row = self[(*tiles[:-1], tk) if self.ndim > 1 else (tk,)]  # (..., tk) or (tk,)
            row = row[(*(lead if self.ndim > 1 else ()), None, slice(None))]
            below = (row <= vals) if right else (row < vals)
            counted = FUNCTIONS["where"](tk.index < n, below, False).astype(out.dtype)
            return {"acc": e["acc"] + FUNCTIONS["sum"](counted, axis=-1)}
        first = lang.zeros(values[tiles].shape, out.dtype)
        out[tiles] = loop(lang.tile(n), step, {"acc": first}, ("acc",), None, line)["acc"]
        return {}

    loop(lang.tile(*values.shape), body, {}, (), None, line)
    return out


def reshape_as(self: Tensor, other: Any) -> Tensor:
    """torch's `x.reshape_as(y)`: `x.reshape(y.shape)` (a copy where no view can be)."""
    return self.reshape(tuple(other.shape))  # type: ignore[attr-defined]


def diff(self: Tensor, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None
         ) -> Tensor:
    """torch's `torch.diff(x, n, dim, prepend=, append=)`: `x[1:] - x[:-1]` along `dim`, `n`
    times, of x with `prepend` and `append` joined to it first (torchao's group sizes:
    `torch.diff(ends, prepend=ends.new_zeros(1))`)."""
    tr = current(f"torch.diff({self.name})")
    if self.ndim == 0:
        tr.fail(ShapeError, "torch.diff of a 0-d tensor (torch: diff expects input to be at "
                "least one-dimensional)")
    axis = dim % self.ndim
    out = self
    if prepend is not None or append is not None:
        parts = [p for p in (prepend, self, append) if p is not None]
        out = cat(parts, axis)
    for _ in range(n):
        if out.shape[axis] == 0:
            break
        head = (slice(None),) * axis
        later = tensor_index(out, (*head, slice(1, None)))
        earlier = tensor_index(out, (*head, slice(None, -1)))
        out = later != earlier if out.dtype.is_bool else later - earlier  # type: ignore[operator]
    return out


def count_nonzero(self: Tensor, dim: Any = None) -> Tensor:
    """torch's `torch.count_nonzero(x, dim)`: int64 counts of the elements that are not zero."""
    return (self != 0).sum(dim, dtype=dtypes.int64)  # type: ignore[attr-defined,operator]


def matmul_out(self: Tensor, other: Any, *, out: Any = None) -> Tensor:
    """torch's `torch.matmul(a, b, out=None)`: `a @ b`, written into `out` where given."""
    product = matmul(self, other)
    if out is None:
        return product
    out.copy_(product)
    return out


def addmm_(self: Tensor, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """torch's `x.addmm_(a, b, beta=1, alpha=1)`: `x = beta * x + alpha * (a @ b)` in place."""
    product = matmul(mat1, mat2)
    if not _one(beta):
        in_place(self, f"{self.name}.addmm_(...)", lambda x: x * beta)
    return in_place(self, f"{self.name}.addmm_(...)", lambda x, p: x + p if _one(alpha)
                    else x + p * alpha, product)


def addmm(self: Tensor, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1,
          out: Any = None) -> Tensor:
    """torch's `torch.addmm(input, mat1, mat2, beta=, alpha=, out=)`: a new tensor, or `out`
    (fla's `torch.addmm(input=dw, mat1=..., mat2=..., out=dw)` accumulates in place)."""
    if out is self:
        return addmm_(self, mat1, mat2, beta=beta, alpha=alpha)
    product = matmul(mat1, mat2)
    result = (self if _one(beta) else self * beta) + (  # type: ignore[operator]
        product if _one(alpha) else product * alpha)
    if out is None:
        return result
    out.copy_(result)
    return out


for _name, _op in (("eq", "__eq__"), ("ne", "__ne__"), ("lt", "__lt__"), ("le", "__le__"),
                   ("gt", "__gt__"), ("ge", "__ge__"), ("mul", "__mul__"),
                   ("true_divide", "__truediv__"), ("floor_divide", "__floordiv__"),
                   ("remainder", "__mod__")):
    setattr(Tensor, _name, _method(_name, _op))
Tensor.add, Tensor.sub, Tensor.div = add, sub, div  # type: ignore[attr-defined]
for _name, _fn in (("add_", lambda a, b: a + b), ("sub_", lambda a, b: a - b),
                   ("mul_", lambda a, b: a * b), ("div_", lambda a, b: a / b)):
    setattr(Tensor, _name, _in_place_method(_name, _fn))
Tensor.__pow__, Tensor.__rpow__ = _pow, _rpow  # type: ignore[method-assign,assignment]
Tensor.pow = _pow  # type: ignore[attr-defined]
Tensor.reshape_as = reshape_as  # type: ignore[attr-defined]
Tensor.gather = gather  # type: ignore[attr-defined]
Tensor.searchsorted = searchsorted  # type: ignore[attr-defined]
Tensor.clamp = Tensor.clip = clamp  # type: ignore[attr-defined]
Tensor.clamp_ = Tensor.clip_ = clamp_  # type: ignore[attr-defined]
Tensor.diff = diff  # type: ignore[attr-defined]
Tensor.count_nonzero = count_nonzero  # type: ignore[attr-defined]
Tensor.matmul = Tensor.mm = matmul_out  # type: ignore[attr-defined]
Tensor.addmm_ = addmm_  # type: ignore[attr-defined]
Tensor.addmm = addmm  # type: ignore[attr-defined]
