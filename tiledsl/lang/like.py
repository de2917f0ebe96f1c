"""`td.zeros_like`, `td.ones_like`, `td.full_like` and `td.empty_like`, as torch and NumPy spell
them: of a tensor (in host code, a new tensor of its shape and dtype) or of a tile value
(inside the tile loops, a tile of its shape and dtype). `dtype=` overrides the dtype.

`td.empty_like` of a tile value is a tile of zeros: a tile has no memory to leave unwritten.

Of a tensor, the new tensor is laid out in memory as x is (torch's `preserve_format`, NumPy's
`order="K"`): `torch.empty_like(q.transpose(1, 2))` is transposed too, so a kernel that walks
both with the same flat offsets (an elementwise kernel on a non-contiguous input) computes
each element where torch's does. `memory_format=torch.contiguous_format` asks for row-major,
`torch.channels_last` (`_3d`) for channels last; `x.clone()` keeps x's layout as well.

torch's methods `x.new_empty(shape)`, `x.new_zeros`, `x.new_ones` and `x.new_full(shape, v)`
make a tensor of another shape with x's dtype (Helion's `rms_norm_bwd`); `device=` and torch's
other placement keywords are accepted and left to the launch (outputs live on the inputs'
device).
"""

from __future__ import annotations

from typing import Any

from tiledsl.dtypes import DType
from tiledsl.errors import TraceError
from tiledsl.frontend.captured import capture, is_foreign_tensor
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, TileValue
from tiledsl.ir import views
from tiledsl.lang.language import empty, full
from tiledsl.lang.views import tensor_permute

_FORMATS = {None: "preserve", "preserve": "preserve", "torch.preserve_format": "preserve",
            "contiguous": "contiguous", "torch.contiguous_format": "contiguous",
            "torch.channels_last": "channels_last", "torch.channels_last_3d": "channels_last"}


def memory_order(x: Tensor, memory_format: Any = None) -> tuple[int, ...] | None:
    """The order of the dimensions of a tensor like x in memory, outermost first, where it is
    not row-major (None where it is): x's own order for torch's `preserve_format` (its strides
    sorted, dimensions of size 1 or stride 0 kept in place, as torch's `empty_like`)."""
    fmt = _FORMATS.get(memory_format if memory_format is None or isinstance(memory_format, str)
                       else str(memory_format))
    tr = current()
    if fmt is None:
        tr.fail(TraceError, f"memory_format={memory_format!r} is not a layout tiledsl makes",
                hint="torch.preserve_format (the default), torch.contiguous_format or "
                     "torch.channels_last")
    if fmt == "contiguous" or x.ndim < 2:
        return None
    if fmt == "channels_last":
        if x.ndim not in (4, 5):
            tr.fail(TraceError, f"memory_format=torch.channels_last of a {x.ndim}-d tensor "
                    f"'{x.name}': torch's is for 4-d (channels_last_3d: 5-d) tensors")
        return (0, *range(2, x.ndim), 1)
    strides = views.strides_of(x.value, tr.strides(views.root(x.value)))
    if strides is None:
        return None
    order = views.stride_order(x.shape, strides)
    return None if order == tuple(range(x.ndim)) else order


def alloc_like(x: Tensor, value: Any, dtype: DType | Any, memory_format: Any = None,
               what: str = "full_like") -> Tensor:
    """A new tensor of x's shape, laid out as `memory_format` says (x's own layout by default):
    row-major in that order, viewed back in x's. `value` fills it (None: empty)."""
    order = memory_order(x, memory_format)
    shape = x.shape if order is None else tuple(x.shape[d] for d in order)
    out = empty(shape, dtype) if value is None else full(shape, value, dtype, what=what)
    return out if order is None else tensor_permute(out, *(order.index(d) for d in range(x.ndim)))


