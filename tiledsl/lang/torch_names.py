"""torch's (and Triton's) names for what tiledsl already computes, so that a kernel ported from
torch, Helion or Triton keeps its spelling: `td.relu`, `td.silu`, `td.matmul`, `td.addmm`,
`td.promote_types`; on tile values `v.cast(dtype)` (Triton's `.to`),
`v.masked_fill(mask, value)`, `v.amax(dim)` and `v.amin(dim)` (and `td.amax`, `td.amin`),
`v.float()`, `v.half()`, `v.bfloat16()`, `v.double()`, `v.int()`, `v.long()`, `v.bool()`,
`td.var_mean`, `td.var` and `td.std` (also as methods, with `correction=`), Helion's
`td.register_reduction_dim`; on tensors `x.numel()` and
`x.size(d)` / `x.size()` (while `x.size`, as NumPy's attribute, stays the element count). Each is a composition of existing
ops: none adds an op to the IR.
"""

from __future__ import annotations

import sys
from math import prod
from typing import Any, Self

import ml_dtypes
import numpy as np

from tiledsl import dtypes
from tiledsl.dtypes import DType
from tiledsl.errors import DTypeError, ShapeError, TraceError, user_loc
from tiledsl.frontend.numpy_scalars import numpy_scalar_result
from tiledsl.frontend.tracer import active, current
from tiledsl.ir.views import offset_of, root, row_major, strides_of
from tiledsl.frontend.values import (
    Tensor,
    TileValue,
    as_dtype,
    binary,
    need_static,
    cast,
    constant,
    dot,
    to_value,
    unary,
    where,
)


@numpy_scalar_result
def relu(x: Any) -> TileValue:
    """`torch.relu`: `td.maximum(x, 0)` (NaN stays NaN)."""
    current("td.relu()")
    return binary("maximum", x, 0)


@numpy_scalar_result
def silu(x: Any) -> TileValue:
    """`torch.nn.functional.silu`: `x * td.sigmoid(x)`; 16-bit floats compute in float32 and
    round once."""
    current("td.silu()")
    v = to_value(x)
    if v.dtype.is_float and v.dtype.bits < 32:
        return cast(silu(cast(v, dtypes.float32)), v.dtype)
    return binary("mul", v, unary("sigmoid", v))


def matmul(a: Any, b: Any) -> TileValue:
    """`torch.matmul`: `a @ b`."""
    current("td.matmul()")
    return dot(a, b)


def addmm(acc: Any, a: Any, b: Any) -> TileValue:
    """`torch.addmm(acc, a, b)`: `acc + a @ b`, in acc's dtype when acc is a tile (acc may
    broadcast, as a bias row). On Triton, an acc of the product's shape and dtype becomes
    `tl.dot(a, b, acc)`."""
    current("td.addmm()")
    c = to_value(acc)
    out = binary("add", c, dot(a, b))
    return out if c.weak else cast(out, c.dtype)


def promote_types(a: Any, b: Any) -> DType:
    """`torch.promote_types` on td (or NumPy) dtypes: the dtype a and b meet at (`dtypes.promote`:
    float16 and bfloat16 meet at float32)."""
    da, db = dtypes.from_any(a), dtypes.from_any(b)
    bad = a if da is None else b if db is None else None
    if da is None or db is None:
        raise DTypeError(f"td.promote_types: {bad!r} is not a tiledsl dtype", loc=user_loc(),
                         hint="use td.float32, td.float16, td.bfloat16, td.int32, ...")
    out = dtypes.promote(da, db)
    if out is None:
        raise DTypeError(f"td.promote_types: {da} and {db} have no common dtype",
                         loc=user_loc(), hint="uint64 meets a signed int only through float64, "
                         "which would round it: cast one side first")
    return out


def _cast(self: TileValue, dtype: Any) -> TileValue:
    """`v.cast(dtype)`: Triton's spelling of `.to` / `.astype`."""
    return self.to(dtype)


