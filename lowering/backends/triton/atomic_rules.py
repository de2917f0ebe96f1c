"""The Triton rule of the `atomic` op: `tl.atomic_add(ptr, val, mask=..., sem=...)` and its kin,
at the pointers and mask a store of the same access would use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.casts import tl_dtype
from lowering.backends.triton.oprules import emit_rule
from tiledsl.errors import BackendError
from tiledsl.ir.core import Op
from tiledsl.ir.gathers import written_values
from tiledsl.ir.types import TileType

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule("atomic")
def _atomic(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    t = op.result.type
    assert isinstance(t, TileType)
    n = written_values(op)
    tensor = op.operands[0]
    ptr, mask = em.address(op, tensor, op.operands[1:len(op.operands) - n], t.rank, indent)
    values = [em.value(v) for v in op.operands[len(op.operands) - n:]]
    order = f'sem="{op.attrs["sem"]}"'
    if op.attrs.get("scope", "gpu") != "gpu":
        order += f', scope="{op.attrs["scope"]}"'
    kind = op.attrs["kind"]
    bits = t.dtype.bits
    if t.dtype.short == "bf16" and em.interpret:  # ("Unsupported data type" inside Triton)
        raise BackendError("Triton's interpreter has no bfloat16 atomic add (a GPU has: sm_90 "
                           "natively, earlier ones through compare-and-swap)", loc=op.loc,
                           hint="run it on backend='numpy', or on a GPU")
    if kind == "xchg" and t.dtype.is_float and em.interpret:  # the interpreter has no float
        # xchg ("Unsupported data type"): exchange the bits as integers of the same width
        ptr = f"({ptr}).to(tl.pointer_type(tl.int{bits}))"
        values = [f"{values[0]}.to(tl.int{bits}, bitcast=True)"]
    if kind != "cas":
        mask_s = "" if mask is None else f", mask={mask}"
        call = f"tl.atomic_{kind}({ptr}, {values[0]}{mask_s}, {order})"
    else:
        cmp, val = values
        if mask is not None:  # tl.atomic_cas takes no mask: a masked-off lane compares the
            # tensor's first element with `cmp` and writes `cmp` back, which changes nothing
            ptr = f"tl.where({mask}, {ptr}, {em.tensor_param(tensor)})"
            val = f"tl.where({mask}, {val}, {cmp})"
        call = f"tl.atomic_cas({ptr}, {cmp}, {val}, {order})"
    if kind == "xchg" and t.dtype.is_float and em.interpret:
        call = f"{call}.to({tl_dtype(t.dtype)}, bitcast=True)"
    if em.uses.get(op.result):
        em.assign(op, call, indent)
    else:  # the old values are not used: a statement, as Triton code writes it
        em.emit(indent, call)
