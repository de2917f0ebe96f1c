"""A table of kernel tensors' addresses, as Triton's grouped GEMM tutorial and vLLM's multi-slice
LoRA kernels build one: host code makes `torch.tensor([a.data_ptr(), b.data_ptr()])`, and the
Triton body picks a tensor by a runtime index,

    a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))
    a = tl.load(a_ptr + offs_am[:, None] * lda + offs_k[None, :])

A tiledsl access names its tensor, so the table is the tensors themselves (`PointerTable`) and
a small int32 tensor of their positions 0..n-1, which the kernel really loads (so an index past
the table is out of bounds as any load's is). The loaded position is an `Address`, which
`.to(tl.pointer_type(dtype))` makes a `TablePointer`: every table tensor at one offset, the
one at the loaded position chosen. A load or store through it is one access per tensor, masked
by `position == i` (tiledsl/frontend/choices.py); a loop carries its offset as it carries a
pointer's. On a GPU each access is n masked accesses, of which one per program touches memory.
"""

from __future__ import annotations

from typing import Any

from tiledsl import dtypes
from tiledsl.dtypes import DType
from tiledsl.errors import TraceError
from tiledsl.frontend.choices import Choice
from tiledsl.frontend.data_ptrs import DataPtr, element_address
from tiledsl.frontend.loops import Carried
from tiledsl.frontend.td_names import TRITON_ONLY
from tiledsl.frontend.pointers import Pointer, PointerType, pointer, pointer_at, step_of
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, TileValue, as_dtype, to_value


class PointerTable:
    """`torch.tensor([t.data_ptr(), ...], dtype=...)` in host code: the addresses, and the
    int32 tensor of their positions a kernel loads from."""

    __slots__ = ("addresses", "positions", "dtype")

    def __init__(self, addresses: list[DataPtr], positions: Tensor, dtype: DType) -> None:
        self.addresses = addresses
        self.positions = positions
        self.dtype = dtype

    @property
    def shape(self) -> tuple[int]:
        return (len(self.addresses),)

    ndim = 1

    def __len__(self) -> int:
        return len(self.addresses)

    def numel(self) -> int:
        return len(self.addresses)

    def __repr__(self) -> str:
        return "PointerTable(" + ", ".join(repr(a) for a in self.addresses) + ")"

    def __add__(self, index: Any) -> Entry:
        """`table + i` in a grid: the entry at i, which `tl.load` reads."""
        tr = current()
        if tr.depth == "host":
            tr.fail(TraceError, "a table of data_ptr()s takes `+ index` inside a kernel body, "
                    "as a pointer", hint="pass the table to a @triton.jit launch")
        return Entry(self, pointer(self.positions, index))

    __radd__ = __add__

    def _other(self, *_: Any) -> Any:
        current().fail(TraceError, "a table of data_ptr()s is indexed by `tl.load(table + i)` "
                       "in a kernel body, then `.to(tl.pointer_type(dtype))`",
                       hint="tiledsl keeps the tensors; their addresses are not numbers")

    __getitem__ = __sub__ = __mul__ = __iter__ = __bool__ = _other  # type: ignore[assignment]


class Entry:
    """`table + i`: what `tl.load` reads an address from (lang/access.py)."""

    __slots__ = ("table", "pointer")

    def __init__(self, table: PointerTable, pointer: Pointer) -> None:
        self.table = table
        self.pointer = pointer

    def loaded(self, position: TileValue) -> Address:
        return Address(self.table, position)