def _masked_fill(self: TileValue, mask: Any, value: Any) -> TileValue:
    """`v.masked_fill(mask, value)` (torch): `td.where(mask, value, v)` in v's dtype and shape."""
    tr = current()
    m = to_value(mask)
    out = where(m, cast(to_value(value), self.dtype), self)
    if out.shape != self.shape:
        tr.fail(ShapeError, f"masked_fill: a mask of shape {tr.describe_shape(m.shape)} does not "
                f"broadcast to the tile's shape {tr.describe_shape(self.shape)}")
    return out


class TensorSize(int):
    """`x.size`: the element count (NumPy's attribute), also callable as torch's method:
    `x.size()` is the shape, `x.size(d)` dimension d's extent."""

    shape: tuple[int, ...]

    def __new__(cls, shape: tuple[int, ...]) -> Self:
        out = super().__new__(cls, prod(int(d) for d in shape))
        out.shape = shape
        return out

    def __reduce__(self) -> tuple:  # pickles (into traces, to tuning workers) as the int
        return (int, (int(self),))

    def __call__(self, dim: Any = None) -> Any:
        if dim is None:
            return self.shape
        need_static(dim)  # an int argument (FlagGems' `inp.size(dim)`): traced as that int
        if isinstance(dim, bool) or not isinstance(dim, int) or \
                not -len(self.shape) <= dim < len(self.shape):
            current().fail(ShapeError, f"x.size({dim!r}): not a dimension of a "
                           f"{len(self.shape)}-D tensor of shape {self.shape}")
        return self.shape[dim]


def _amax(self: TileValue, dim: Any = None, keepdim: bool = False) -> TileValue:
    """`v.amax(dim, keepdim)` (torch): the maximum over `dim` (all if None), as `v.max`."""
    return self.max(dim, keepdim)


def _amin(self: TileValue, dim: Any = None, keepdim: bool = False) -> TileValue:
    """`v.amin(dim, keepdim)` (torch): the minimum over `dim`, as `v.min`."""
    return self.min(dim, keepdim)


@numpy_scalar_result
def amax(x: Any, dim: Any = None, keepdim: bool = False) -> TileValue:
    """`torch.amax(x, dim, keepdim)`: `td.max`."""
    current("td.amax()")
    return to_value(x).max(dim, keepdim)


@numpy_scalar_result
def amin(x: Any, dim: Any = None, keepdim: bool = False) -> TileValue:
    """`torch.amin(x, dim, keepdim)`: `td.min`."""
    current("td.amin()")
    return to_value(x).min(dim, keepdim)


def var_mean(x: Any, dim: Any = None, *, correction: int = 1, keepdim: bool = False,
             unbiased: bool | None = None) -> tuple[TileValue, TileValue]:
    """`torch.var_mean(x, dim, correction=, keepdim=)`: the variance over `dim`, divided by
    n - correction (Bessel's 1 by default; Helion's layer norms pass 0), and the mean. A
    correction needs the reduced axes' sizes: constant ones (a tile's is known at run time)."""
    tr = current("td.var_mean()")
    v = to_value(x)
    if unbiased is not None:
        correction = int(unbiased)
    centered = v - v.mean(dim, True)
    var = (centered * centered).mean(dim, keepdim)
    if correction:
        axes = range(v.ndim) if dim is None else [d % v.ndim for d in (
            dim if isinstance(dim, (tuple, list)) else (dim,))]
        sizes = [v.shape[a] for a in axes]
        if not all(isinstance(n, int) for n in sizes):
            tr.fail(ShapeError, f"td.var_mean: correction={correction} over a tile's axis, "
                    "whose size is known when the kernel runs",
                    hint="pass correction=0 (as Helion's layer norms do), or reduce over "
                         "axes of a constant size")
        n = prod(sizes)  # type: ignore[arg-type]
        var = var * (n / (n - correction)) if n > correction else var * float("nan")
    return var, v.mean(dim, keepdim)


def var(x: Any, dim: Any = None, *, correction: int = 1, keepdim: bool = False,
        unbiased: bool | None = None) -> TileValue:
    """`torch.var`: see `var_mean`."""
    return var_mean(x, dim, correction=correction, keepdim=keepdim, unbiased=unbiased)[0]


