"""Triton's pointer arithmetic on a kernel's tensors: inside a grid, `x + offsets` (and
`x_ptr += k`) is a `Pointer`, the elements of `x` in row-major order (its flat view,
`x.view(-1)`) at those offsets, and `td.load`, `td.store` and the atomics take it as Triton's
`tl.load(ptr, mask, other)` takes a pointer (tiledsl/lang/access.py, atomics.py).

A pointer indexes the flat view, so what it reaches is checked as any index is: a lane past the
tensor's last element is out of bounds (an OutOfBoundsError on NumPy, masked on Triton). An
argument laid out other than row-major (vLLM's `q` sliced from a fused qkv, a transpose) is seen
as its memory instead (`tensor.memory`, its first element to its last), as Triton sees it: the
trace is for that layout (runtime/arg_specs.py), so the strides host code reads (`q.stride(0)`)
are its own, and the NumPy backend refuses a lane that lands between its elements. A host
view's pointer is its root's memory from the view's first element (`pointer`), which the view's
own strides (`x.T.stride()`) address.

A loop carries a pointer as its offset (tiledsl/frontend/loops.py); `+` and `-` of integer
offsets, `p[:, None]` and `p - q` (of one tensor: the offset between them) are what it takes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl.dtypes import DType
from tiledsl.errors import ControlFlowError, TraceError
from tiledsl.frontend.tracer import Tracer, current
from tiledsl.frontend.values import Tensor, TileValue, to_value
from tiledsl.ir.views import offset_of, root
from tiledsl.lang.views import tensor_bitcast, tensor_reshape


class PointerType:
    """A pointer's `dtype` and `type`: Triton's `ptr.dtype.element_ty` is the tensor's dtype."""

    __slots__ = ("element_ty",)

    def __init__(self, element_ty: DType) -> None:
        self.element_ty = element_ty

    def is_ptr(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"pointer<{self.element_ty}>"


class Pointer:
    """`base` (a tensor) at element `offset` (an int scalar or tile) of its flat view."""

    __slots__ = ("base", "offset")
    pointer = True  # (`offs + ptr` is the pointer's sum: TileValue.__add__ defers to it)

    def __init__(self, base: Tensor, offset: TileValue) -> None:
        self.base = base
        self.offset = offset

    @property
    def dtype(self) -> PointerType:
        return PointerType(self.base.dtype)

    type = dtype

    @property
    def shape(self) -> tuple[Any, ...]:
        return self.offset.shape

    def __repr__(self) -> str:
        return f"Pointer({self.base.name} + {self.offset!r})"

    def __add__(self, other: Any) -> Pointer:
        return Pointer(self.base, self.offset + step_of(other, "+"))

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        if isinstance(other, Pointer):
            if other.base.value is not self.base.value:
                current().fail(TraceError, f"the difference of pointers into "
                               f"'{self.base.name}' and '{other.base.name}'",
                               hint="subtract pointers into one tensor (an offset between them)")
            return self.offset - other.offset
        return Pointer(self.base, self.offset - step_of(other, "-"))

    def __getitem__(self, index: Any) -> Pointer:
        return Pointer(self.base, self.offset[index])

    def __bool__(self) -> bool:
        current().fail(ControlFlowError, f"a pointer into '{self.base.name}' has no truth value",
                       hint="Triton's `if ptr:` asks whether an optional argument was given: "
                            "test the argument itself with `is not None`")

    def _other(self, *_: Any) -> Any:
        current().fail(TraceError, f"a pointer into '{self.base.name}' takes + and - of integer "
                       "offsets only", hint="compute with the offsets, then add them: "
                       f"{self.base.name} + (row * stride + cols)")

    __mul__ = __rmul__ = __truediv__ = __floordiv__ = __mod__ = __matmul__ = _other
    __and__ = __or__ = __xor__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _other
    __rsub__ = __pow__ = __lshift__ = __rshift__ = __invert__ = _other
    __hash__ = object.__hash__


def pointer(t: Tensor, offsets: Any, sign: str = "+") -> Pointer:
    """`t + offsets` (or `t - offsets`) in a grid: a pointer into `t`'s flat view. A view's
    pointer is its root's memory from the view's first element, as Triton's `view.data_ptr()`
    is: with the strides host code reads off the view (`x.T.stride()`, `x[:, 1:].stride()`)
    it reaches the view's elements, whatever their layout."""
    tr = current()
    off = step_of(offsets, sign)
    off = off if sign == "+" else 0 - off
    base = root(t.value)
    dtype = t.dtype  # (a view may read the root's bits as another dtype: x.view(fp8))
    if base is not t.value:
        start = offset_of(t.value, tr.strides(base))
        t = Tensor(base, base.hint or t.name)
        off = off + start if start else off
    return Pointer(_flat(tr, t, dtype), off)


def pointer_at(t: Tensor, offset: int, dtype: DType) -> Pointer:
    """The pointer at element `offset` of root tensor `t`'s memory, its elements read as
    `dtype` (of t's element size): a launch argument with a `data_ptr()` (data_ptrs.py)."""
    return Pointer(_flat(current(), t, dtype), to_value(offset))


def _is_offset(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) or \
        isinstance(v, TileValue) and v.dtype.is_int


def _plus(t: Tensor, other: Any) -> Any:
    """`Tensor.__add__`: a pointer in a grid; elsewhere, or of no offset, the tensor's error."""
    if _is_offset(other) and current().depth != "host":
        return pointer(t, other)
    return t._bump(other)


def _minus(t: Tensor, other: Any) -> Any:
    if _is_offset(other) and current().depth != "host":
        return pointer(t, other, "-")
    return t._bump(other)


Tensor.__add__ = Tensor.__radd__ = _plus  # type: ignore[method-assign,assignment]
Tensor.__sub__ = _minus  # type: ignore[method-assign,assignment]


def step_of(v: Any, sign: str) -> TileValue:
    if _is_offset(v):
        return to_value(v)
    current().fail(TraceError, f"pointer {sign} {type(v).__name__}: a pointer moves by integer "
                   "offsets (elements)", hint="offsets are ints or int tiles: "
                   "x + (pid * stride + td.arange(0, BLOCK))")


def _flat(tr: Tracer, t: Tensor, dtype: DType | None = None) -> Tensor:
    """`t`'s flat view, made in the host code around the grid (before it), once per tensor
    (and `dtype`, which its bits are read as: `tensor.bitcast`): an argument laid out other
    than row-major is seen as its memory (`tensor.memory`)."""
    dtype = dtype or t.dtype
    if t.ndim == 1 and t.value not in tr.layouts and dtype == t.dtype:
        return t
    at = max(i for i, d in enumerate(tr.depths) if d == "host")
    host = tr.blocks[at]
    key = (t.value, id(host), dtype)
    if key in tr.flat_views:
        return tr.flat_views[key]
    blocks, depths = tr.blocks, tr.depths
    tr.blocks, tr.depths = blocks[:at + 1], depths[:at + 1]
    start = len(host.ops)  # the last is the grid (or loop) being traced: the view goes before
    try:
        if t.value in tr.layouts:
            v = tr.emit("tensor.memory", [t.value], {"strides": tr.layouts[t.value]},
                        hint=t.value.hint)[0]
            flat = Tensor(v, t.name)
        else:
            flat = tensor_reshape(t, -1, what="view")
        if dtype != t.dtype:
            flat = tensor_bitcast(flat, dtype)
    finally:
        tr.blocks, tr.depths = blocks, depths
    made = host.ops[start:]
    del host.ops[start:]
    host.ops[start - 1:start - 1] = made
    tr.flat_views[key] = flat
    return flat
