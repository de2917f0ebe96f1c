"""Values and dtypes in generated Triton code: dtype names, literals, and conversions, with
the detours some conversions take.

Triton's interpreter keeps bfloat16 as uint16, and converts an integer, a bool or a float64 to
bfloat16 with `astype(uint16)` (garbage). So integers and bools go to bfloat16 through float32
on every target: exact up to 2**24, and above it the same double rounding as ml_dtypes, so a
GPU agrees with the NumPy backend too. float64 goes through float32 for the same reasons (ml_dtypes
rounds 1 + 2**-8 + 2**-40 to 1.0 through float32; a direct conversion gives 1.0078125). (Its
float32 -> bfloat16 conversion truncates instead of rounding to nearest even: interpret.py
fixes that one.) Max and min reduce bfloat16 in float32. fp8 converts through float32 from and to
everything but float32, and saturates (tiledsl/lang/fp8.py; interpret.py makes the interpreter's
conversion the GPU's).
"""

from __future__ import annotations

import math
from typing import Any

from tiledsl.dtypes import DType, float32

TL_DTYPE = {"f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32", "f64": "tl.float64",
            "i8": "tl.int8", "i16": "tl.int16", "i32": "tl.int32", "i64": "tl.int64",
            "u8": "tl.uint8", "u16": "tl.uint16", "u32": "tl.uint32", "u64": "tl.uint64",
            "i1": "tl.int1", "f8e4m3": "tl.float8e4nv", "f8e5m2": "tl.float8e5",
            "f8e8m0": "tl.uint8"}  # (Triton has no e8m0: its bits, as torchao's kernels hold them)
# float8_e8m0fnu's bits as float32: 2**(b - 127) is the exponent field b (b = 0: the
# subnormal 2**-127), 0xFF is NaN
E8M0_TO_F32 = ("tl.where({e} == 255, 0x7FC00000, tl.where({e} == 0, 0x00400000, "
               "{e}.to(tl.int32) << 23)).to(tl.float32, bitcast=True)")


def tl_dtype(d: DType) -> str:
    return TL_DTYPE[d.short]


def literal(value: Any) -> str:
    """A Python number as Triton source (inf and NaN spelled with float())."""
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '-float("inf")'
        return repr(value)
    return repr(value)


def convert(expr: str, src: DType, dst: DType, *, number: bool) -> str:
    """`expr`, of dtype `src`, converted to `dst`. `number`: `expr` is a kernel parameter that
    the interpreter passes as a Python number, which has no `.to` (hence `tl.cast`)."""
    def to(e: str, d: str) -> str:
        return f"tl.cast({e}, {d})" if number else f"{e}.to({d})"
    if src.short == "f8e8m0":  # (its bits: a uint8)
        expr, src = "(" + E8M0_TO_F32.format(e=expr) + ")", float32
        if dst.short == "f32":
            return expr
    if dst.short == "bf16" and (not src.is_float or src.short == "f64"):
        expr = to(expr, "tl.float32")
    elif (src.is_fp8 or dst.is_fp8) and "f32" not in (src.short, dst.short):
        # Triton converts fp8 only from and to floats, and a GPU from float32 and 16-bit
        # floats: every other conversion goes through float32 (tiledsl/lang/fp8.py).
        expr = to(expr, "tl.float32")
    return to(expr, tl_dtype(dst))


def reduce_in_f32(dtype: DType) -> bool:
    """Whether a max or min reduction over `dtype` runs in float32 (exact, and cast back): for
    bfloat16, whose uint16 bit patterns the interpreter compares, and whose NaN-propagating
    maximum triton 3.6 returns as float32, which tl.reduce refuses."""
    return dtype.short == "bf16"