def std(x: Any, dim: Any = None, *, correction: int = 1, keepdim: bool = False,
        unbiased: bool | None = None) -> TileValue:
    """`torch.std`: the square root of `var`."""
    return unary("sqrt", var(x, dim, correction=correction, keepdim=keepdim, unbiased=unbiased))


def result_type(a: Any, b: Any) -> DType:
    """`torch.result_type(a, b)` of tensors, tile values and numbers: the dtype they compute in
    (a Python number is weak: an int tensor with a float is float32, as torch's default)."""
    typed = [dtypes.from_any(x.dtype) for x in (a, b) if hasattr(x, "dtype")]
    numbers = [x for x in (a, b) if not hasattr(x, "dtype")]
    if not typed:
        return dtypes.float32 if any(isinstance(x, float) for x in numbers) else dtypes.int64
    out = typed[0] if len(typed) == 1 else promote_types(*typed)
    if any(isinstance(x, float) for x in numbers) and not out.is_float:
        return dtypes.float32
    return out


def finfo(dtype: Any) -> Any:
    """`torch.finfo(dtype)` (and Triton ports' `td.finfo`) of a td, torch or NumPy float dtype:
    NumPy's `finfo` (max, min, eps, tiny), a Python value while the kernel traces."""
    d = dtypes.from_any(dtype)
    if d is None or not d.is_float:
        raise DTypeError(f"td.finfo: {dtype!r} is not a float dtype", loc=user_loc())
    return ml_dtypes.finfo(d.np)


def iinfo(dtype: Any) -> Any:
    """`torch.iinfo(dtype)` of an integer dtype: NumPy's `iinfo` (max, min, bits)."""
    d = dtypes.from_any(dtype)
    if d is None or not d.is_int:
        raise DTypeError(f"td.iinfo: {dtype!r} is not an integer dtype", loc=user_loc())
    return np.iinfo(d.np)


def register_reduction_dim(size: Any) -> Any:
    """Helion's `hl.register_reduction_dim(n)`: a dimension a tile takes whole, here `n` itself
    (a tile over it is `:` or a shape entry, as `td.zeros((tm, n))`)."""
    current("td.register_reduction_dim()")
    return size


def _converter(dtype: DType) -> Any:
    """torch's `v.float()`, `v.half()`, ...: `v.to(dtype)`."""
    def convert(self: TileValue) -> TileValue:
        return self.to(dtype)
    convert.__doc__ = f"`v.to(td.{dtype})`, as torch's."
    return convert


def _size(self: Tensor) -> TensorSize:
    return TensorSize(self.shape)


def _numel(self: Tensor) -> TensorSize:
    """`x.numel()` (torch): the element count."""
    return _size(self)


# Methods of tile values and tensors, added here as views.py adds the views.
TileValue.cast = _cast  # type: ignore[attr-defined]
TileValue.masked_fill = _masked_fill  # type: ignore[attr-defined]
TileValue.amax = _amax  # type: ignore[attr-defined]
TileValue.amin = _amin  # type: ignore[attr-defined]
TileValue.var = var  # type: ignore[attr-defined]
TileValue.contiguous = lambda self: self  # type: ignore[attr-defined] (a value has no layout)
TileValue.std = std  # type: ignore[attr-defined]
for _name, _dtype in (("float", dtypes.float32), ("double", dtypes.float64),
                      ("half", dtypes.float16), ("bfloat16", dtypes.bfloat16),
                      ("int", dtypes.int32), ("long", dtypes.int64), ("bool", dtypes.bool_)):
    setattr(TileValue, _name, _converter(_dtype))
def _is_non_overlapping_and_dense(self: Tensor) -> bool:
    """torch's `x.is_non_overlapping_and_dense()` (`torch.ops.aten.`'s, which FlagGems'
    pointwise wrappers ask): x's elements fill the span of memory they reach, without gaps or
    overlaps, in some order of its dimensions (a transpose does; a column slice does not)."""
    span = 1
    for stride, n in sorted((st, n) for n, st in zip(self.shape, self.stride()) if n != 1):
        if stride != span:
            return False
        span *= n
    return True


def _layout(self: Tensor) -> Any:
    """torch's `x.layout`: a kernel's tensors are strided (`torch.strided`)."""
    torch = sys.modules.get("torch")
    return torch.strided if torch is not None else "strided"


