"""`x.data_ptr()` of a kernel's tensor in host code, and the objects that carry one to a Triton
launch as Triton takes them: any argument with `data_ptr()` and `dtype` is a pointer.

FlagGems' pointwise operators wrap tensors in a `StridedBuffer`, whose `data_ptr()` is the base
tensor's plus `itemsize * offset` bytes (its flip views a tensor backwards from its last
element), and hand it to `kernel[grid](...)` with strides of their own. The address of a kernel
tensor is not known while it traces, so `data_ptr()` is a `DataPtr`: the tensor's root (the
argument or allocation it views) and a byte offset into the root's memory. It adds and
subtracts bytes, compares equal to another where both are one address, and answers `% n` for
the alignments Triton specializes on (n dividing 16: an allocation starts at least that
aligned). At a launch, an argument with `data_ptr()` and `dtype` is the pointer at that address
(frontend/pointers.py), its elements of that dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl.errors import TraceError
from tiledsl.frontend.pointers import PointerType, pointer_at
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, TileValue, as_dtype
from tiledsl.frontend.zero_d_memory import as_memory
from tiledsl.ir.views import offset_of, root


class DataPtr:
    """The address `offset` bytes into the memory of kernel tensor `base` (a root)."""

    __slots__ = ("base", "offset")

    def __init__(self, base: Tensor, offset: int) -> None:
        self.base = base
        self.offset = offset

    def __repr__(self) -> str:
        return f"<data_ptr of '{self.base.name}' + {self.offset} bytes>"

    def __add__(self, other: Any) -> DataPtr:
        return DataPtr(self.base, self.offset + _bytes(other, f"{self!r} + {other!r}"))

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        if isinstance(other, DataPtr):
            if other.base.value is not self.base.value:
                _fail(f"'{self.base.name}'.data_ptr() - '{other.base.name}'.data_ptr(): the "
                      "distance between two tensors' memory is not known while tracing")
            return self.offset - other.offset
        return DataPtr(self.base, self.offset - _bytes(other, f"{self!r} - {other!r}"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataPtr) and other.base.value is self.base.value and \
            other.offset == self.offset

    def __hash__(self) -> int:
        return hash((id(self.base.value), self.offset))

    def __mod__(self, n: Any) -> int:
        if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 0 and 16 % n == 0:
            return self.offset % int(n)
        return _fail(f"{self!r} % {n!r}: an address's alignment is known to 16 bytes")

    def to(self, dtype: Any, bitcast: bool = False, **_: Any) -> Any:
        """`address.to(tl.pointer_type(T))` in a @triton.jit body (an address passed as an int
        argument): the pointer there, its elements read as T."""
        if not isinstance(dtype, PointerType):
            _fail(f"{self!r}.to({dtype!r}): an address converts to a pointer "
                  "(tl.pointer_type(...)) only")
        return pointer_at(*element_address(self, dtype.element_ty, repr(self)))

    def _unknown(self, *_: Any) -> Any:
        return _fail(f"{self!r} as a number: a kernel tensor's address is not known while "
                     "tracing")

    __int__ = __index__ = __lt__ = __le__ = __gt__ = __ge__ = __mul__ = __floordiv__ = _unknown
    __and__ = __rsub__ = __bool__ = _unknown


def data_ptr(t: Tensor) -> DataPtr:
    """`x.data_ptr()`: the address of x's first element (a view's, in its root's memory)."""
    tr = current(f"{t.name}.data_ptr()")
    base = root(t.value)
    start = offset_of(t.value, tr.strides(base)) if base is not t.value else 0
    return DataPtr(Tensor(base, base.hint or t.name) if base is not t.value else t,
                   int(start) * t.dtype.itemsize)


def is_pointer_like(v: Any) -> bool:
    """Whether a launch argument is a pointer as Triton takes one: an object, not a kernel
    tensor, with `data_ptr()` and `dtype` (FlagGems' StridedBuffer and TypedPtr)."""
    return not isinstance(v, (Tensor, TileValue, type)) and \
        callable(getattr(v, "data_ptr", None)) and hasattr(v, "dtype")


def launched(v: Any, name: str) -> tuple[Tensor, int, Any]:
    """Launch argument `name`, a pointer-like object, as (the root tensor, the element offset,
    the dtype of its elements)."""
    address = v.data_ptr()
    if not isinstance(address, DataPtr):
        _fail(f"argument '{name}' ({type(v).__name__}): its data_ptr() is {address!r}, not a "
              "kernel tensor's address")
    return element_address(address, as_dtype(v.dtype, f"argument '{name}'"),
                           f"argument '{name}' ({type(v).__name__})")


def element_address(address: DataPtr, dtype: Any, what: str) -> tuple[Tensor, int, Any]:
    """`address` read as elements of `dtype`: (the root tensor, the element offset, dtype)."""
    base = address.base
    if dtype.itemsize != base.dtype.itemsize or address.offset % dtype.itemsize:
        _fail(f"{what} reads '{base.name}' ({base.dtype}) as {dtype} from byte "
              f"{address.offset}: tiledsl reads a tensor's memory as a dtype of its element "
              "size, from an element's start")
    return base, address.offset // dtype.itemsize, dtype


def _bytes(v: Any, what: str) -> int:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    return _fail(f"{what}: an address moves by a whole number of bytes known while tracing")


def _fail(message: str) -> Any:
    current().fail(TraceError, message)


def _scalar_data_ptr(x: TileValue) -> DataPtr:
    """`value.data_ptr()` of a 0-d array argument makes it memory (zero_d_memory.py)."""
    as_memory(x)
    return _fail(f"data_ptr() of a runtime scalar ({x.dtype.name}): it has no address")


class Storage:
    """`x.untyped_storage()`: the memory of the tensor x views (its root): its size in
    bytes and its address (f8 conversion's `x.untyped_storage().size() // x.element_size()`)."""

    __slots__ = ("base",)

    def __init__(self, base: Tensor) -> None:
        self.base = base

    def size(self) -> int:
        return int(np.prod(self.base.shape, dtype=np.int64)) * self.base.dtype.itemsize

    nbytes = size

    def data_ptr(self) -> DataPtr:
        return DataPtr(self.base, 0)


def untyped_storage(t: Tensor) -> Storage:
    current(f"{t.name}.untyped_storage()")
    base = root(t.value)
    return Storage(t if base is t.value else Tensor(base, base.hint or t.name))


Tensor.data_ptr = data_ptr  # type: ignore[attr-defined]
Tensor.untyped_storage = untyped_storage  # type: ignore[attr-defined]
TileValue.data_ptr = _scalar_data_ptr  # type: ignore[attr-defined]