def _like(x: Any, value: Any, dtype: Any, what: str, memory_format: Any = None
          ) -> Tensor | TileValue:
    tr = current(f"td.{what}()")
    if is_foreign_tensor(x) and tr.depth == "host":  # a real torch tensor (a valued argument's
        x = capture(x, "like")  # values): its shape, dtype and layout (frontend/captured.py)
    if not isinstance(x, (Tensor, TileValue)):
        tr.fail(TraceError, f"td.{what}() takes a tensor, got {type(x).__name__}",
                hint=f"td.{what}(v) of a tile value v makes a tile inside the tile loops; for "
                     "another shape write td.zeros(shape, dtype=...)")
    d = x.dtype if dtype is None else dtype
    if isinstance(x, Tensor) and tr.depth != "host":
        tr.fail(TraceError, f"td.{what}() of tensor '{x.name}' allocates a tensor and cannot "
                "be used inside a tile loop", hint=f"for a tile, write td.{what}(v) of a tile "
                f"value v (e.g. td.{what}({x.name}[t]))")
    if isinstance(x, Tensor):
        return alloc_like(x, value, d, memory_format, what)
    return full(x.shape, 0 if value is None else value, d, what=what)


def zeros_like(x: Any, dtype: Any = None, device: Any = None, memory_format: Any = None
              ) -> Tensor | TileValue:
    """Zeros of x's shape and dtype (`np.zeros_like`, `torch.zeros_like`)."""
    return _like(x, 0, dtype, "zeros_like", memory_format)


def ones_like(x: Any, dtype: Any = None, device: Any = None, memory_format: Any = None
             ) -> Tensor | TileValue:
    """Ones of x's shape and dtype (`np.ones_like`, `torch.ones_like`)."""
    return _like(x, 1, dtype, "ones_like", memory_format)


def full_like(x: Any, fill_value: Any, dtype: Any = None, device: Any = None,
              memory_format: Any = None) -> Tensor | TileValue:
    """`fill_value` in x's shape and dtype (`np.full_like`, `torch.full_like`)."""
    if fill_value is None:
        current("td.full_like()").fail(TraceError, "td.full_like(): the fill value is None")
    return _like(x, fill_value, dtype, "full_like", memory_format)


def empty_like(x: Any, dtype: Any = None, device: Any = None, memory_format: Any = None
               ) -> Tensor | TileValue:
    """A new output tensor of x's shape and dtype (`np.empty_like`); of a tile value, zeros."""
    return _like(x, None, dtype, "empty_like", memory_format)


_PLACEMENT = frozenset({"device", "layout", "pin_memory", "requires_grad", "memory_format"})


def _new(what: str, value: Any) -> Any:
    def method(self: Tensor | TileValue, *size: Any, dtype: Any = None,
               **placement: Any) -> Any:
        name = getattr(self, "name", "v")
        tr = current(f"{name}.{what}()")
        if "size" in placement and not size:  # torch's keyword (Helion's flex attention)
            size = (placement.pop("size"),)
        unknown = sorted(set(placement) - _PLACEMENT)
        if unknown:
            tr.fail(TraceError, f"{name}.{what}() got an unexpected keyword argument "
                    f"{unknown[0]!r}")
        shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        d = self.dtype if dtype is None else dtype
        if value is None and isinstance(self, TileValue):  # a tile's new_empty: zeros
            return full(shape, 0, d, what=what)
        return empty(shape, d) if value is None else full(shape, value, d, what=what)
    method.__name__ = method.__qualname__ = what
    method.__doc__ = (f"torch's `x.{what}(shape)`: a new tensor (of a tile value: a new tile) "
                      "of x's dtype (`dtype=` another).")
    return method


def _new_full(self: Tensor | TileValue, size: Any, fill_value: Any, *, dtype: Any = None,
              **placement: Any) -> Any:
    """torch's `x.new_full(shape, fill_value)`."""
    return _new("new_full", fill_value)(self, size, dtype=dtype, **placement)


Tensor.new_empty = _new("new_empty", None)  # type: ignore[attr-defined]
Tensor.new_zeros = _new("new_zeros", 0)  # type: ignore[attr-defined]
Tensor.new_ones = _new("new_ones", 1)  # type: ignore[attr-defined]
Tensor.new_full = _new_full  # type: ignore[attr-defined]

__all__ = ["empty_like", "full_like", "ones_like", "zeros_like"]
TileValue.new_empty = _new("new_empty", None)  # type: ignore[attr-defined]
TileValue.new_zeros = _new("new_zeros", 0)  # type: ignore[attr-defined]
TileValue.new_ones = _new("new_ones", 1)  # type: ignore[attr-defined]
TileValue.new_full = _new_full  # type: ignore[attr-defined]