def _scalar_stride(self: TileValue, dim: Any = None) -> tuple[int, ...]:
    """torch's `x.stride()` of a 0-d tensor argument: `()`; a tile has none."""
    if self.shape != () or dim is not None:
        current("x.stride()").fail(TraceError, f"stride({'' if dim is None else dim}) of a "
                                   f"{'tile' if self.shape else '0-d scalar'}: only tensors "
                                   "have strides", hint="ask the tensor the tile was loaded from")
    return ()


def _contiguous(self: Tensor) -> Tensor:
    """`x.contiguous()` (torch): `x` itself where `x.is_contiguous()` (an allocation, an argument
    laid out row-major, a view laid out as its own row-major memory), else a copy as torch
    makes: `x.clone()`, a grid of its own (a FlagGems wrapper's `inp = inp.contiguous()` of a
    transposed argument, before kernels that assume row-major pointers)."""
    current("x.contiguous()")
    return self if _is_contiguous(self) else self.clone(memory_format="contiguous")


class Stride(int):
    """A stride host code reads (`x.stride(0)`): an int that also casts as a kernel argument
    does (`row_stride.to(tl.int64)` in a FlagGems kernel merged with its wrapper)."""

    def to(self, dtype: Any) -> TileValue:
        return constant(int(self), as_dtype(dtype, "stride.to"))


def _host_int(s: Any) -> Any:
    return Stride(s) if type(s) is int else s  # (a SymDim keeps its expression)


def _stride(self: Tensor, dim: Any = None) -> Any:
    """`x.stride()` / `x.stride(d)` (torch): the strides in elements that pointer arithmetic
    (`x + offsets`) addresses: an argument's own (the trace is for its layout), an allocation's
    row-major ones, and through host views as torch gives them (`x.T.stride()` is `(1, m)` for
    a row-major (m, n) argument x)."""
    tr = current("x.stride()")
    strides = strides_of(self.value, tr.strides(root(self.value)))
    if strides is None:
        tr.fail(ShapeError, f"'{self.name}'.stride(): '{self.name}' is a reshape that no "
                "strides describe")
    if dim is None:
        return tuple(_host_int(s) for s in strides)
    need_static(dim)  # an int argument (FlagGems' `inp.stride(dim)`): traced as that int
    if isinstance(dim, bool) or not isinstance(dim, int) or not -self.ndim <= dim < self.ndim:
        tr.fail(ShapeError, f"'{self.name}'.stride({dim!r}): not a dimension of a "
                f"{self.ndim}-D tensor")
    return _host_int(strides[dim])


def _storage_offset(self: Tensor) -> int:
    """`x.storage_offset()` (torch): the element of its root tensor's memory a view starts at
    (SGLang's copy_pages tests it for 8-byte alignment); 0 for an argument or allocation."""
    tr = current("x.storage_offset()")
    return int(offset_of(self.value, tr.strides(root(self.value))))


def _is_contiguous(self: Tensor) -> bool:
    """`x.is_contiguous()` (torch): whether `x.stride()` is row-major, dimensions of 1 aside."""
    return all(n == 1 or s == r for n, s, r in
               zip(self.shape, self.stride(), row_major(self.shape)))


