"""Triton's tensor descriptors: `td.make_tensor_descriptor(base, shape, strides, block_shape)`
in a kernel, and the host's `TensorDescriptor(x, shape, strides, block_shape)` /
`TensorDescriptor.from_tensor(x, block_shape)` (triton.tools.tensor_descriptor) passed to a
launch, read with `desc.load([i, j])` and written with `desc.store([i, j], v)`, as Triton's
fused-attention and persistent-matmul tutorials write them.

A descriptor is a block pointer (block_ptrs.py) whose every load and store checks every
dimension: the block at `offsets` reads 0 (or NaN with `padding="nan"`) outside `[0, shape[d])`
and writes nothing there, as a TMA copy does. So each access is a `td.load` / `td.store`
through a pointer with its mask, checked as those are (the race check sees the addresses);
on Triton it is pointer arithmetic, not a TMA copy. `isinstance(d, tl.tensor_descriptor)` is
True of both kinds in a kernel (`td.tensor_descriptor` is the class).

The host's class is Triton's; in a tile kernel's host code its constructor and `from_tensor`
make an instance of a subclass that takes the kernel's tensors (Triton's checks the pointer's
alignment, which a traced tensor has none of), and an autotune config's `pre_hook` may set
its `block_shape` before the launch, as the fused-attention tutorial's does.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from tiledsl.errors import ShapeError, TraceError
from tiledsl.frontend.pointers import Pointer, pointer
from tiledsl.frontend.td_names import SUBSTITUTES
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor
from tiledsl.lang import access
from tiledsl.lang.atomics import atomic_add
from tiledsl.lang.block_ptrs import PADDING, BlockPointer, make_block_ptr


class tensor_descriptor:  # noqa: N801 (Triton's name: `isinstance(d, tl.tensor_descriptor)`)
    """A tensor descriptor in a kernel: blocks of `block_shape` of a tensor of `shape` laid out
    with `strides` from `base`."""

    def __init__(self, block: BlockPointer, padding: str) -> None:
        self._block = block
        self.padding = padding

    @property
    def block_shape(self) -> list[int]:
        return list(self._block.block)

    @property
    def shape(self) -> list[Any]:
        return list(self._block.shape)

    @property
    def strides(self) -> list[Any]:
        return list(self._block.strides)

    @property
    def dtype(self) -> Any:
        return self._block.base.base.dtype

    def _at(self, offsets: Any, what: str) -> tuple[Pointer, Any]:
        starts = tuple(offsets) if isinstance(offsets, (tuple, list)) else None
        if starts is None or len(starts) != len(self._block.block):
            current().fail(ShapeError, f"desc.{what}(offsets): one offset per dimension of the "
                           f"block {tuple(self._block.block)}, got {offsets!r}")
        b = self._block
        at = BlockPointer(b.base, b.shape, b.strides, starts, b.block, b.order)
        return at.addresses(tuple(range(len(b.block))))

    def load(self, offsets: Any) -> Any:
        """The block at `offsets` (Triton's `desc.load([i, j])`)."""
        p, mask = self._at(offsets, "load")
        return access.load(p, mask=mask, other=PADDING[self.padding])

    def store(self, offsets: Any, value: Any) -> None:
        """`value` written into the block at `offsets`, its lanes inside the tensor only."""
        p, mask = self._at(offsets, "store")
        access.store(p, value, mask)

    def atomic_add(self, offsets: Any, value: Any) -> Any:
        """`value` added into the block at `offsets`, atomically (its lanes inside the tensor)."""
        p, mask = self._at(offsets, "atomic_add")
        return atomic_add(p, value, mask=mask)


def make_tensor_descriptor(base: Any, shape: Any, strides: Any, block_shape: Any,
                           padding_option: str = "zero") -> tensor_descriptor:
    """Triton's `tl.make_tensor_descriptor(base, shape, strides, block_shape)` in a kernel."""
    tr = current("td.make_tensor_descriptor()")
    if tr.depth == "host":
        tr.fail(TraceError, "td.make_tensor_descriptor() is made inside the grid",
                hint="in host code, Triton's TensorDescriptor(x, shape, strides, block_shape) "
                     "is passed to a launch")
    if padding_option not in ("zero", "nan"):
        tr.fail(TraceError, f"td.make_tensor_descriptor(): padding_option={padding_option!r} is "
                "not one of 'zero', 'nan'")
    rank = len(block_shape) if isinstance(block_shape, (tuple, list)) else 0
    block = make_block_ptr(base, shape, strides, (0,) * rank, block_shape,
                           tuple(range(rank - 1, -1, -1)))
    if padding_option == "nan" and not block.base.base.dtype.is_float:
        tr.fail(TraceError, "td.make_tensor_descriptor(): padding_option='nan' of an integer "
                "tensor")
    return tensor_descriptor(block, padding_option)


def load_tensor_descriptor(desc: tensor_descriptor, offsets: Any) -> Any:
    """Triton's `tl.load_tensor_descriptor(desc, offsets)`: `desc.load(offsets)`."""
    return _descriptor(desc, "load_tensor_descriptor").load(offsets)


def store_tensor_descriptor(desc: tensor_descriptor, offsets: Any, value: Any) -> None:
    """Triton's `tl.store_tensor_descriptor(desc, offsets, value)`: `desc.store(...)`."""
    _descriptor(desc, "store_tensor_descriptor").store(offsets, value)


def _descriptor(desc: Any, what: str) -> tensor_descriptor:
    if not isinstance(desc, tensor_descriptor):
        current().fail(TraceError, f"td.{what}() takes a tensor descriptor, got "
                       f"{type(desc).__name__}")
    return desc


def from_host(desc: Any) -> tensor_descriptor:
    """A launch's host `TensorDescriptor` of a kernel tensor, as the kernel sees it."""
    tr = current()
    if not isinstance(desc.base, Tensor):
        tr.fail(TraceError, f"a TensorDescriptor passed to a launch describes a kernel tensor, "
                f"got {type(desc.base).__name__}")
    block_shape = desc.block_shape
    rank = len(desc.shape)
    block = make_block_ptr(pointer(desc.base, 0), tuple(desc.shape), tuple(desc.strides),
                           (0,) * rank, tuple(block_shape), tuple(range(rank - 1, -1, -1)))
    return tensor_descriptor(block, desc.padding)


def is_host(value: Any) -> bool:
    """Whether `value` is Triton's host TensorDescriptor (of any subclass)."""
    module = sys.modules.get("triton.tools.tensor_descriptor")
    return module is not None and isinstance(value, module.TensorDescriptor)


_HOST: list[type] = []  # the subclass, made once Triton's module is loaded


def _host_class() -> type:
    if not _HOST:
        base = sys.modules["triton.tools.tensor_descriptor"].TensorDescriptor

        class HostTensorDescriptor(base):  # type: ignore[misc, valid-type]
            """Triton's host descriptor of a kernel tensor, checked as the kernel reads it."""

            def __post_init__(self) -> None:
                tr = current()
                rank = len(self.shape)
                if not isinstance(self.base, Tensor):
                    tr.fail(TraceError, "TensorDescriptor(base, ...) in a tile kernel's host "
                            f"code describes one of its tensors, got {type(self.base).__name__}")
                if not 0 < rank == len(self.strides) == len(self.block_shape):
                    tr.fail(ShapeError, "TensorDescriptor: shape, strides and block_shape have "
                            f"one length, got {self.shape}, {self.strides}, {self.block_shape}")
                if self.padding not in ("zero", "nan"):
                    tr.fail(TraceError, f"TensorDescriptor: padding={self.padding!r} is not "
                            "one of 'zero', 'nan'")

        _HOST.append(HostTensorDescriptor)
    return _HOST[0]


def _from_tensor(tensor: Any, block_shape: Any, padding: str = "zero",
                 *args: Any, **kwargs: Any) -> Any:
    """`TensorDescriptor.from_tensor(x, block_shape)` of a kernel tensor."""
    return _host_class()(tensor, list(tensor.shape), list(tensor.stride()), list(block_shape),
                         padding, *args, **kwargs)


def host_call(fn: Any) -> Callable[..., Any] | None:
    """Triton's host `TensorDescriptor` and its `from_tensor` in a kernel's host code
    (SUBSTITUTES, frontend/td_names.py), else None."""
    module = sys.modules.get("triton.tools.tensor_descriptor")
    if module is None:
        return None
    if fn is module.TensorDescriptor:
        return _host_class()
    if fn is module.TensorDescriptor.from_tensor:
        return _from_tensor
    return None


SUBSTITUTES.append(host_call)

__all__ = ["load_tensor_descriptor", "make_tensor_descriptor", "store_tensor_descriptor",
           "tensor_descriptor"]
