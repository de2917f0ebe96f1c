"""The parameters of a generated Triton kernel, as the launcher and exported packages pass them."""

from __future__ import annotations

from dataclasses import dataclass

from tiledsl.ir.core import Value


@dataclass
class KernelParam:
    """A parameter of a generated kernel: a tensor pointer, a scalar, or a block size."""

    name: str
    kind: str  # "tensor", "desc", "scalar", "scalar_ptr", "num_programs", "stride" or "block"
    source: Value | None = None  # the IR value (argument or allocation) behind it
    value: int | None = None  # for "block" and "stride" (an i32 passed at runtime: a row
    # stride, or the extent a split loop bounds its trips by; loops.py)
    dtype: str = ""  # Triton signature type for scalars ("fp32", "i32", ...)
    box: tuple[int, ...] = ()  # for "desc": the block a tensor descriptor moves
    # for "desc" with dimensions folded (boxes.py): the (shape, strides) it describes the
    # tensor as; None: the tensor's own
    layout: tuple[tuple[int, ...], tuple[int, ...]] | None = None
