"""Triton rules of the bit operations: `<<` and `>>` with NumPy's meaning for every shift
amount, and `bitcast`.

Triton's (LLVM's) shift by the bit width or more is undefined, so a shift by an amount that is
not a constant in [0, width) selects NumPy's result for the others: 0, or for `>>` of a
signed int the sign (`x >> (width - 1)`). A negative amount counts as a huge one (NumPy reads
it so): the test reads the amount as unsigned. `>>` is arithmetic on signed ints and logical
on unsigned ones, as Triton's own `>>`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lowering.backends.triton.casts import tl_dtype
from lowering.backends.triton.oprules import emit_rule
from tiledsl import dtypes
from tiledsl.ir.core import Op, Value
from tiledsl.ir.types import TileType

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter

_OPERATOR = {"shl": "<<", "shr": ">>"}


def _constant(v: Value) -> Any:
    while v.owner is not None and v.owner.name == "broadcast":
        v = v.owner.operands[0]
    return v.owner.attrs["value"] if v.owner is not None and v.owner.name == "const" else None


def reinterpreted(em: KernelEmitter, v: Value, expr: str, dtype: str) -> str:
    """`expr` (the value `v`) bitcast to `dtype`; a scalar parameter, which the interpreter
    passes as a Python number, has no `.to`."""
    if v in em.params and v not in em.names:
        return f"tl.cast({expr}, {dtype}, bitcast=True)"
    return f"{expr}.to({dtype}, bitcast=True)"


@emit_rule("shl", "shr")
def _shift(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    t = op.operands[0].type
    assert isinstance(t, TileType)
    bits, x, s = t.dtype.bits, args[0], args[1]
    shifted = f"{x} {_OPERATOR[op.name]} {s}"
    amount = _constant(op.operands[1])
    if isinstance(amount, int) and 0 <= amount < bits:
        em.assign(op, shifted, indent)
        return
    if t.dtype.is_unsigned:
        in_range = f"{s} < {bits}"
    else:
        unsigned = tl_dtype(dtypes.BY_SHORT[f"u{bits}"])
        in_range = f"{reinterpreted(em, op.operands[1], s, unsigned)} < {bits}"
    beyond = f"{x} >> {bits - 1}" if op.name == "shr" and not t.dtype.is_unsigned else "0"
    em.assign(op, f"tl.where({in_range}, {shifted}, {beyond})", indent)


@emit_rule("bitcast")
def _bitcast(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    rt = op.result.type
    assert isinstance(rt, TileType)
    em.assign(op, reinterpreted(em, op.operands[0], args[0], tl_dtype(rt.dtype)), indent)
