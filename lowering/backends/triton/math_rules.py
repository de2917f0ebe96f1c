"""Triton rules of the math library (mathlib.py's functions): `tl.*` where Triton has the
function, else libdevice's (`from triton.language.extra import libdevice`, which Triton binds
to CUDA's or HIP's libdevice when it compiles, and which interpret_libdevice.py runs under the
interpreter). 16-bit floats compute in float32 and round once, as the other elementwise ops;
libdevice takes float32 and float64 only."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lowering.backends.triton.casts import tl_dtype
from lowering.backends.triton.oprules import emit_rule
from tiledsl.ir.core import Op
from tiledsl.ir.types import TileType

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter

# op -> the function a Triton author calls (on a GPU, Triton's own sin, cos and log2 are
# libdevice's too: sm_90 PTX of tl.sin is __nv_sinf's, not `sin.approx`)
CALLS = {
    "log2": "tl.log2", "sin": "tl.sin", "cos": "tl.cos", "floor": "tl.floor",
    "ceil": "tl.ceil", "fma": "tl.fma", "log1p": "libdevice.log1p", "expm1": "libdevice.expm1",
    "tan": "libdevice.tan", "asin": "libdevice.asin", "acos": "libdevice.acos",
    "atan": "libdevice.atan", "sinh": "libdevice.sinh", "cosh": "libdevice.cosh",
    "atan2": "libdevice.atan2", "round": "libdevice.rint", "trunc": "libdevice.trunc",
    "asinh": "libdevice.asinh", "acosh": "libdevice.acosh", "atanh": "libdevice.atanh",
    "log10": "libdevice.log10", "cbrt": "libdevice.cbrt", "hypot": "libdevice.hypot",
    "copysign": "libdevice.copysign", "fmod": "libdevice.fmod",
}


def _literal(expr: str) -> bool:
    return bool(re.fullmatch(r"-?[\d.e+-]+|True|False|-?float\(\"\w+\"\)", expr))


def computed(op: Op, args: list[str]) -> list[str]:
    """The operands as the op computes on them: 16-bit floats in float32."""
    t = op.operands[0].type
    assert isinstance(t, TileType)
    if t.dtype.is_float and t.dtype.bits == 16:
        return [a if _literal(a) else f"{a}.to(tl.float32)" for a in args]
    return args


def rounded(op: Op, expr: str) -> str:
    """`expr`, computed in float32 for a 16-bit float op, back in the op's dtype."""
    t, rt = op.operands[0].type, op.result.type
    assert isinstance(t, TileType) and isinstance(rt, TileType)
    if t.dtype.is_float and t.dtype.bits == 16 and not rt.dtype.is_bool:
        return f"({expr}).to({tl_dtype(rt.dtype)})"
    return expr


@emit_rule(*CALLS)
def _call(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    fn = CALLS[op.name]
    if fn.startswith("libdevice."):
        em.helpers.add("libdevice")  # the module imports it (codegen.py)
    em.assign(op, rounded(op, f"{fn}({', '.join(computed(op, args))})"), indent)


@emit_rule("isnan")
def _isnan(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    (x,) = computed(op, args)  # (the interpreter holds bfloat16 as uint16 bit patterns)
    em.assign(op, f"{x} != {x}", indent)


@emit_rule("isinf")
def _isinf(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    (x,) = computed(op, args)
    em.assign(op, f'tl.abs({x}) == float("inf")', indent)


@emit_rule("sign")
def _sign(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    """np.sign: -1, 0 or 1 (0.0 for -0.0), NaN for NaN."""
    t = op.operands[0].type
    assert isinstance(t, TileType)
    (x,) = computed(op, args)
    d = "tl.float32" if t.dtype.is_float and t.dtype.bits == 16 else tl_dtype(t.dtype)
    if t.dtype.is_unsigned:
        em.assign(op, f"({x} > 0).to({d})", indent)
        return
    expr = f"({x} > 0).to({d}) - ({x} < 0).to({d})"
    if t.dtype.is_float:
        expr = f"tl.where({x} != {x}, {x}, {expr})"
    em.assign(op, rounded(op, expr), indent)