class Address:
    """An address `tl.load` read from a table: the position of its tensor."""

    __slots__ = ("table", "position")

    def __init__(self, table: PointerTable, position: TileValue) -> None:
        self.table = table
        self.position = position

    def to(self, dtype: Any, bitcast: bool = False, **_: Any) -> TablePointer:
        """`.to(tl.pointer_type(dtype))`: the pointer to the chosen tensor's first element."""
        if not isinstance(dtype, PointerType):
            current().fail(TraceError, f"an address loaded from a table of data_ptr()s converts "
                           f"to a pointer (tl.pointer_type(...)), not to {dtype!r}",
                           hint="tiledsl keeps the tensors; their addresses are not numbers")
        return TablePointer(self.table, self.position, dtype.element_ty, to_value(0))

    def _other(self, *_: Any) -> Any:
        current().fail(TraceError, "an address loaded from a table of data_ptr()s takes "
                       "`.to(tl.pointer_type(dtype))` only", hint="move the pointer after "
                       "converting it: tl.load(t + i).to(tl.pointer_type(T)) + offsets")

    __add__ = __radd__ = __sub__ = __mul__ = __getitem__ = __bool__ = _other  # type: ignore


class TablePointer(Carried):
    """The tensor at `position` of `table` (its elements read as `element`), at element
    `offset`: a load or store is one access per tensor, masked by its position (`choice`)."""

    __slots__ = ("table", "position", "element", "offset")

    def __init__(self, table: PointerTable, position: TileValue, element: DType,
                 offset: TileValue) -> None:
        self.table = table
        self.position = position
        self.element = element
        self.offset = offset

    def _moved(self, offset: TileValue) -> TablePointer:
        return TablePointer(self.table, self.position, self.element, offset)

    @property
    def dtype(self) -> PointerType:
        return PointerType(self.element)

    type = dtype

    @property
    def shape(self) -> tuple[Any, ...]:
        return self.offset.shape

    def __add__(self, other: Any) -> TablePointer:
        return self._moved(self.offset + step_of(other, "+"))

    __radd__ = __add__

    def __sub__(self, other: Any) -> TablePointer:
        return self._moved(self.offset - step_of(other, "-"))

    def __getitem__(self, index: Any) -> TablePointer:
        return self._moved(self.offset[index])

    def choice(self) -> Choice:
        """Each table tensor at this offset, under `position == i`."""
        options = []
        for i, address in enumerate(self.table.addresses):
            base, start, dtype = element_address(address, self.element,
                                                 f"entry {i} of a table of data_ptr()s")
            options.append((self.position == i, pointer_at(base, start, dtype) + self.offset))
        return Choice(options)

    def carried(self) -> TileValue:
        return self.offset

    def rebuilt(self, v: TileValue) -> TablePointer:
        return self._moved(v)

    def same_kind(self, other: Any) -> bool:
        return isinstance(other, TablePointer) and other.table is self.table and \
            other.position is self.position and other.element == self.element

    def __repr__(self) -> str:
        return f"TablePointer({self.table!r}[{self.position!r}] + {self.offset!r})"


def table(addresses: list[Any], dtype: Any, positions: Tensor) -> PointerTable:
    """The table of `addresses` (every one a kernel tensor's data_ptr()), made by
    `torch.tensor(addresses, dtype=dtype)` (lang/host_tensors.py)."""
    for a in addresses:
        if not isinstance(a, DataPtr):
            current().fail(TraceError, f"a table of data_ptr()s holds {a!r} beside them: every "
                           "entry must be a kernel tensor's x.data_ptr()",
                           hint="a missing tensor cannot be an address 0 in tiledsl: give "
                                "a tensor (an empty one) in its place")
    width = dtypes.int64 if dtype is None else dtype
    if not width.is_int or width.itemsize != 8:
        current().fail(TraceError, f"a table of data_ptr()s of dtype {width}: addresses are "
                       "64-bit ints", hint="dtype=torch.int64 or torch.uint64")
    return PointerTable(list(addresses), positions, width)


def pointer_type(element_ty: Any, address_space: int = 1, const: bool = False) -> PointerType:
    """Triton's `tl.pointer_type(dtype)` in a @triton.jit body (`.to()` of a table's address)."""
    return PointerType(as_dtype(element_ty, "tl.pointer_type()"))


TRITON_ONLY["pointer_type"] = pointer_type  # (frontend/td_names.py)
