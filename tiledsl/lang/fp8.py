"""fp8: `td.float8_e4m3fn` and `td.float8_e5m2`, and what a conversion to them means.

`td.float8_e8m0fnu` (torch's, the MX formats' block scales: 2**(bits - 127), 0xFF NaN) converts
to other dtypes exactly, and is viewed as uint8 and back (`scale.view(torch.float8_e8m0fnu)`);
no conversion to it is defined (torch rounds in the log domain, a GPU has only round-up and
round-toward-zero instructions): kernels build its bits as uint8 and view them, as torchao's do.

Both are storage types, as in Triton: a kernel loads, stores and casts them, and `@` multiplies
them, accumulating in float32; other arithmetic on an fp8 tile is a DTypeError (cast first).

A conversion to fp8 is the GPU's (`cvt.rn.satfinite.e4m3x2.f32` / `.e5m2x2.f32`, which Triton's
`.to(tl.float8e4nv)` and `.to(tl.float8e5)` compile to on sm_89 and later): round to nearest
even, a magnitude past the largest finite value (448 and 57344) becomes that value with its
sign, infinities included, and NaN stays NaN. Values that are not float32 convert through
float32 (exact for float16, bfloat16, the other fp8 type and integers below 2**24; float64
rounds twice, as the generated Triton code does). ml_dtypes and torch disagree with the GPU
here (ml_dtypes gives NaN for an e4m3fn overflow and inf for e5m2; torch saturates e4m3fn but
not e5m2), so every backend converts with `saturate` below.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

# The largest finite value of each fp8 type (its saturation bound), by NumPy dtype.
FP8_MAX: dict[np.dtype, float] = {
    np.dtype(ml_dtypes.float8_e4m3fn): 448.0,
    np.dtype(ml_dtypes.float8_e5m2): 57344.0,
}


E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)  # MX scales: 2**(bits - 127), 0xFF NaN


def is_fp8(dtype: np.dtype) -> bool:
    """float8_e4m3fn and float8_e5m2 (computed values convert to them)."""
    return np.dtype(dtype) in FP8_MAX


def e8m0_bits(value: float) -> int:
    """The float8_e8m0fnu bits of a number torch fills a tensor with: 0 for 0 (ml_dtypes
    gives NaN there), 0xFF for NaN, infinity or a negative number, else ml_dtypes' (torch's)
    rounding of the exponent."""
    if value == 0:
        return 0
    if not np.isfinite(value) or value < 0:
        return 0xFF
    return int(np.array(value, np.float32).astype(E8M0).view(np.uint8))


def is_8_bit_float(dtype: np.dtype) -> bool:
    """Those and float8_e8m0fnu, which converts only from (its bits are made as uint8)."""
    return np.dtype(dtype) in FP8_MAX or np.dtype(dtype) == E8M0


def saturate(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`x` converted to the fp8 type `dtype` as a GPU converts it (see the module docstring)."""
    bound = FP8_MAX[np.dtype(dtype)]
    wide = np.asarray(x).astype(np.float32)
    return np.clip(wide, -bound, bound).astype(dtype)  # clip keeps NaN


def convert(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`x.astype(dtype)`, saturating where `dtype` is fp8, and from fp8 through float32."""
    if is_fp8(dtype):
        return saturate(x, dtype)
    if is_8_bit_float(np.asarray(x).dtype):
        return np.asarray(x).astype(np.float32).astype(dtype)
    return np.asarray(x).astype(dtype)