def _as_strided(self: Tensor, size: Any, stride: Any, storage_offset: Any = None) -> Tensor:
    """`x.as_strided(size, stride)` (torch) of a contiguous x, or of a view of row-major
    memory (torch's as_strided addresses the memory from the view's first element), where the
    strides lay `size` out as a permutation of a row-major layout: a view of that memory, as
    its flat view reshaped and permuted (torchao's column-major `x.new_empty(...).as_strided(
    (m, k), (1, m))`)."""
    tr = current(f"{self.name}.as_strided()")
    size, stride = tuple(size), tuple(stride)
    order = sorted(range(len(size)), key=lambda d: -stride[d])  # the largest stride first
    dense = tuple(size[d] for d in order)
    offset = 0 if storage_offset is None else storage_offset
    base = root(self.value)
    if base is not self.value and base not in tr.layouts:  # a view of row-major memory:
        if storage_offset is None:  # torch's as_strided addresses that memory, from the
            offset = _storage_offset(self)  # view's start (torchao's `torch.empty_like(
        self, storage_offset = Tensor(base, base.hint or self.name), None  # col_major)
        # .as_strided(size, (1, k))`)
    count = int(np.prod(size, dtype=np.int64))
    laid = len(size) == len(stride) and all(isinstance(v, (int, np.integer)) for v in
                                            (*size, *stride, offset)) and \
        [stride[d] for d in order if size[d] != 1] == \
        [r for r, n in zip(row_major(dense), dense) if n != 1]
    if not laid or not _is_contiguous(self) or offset < 0 or \
            offset + count > int(np.prod(self.shape, dtype=np.int64)):
        tr.fail(ShapeError, f"{self.name}.as_strided({size}, {stride}): tiledsl takes strides "
                "that lay the size out as a permutation of a row-major layout, over a "
                "contiguous tensor's memory (from its first element, or an offset into an "
                "allocation or argument)", hint="write the view: x.T, x.transpose(0, 1), "
                "x.permute(...), x.view(...)")
    flat = self.reshape(-1)  # type: ignore[attr-defined]
    if offset or count != flat.shape[0]:
        flat = flat[offset:offset + count]
    return flat.reshape(dense).permute(tuple(order.index(d) for d in range(len(size))))


Tensor.as_strided = _as_strided  # type: ignore[attr-defined]
Tensor.contiguous = _contiguous  # type: ignore[attr-defined]
Tensor.stride = _stride  # type: ignore[attr-defined]
Tensor.storage_offset = _storage_offset  # type: ignore[attr-defined]
Tensor.is_contiguous = _is_contiguous  # type: ignore[attr-defined]
Tensor.dim = lambda self: self.ndim  # type: ignore[attr-defined]
Tensor.is_non_overlapping_and_dense = _is_non_overlapping_and_dense  # type: ignore[attr-defined]
# torch's predicates of a tensor that FlagGems' wrappers ask: a kernel's tensors are dense,
# strided, not quantized and on the kernel's device ("cuda": lang/devices.py)
Tensor.layout = property(_layout)  # type: ignore[attr-defined]
Tensor.is_cuda = True  # type: ignore[attr-defined]
Tensor.is_quantized = False  # type: ignore[attr-defined]
Tensor.is_floating_point = lambda self: self.dtype.is_float  # type: ignore[attr-defined]
Tensor.is_complex = lambda self: False  # type: ignore[attr-defined]
Tensor.is_conj = lambda self: False  # type: ignore[attr-defined]
# a 0-d argument's, as torch answers them (FlagGems' fill_tensor hands one to pointwise_dynamic)
TileValue.is_cuda = True  # type: ignore[attr-defined]
TileValue.is_floating_point = lambda self: self.dtype.is_float  # type: ignore[attr-defined]
TileValue.is_quantized = False  # type: ignore[attr-defined]
TileValue.layout = property(_layout)  # type: ignore[attr-defined]
def _requires_grad(t: Tensor) -> bool:
    """Whether the argument `t` views requires grad in this call (the kernel traces once for
    each answer: runtime/traces.py's GRADS); False for what the kernel makes. attorch's
    forwards save for backward, and its linear backward computes a gradient, only where True."""
    tr = active()
    base = root(t.value)
    if tr is None or base.owner is not None or not base.hint:
        return False
    tr.grad_reads.add(base.hint)
    return base.hint in tr.grad_true


TileValue.stride = _scalar_stride  # type: ignore[attr-defined]
Tensor.element_size = lambda self: self.dtype.itemsize  # type: ignore[attr-defined]
Tensor.itemsize = property(lambda self: self.dtype.itemsize)  # type: ignore[attr-defined]
Tensor.size = property(_size)  # type: ignore[attr-defined]
Tensor.numel = Tensor.nelement = _numel  # type: ignore[attr-defined]
Tensor.requires_grad = property(_requires_grad)  # type: ignore[attr-defined]

__all__ = ["addmm", "amax", "amin", "finfo", "iinfo", "matmul", "promote_types",
           "register_reduction_dim", "relu", "result_type", "silu", "std", "var", "var_mean"]
