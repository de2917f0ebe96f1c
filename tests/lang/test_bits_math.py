"""Bit operations (`<<`, `>>`, `td.bitcast`), unsigned dtypes through the stack, and the math
library (`td.log2` ... `td.clamp`), on every CPU backend under the default and a sampled config,
against NumPy in float64: bit-exact for integers (negative values, unsigned wrap, shifts by the
width or more and by negative amounts), per-dtype tolerances and exact special values (NaN, inf,
signed zeros, large arguments, halves for round-half-to-even) for floats. One kernel computes
many ops at once, so each backend compiles it once per config."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from error_checks import msg, trace_error
from support import gpu_backend, under_configs
from tiledsl import dtypes

BACKENDS = ["numpy", "triton-interpret", "spatial", gpu_backend()]


# ---- integers: shifts, bit operations and bitcasts ---------------------------------------------
@td.tile_kernel
def int_ops(x, s):
    """Shifts by tile amounts and by constants, the bitwise operators, a bitcast round trip
    through the other signedness and the integer helpers."""
    m, n = x.shape
    outs = [td.empty((m, n), dtype=x.dtype) for _ in range(9)]
    nan = td.empty((m, n), dtype=td.bool_)
    for tm, tn in td.tile(m, n):
        a, b = x[tm, tn], s[tm, tn]
        flipped = td.bitcast(a, dtypes.BY_SHORT[("i" if x.dtype.is_unsigned else "u") +
                                                str(x.dtype.bits)])
        outs[0][tm, tn] = a << b
        outs[1][tm, tn] = a >> b
        outs[2][tm, tn] = (a >> 3) ^ (a << 5)
        outs[3][tm, tn] = td.bitcast(flipped >> 2, x.dtype)
        outs[4][tm, tn] = ~a | (b & 12)
        outs[5][tm, tn] = td.sign(a)
        outs[6][tm, tn] = td.floor(a) + td.round(b)  # an int is its own rounding
        outs[7][tm, tn] = td.clamp(a, b, 100)
        outs[8][tm, tn] = 1 << (b & 7)
        nan[tm, tn] = td.isnan(a) | td.isinf(b)
    return (*outs, nan)


def int_reference(x: np.ndarray, s: np.ndarray) -> list[np.ndarray]:
    flip = np.dtype(("i" if x.dtype.kind == "u" else "u") + str(x.dtype.itemsize))
    with np.errstate(over="ignore"):
        return [x << s, x >> s, (x >> 3) ^ (x << 5), (x.view(flip) >> 2).view(x.dtype),
                ~x | (s & 12), np.sign(x), np.floor(x) + np.round(s),
                np.minimum(np.maximum(x, s), 100), x.dtype.type(1) << (s & 7),
                np.zeros(x.shape, bool)]


def int_inputs(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Values over the whole range (min, max, -1, 0) and shift amounts in [-3, width + 3)."""
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (1, 173), dtype=dtype, endpoint=True)
    x[0, :5] = [info.min, info.max, 0, 1, info.max // 3]
    if info.min < 0:
        x[0, 5:8] = [-1, -2, info.min + 1]
    lo = 0 if info.min == 0 else -3
    s = rng.integers(lo, info.bits + 3, (1, 173)).astype(dtype)
    s[0, :4] = [0, info.bits - 1, info.bits, info.bits + 1]
    return x, s


INT_DTYPES = [np.int8, np.uint8, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_ops_are_bit_exact(dtype: type, backend: str) -> None:
    x, s = int_inputs(dtype)
    refs = int_reference(x, s)
    for config, outs in under_configs(int_ops, (x, s), backend, samples=1, seed=3):
        for i, (out, ref) in enumerate(zip(outs, refs)):
            assert out.dtype == ref.dtype, (i, out.dtype, ref.dtype)
            wrong = np.flatnonzero(out != ref)
            assert not wrong.size, (f"output {i} under {config} at {wrong[:4]}: x={x.ravel()[wrong[:4]]}"
                                    f" s={s.ravel()[wrong[:4]]}: {out.ravel()[wrong[:4]]} vs "
                                    f"{ref.ravel()[wrong[:4]]}")


# ---- the math library ---------------------------------------------------------------------------
UNARY = {  # td function -> NumPy's
    "log2": np.log2, "log1p": np.log1p, "expm1": np.expm1, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "sign": np.sign, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "log10": np.log10, "cbrt": np.cbrt,
}
BINARY = {  # name -> (the kernel's expression of tiles a and b, NumPy's)
    "atan2": (td.atan2, np.arctan2),
    "hypot": (td.hypot, np.hypot),
    "copysign": (td.copysign, np.copysign),
    "fmod": (td.fmod, np.fmod),
    "pow": (td.pow, np.power),
    "fma": (lambda a, b: td.fma(a, b, a), lambda a, b: a * b + a),
    "clamp": (lambda a, b: td.clamp(a, -1.0, b), lambda a, b: np.clip(a, -1.0, b)),
}
FLOAT_NAMES = [*UNARY, *BINARY]


@td.tile_kernel
def math_ops(x, y):
    m, n = x.shape
    outs = [td.empty((m, n), dtype=x.dtype) for _ in FLOAT_NAMES]
    tests = [td.empty((m, n), dtype=td.bool_) for _ in range(2)]
    for tm, tn in td.tile(m, n):
        a, b = x[tm, tn], y[tm, tn]
        for out, name in zip(outs, FLOAT_NAMES):
            out[tm, tn] = getattr(td, name)(a) if name in UNARY else BINARY[name][0](a, b)
        tests[0][tm, tn] = td.isnan(a)
        tests[1][tm, tn] = td.isinf(a)
    return (*outs, *tests)


FLOAT_DTYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16,
                "bf16": ml_dtypes.bfloat16}
# Per element: |out - ref| <= TOL * max(|ref|, 1), the reference rounded to the output dtype
# first (16-bit results round once, from float32). float64: libdevice is within 2 ulp.
TOL = {"f64": 1e-13, "f32": 4e-6, "f16": 2e-3, "bf16": 1.6e-2}


def float_inputs(dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Random values of both signs and the special ones: NaN, infinities, signed zeros, halves
    (round half to even), the edges of asin's domain and large arguments (sin and cos of 1e4
    and 1e30 need a full range reduction)."""
    rng = np.random.default_rng(5)
    x = 3.0 * rng.standard_normal((7, 43))
    y = 3.0 * rng.standard_normal((7, 43))
    x[1, ::2] = rng.uniform(-1, 1, 22)  # asin, acos
    special = [(np.nan, 1.0), (np.inf, 2.0), (-np.inf, -2.0), (-0.0, -1.0), (0.0, -0.0),
               (-0.0, 0.0), (0.5, 3.0), (1.5, -0.5), (2.5, np.inf), (-2.5, -np.inf),
               (-0.5, 2.0), (-0.4, 1.0), (1.0, np.nan), (-1.0, 0.5), (1e4, 1.0), (-1e4, 2.0),
               (1e30, 0.5), (-3e29, 7.0), (7.0, 0.0), (-8.0, 3.0)]
    x[0, :len(special)], y[0, :len(special)] = zip(*special)
    return x.astype(dtype), y.astype(dtype)


def check_float(name: str, dtype: str, x: np.ndarray, ref: np.ndarray, out: np.ndarray,
                zero_sign: bool = True) -> None:
    """Exact where the reference is not finite or is zero (its sign too, if `zero_sign`), else
    within TOL."""
    ref = np.asarray(ref).astype(FLOAT_DTYPES[dtype]).astype(np.float64)
    out = np.asarray(out).astype(np.float64)
    exact = ~np.isfinite(ref) | (ref == 0)
    sign = (np.signbit(out) == np.signbit(ref)) | (not zero_sign)
    same = (out == ref) & sign | np.isnan(out) & np.isnan(ref)
    wrong = np.flatnonzero(exact & ~same)
    assert not wrong.size, (f"{name}: x={x.ravel()[wrong[:4]]} gave {out.ravel()[wrong[:4]]}, "
                            f"NumPy {ref.ravel()[wrong[:4]]}")
    err = np.abs(out - ref)[~exact] / np.maximum(np.abs(ref[~exact]), 1.0)
    assert err.max() <= TOL[dtype], f"{name}: error {err.max():.2g}"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", list(FLOAT_DTYPES))
def test_math_library_matches_numpy(dtype: str, backend: str) -> None:
    x, y = float_inputs(FLOAT_DTYPES[dtype])
    a, b = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(all="ignore"):
        refs = [UNARY[n](a) if n in UNARY else BINARY[n][1](a, b) for n in FLOAT_NAMES]
    for config, outs in under_configs(math_ops, (x, y), backend, samples=1, seed=7):
        for name, ref, out in zip(FLOAT_NAMES, refs, outs):
            assert out.dtype == x.dtype, (name, out.dtype)
            # min(-0, +0) is NumPy's second operand, a GPU's -0 (an H100, 2026-11-26)
            check_float(f"{name} under {config}", dtype, x, ref, out, name != "clamp")
        np.testing.assert_array_equal(outs[-2], np.isnan(a))
        np.testing.assert_array_equal(outs[-1], np.isinf(a))


# ---- unsigned dtypes through the stack ------------------------------------------------------------
@td.tile_kernel
def unsigned_stack(x, y, w, k):
    """uint8 tiles with a scalar uint8 argument: promotion with int8, sums (uint64), max,
    argmin, cumsum, casts to and from floats, comparisons and a uint8 matrix product (uint32)."""
    m, n = x.shape
    sums = td.empty((m,), dtype=td.uint64)
    top = td.empty((m,), dtype=x.dtype)
    low = td.empty((m,), dtype=td.int32)
    mixed = td.empty((m, n), dtype=td.int16)
    half = td.empty((m, n), dtype=td.bfloat16)
    big = td.empty((m, n), dtype=td.bool_)
    back = td.empty((m, n), dtype=td.uint8)
    prefix = td.empty((m, n), dtype=td.uint64)
    prod = td.empty((m, m), dtype=td.uint32)
    for tm in td.tile(m):
        a = x[tm, :]
        sums[tm] = td.sum(a, axis=1)
        top[tm] = td.max(a + k, axis=1)  # wraps at 256
        low[tm] = td.argmin(a, axis=1)
        mixed[tm, :] = a + y[tm, :]
        half[tm, :] = a.astype(td.float32) * 0.5
        big[tm, :] = a > 200
        back[tm, :] = (w[tm, :] * 255.0).astype(td.uint8)
        prefix[tm, :] = td.cumsum(a, axis=1)
    for tm, tn in td.tile(m, m):
        prod[tm, tn] = x[tm, :] @ x[tn, :].T
    return sums, top, low, mixed, half, big, back, prefix, prod


@pytest.mark.parametrize("backend", BACKENDS)
def test_unsigned_dtypes_through_the_stack(backend: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (13, 16), dtype=np.uint8)
    y = rng.integers(-128, 128, (13, 16), dtype=np.int8)
    w = rng.random((13, 16)).astype(np.float32)
    k = np.uint8(77)
    wide = x.astype(np.uint32)
    refs = [x.sum(1), (x + k).max(1), x.argmin(1).astype(np.int32), x + y,
            (x * np.float32(0.5)).astype(ml_dtypes.bfloat16), x > 200,
            (w * 255).astype(np.uint8), np.cumsum(x, 1, dtype=np.uint64), wide @ wide.T]
    for config, outs in under_configs(unsigned_stack, (x, y, w, k), backend, samples=1):
        for i, (out, ref) in enumerate(zip(outs, refs)):
            assert out.dtype == ref.dtype, (i, out.dtype, ref.dtype)
            np.testing.assert_array_equal(out, ref, err_msg=f"output {i} under {config}")


def test_promotion_follows_numpy_2() -> None:
    """Signed and unsigned ints meet as in NumPy 2; uint64 and a signed int, which NumPy rounds
    to float64, are refused; a float wins over any int (as it does over signed ints here)."""
    ints = [d for d in dtypes.ALL if d.is_int]
    for a in ints:
        for b in ints:
            want = np.result_type(a.np, b.np)
            got = dtypes.promote(a, b)
            assert (got is None) if want.kind == "f" else got == want, (a, b, got, want)
    assert dtypes.promote(td.uint32, td.float16) == td.float16
    assert dtypes.promote(td.bool_, td.uint16) == td.uint16


@td.tile_kernel
def promoted_sum(a, b):
    out = td.empty_like(a, dtype=np.promote_types(a.dtype, b.dtype))  # NumPy reads td dtypes
    for t in td.tile(a.shape[0]):
        out[t] = a[t] + b[t]
    return out


def test_td_dtypes_are_numpy_dtypes_and_promote_as_torch_spells_it() -> None:
    """`np.dtype(td.float32)` and `np.promote_types(a.dtype, b.dtype)` read td dtypes (their
    `.dtype`); `td.promote_types` is torch's spelling of `dtypes.promote`."""
    assert np.dtype(td.bfloat16) == ml_dtypes.bfloat16 and np.dtype(td.int16) == np.int16
    assert td.promote_types(td.float16, td.bfloat16) == td.float32
    assert td.promote_types(np.uint8, td.int8) == td.int16
    with pytest.raises(td.DTypeError, match="no common dtype"):
        td.promote_types(td.uint64, td.int64)
    a, b = np.arange(7, dtype=np.float16), np.arange(7, dtype=np.int8)
    out = promoted_sum(a, b)
    assert out.dtype == np.float16 and np.array_equal(out, 2 * a)


@td.tile_kernel
def shift_float(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] << 1  # <- here
    return out


@td.tile_kernel
def bitcast_width(x):
    out = td.empty(x.shape, dtype=td.int16)
    for t in td.tile(x.shape[0]):
        out[t] = td.bitcast(x[t], td.int16)  # <- here
    return out


@td.tile_kernel
def uint64_meets_int64(x, y):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] + y[t]  # <- here
    return out


@td.tile_kernel
def negative_unsigned(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] & -1  # <- here
    return out


def test_bad_bit_operations_are_refused_at_their_line() -> None:
    f = np.ones(8, np.float32)
    u64, u8 = np.ones(8, np.uint64), np.ones(8, np.uint8)
    assert "td.bitcast" in msg(trace_error(td.DTypeError, shift_float, f))
    assert "keeps the width" in msg(trace_error(td.DTypeError, bitcast_width, f))
    assert ".astype" in msg(trace_error(td.DTypeError, uint64_meets_int64, u64, u64.view(np.int64)))
    assert "out of range for uint8" in msg(trace_error(td.DTypeError, negative_unsigned, u8))


@td.tile_kernel
def rounded_down_casts(x, x64):
    """Triton's `fp_downcast_rounding=`: toward zero to float16 and bfloat16, and from float64."""
    n = x.shape[0]
    outs = (td.empty((n,), dtype=td.float16), td.empty((n,), dtype=td.bfloat16),
            td.empty((n,), dtype=td.float32), td.empty((n,), dtype=td.float16))
    for t in td.tile(n):
        outs[0][t] = x[t].to(td.float16, fp_downcast_rounding="rtz")
        outs[1][t] = td.cast(x[t], td.bfloat16, fp_downcast_rounding="rtz")
        outs[2][t] = x64[t].to(td.float32, fp_downcast_rounding="rtz")
        outs[3][t] = x[t].to(td.float16, fp_downcast_rounding="rtne").to(
            td.float16, fp_downcast_rounding="rtz")  # (to its own dtype: x, as Triton's)
    return outs


def _toward_zero(x: np.ndarray, dtype: Any) -> np.ndarray:
    """The IEEE cast toward zero: the nearest value, or the next one toward zero past x."""
    with np.errstate(over="ignore", invalid="ignore"):
        near = x.astype(dtype)
        away = np.abs(near.astype(np.float64)) > np.abs(x.astype(np.float64))
    return np.where(away, np.nextafter(near, np.zeros_like(near)), near).astype(dtype)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_casts_rounded_toward_zero(backend: str) -> None:
    rng = np.random.default_rng(75)
    special = [1.0001, -1.0001, 7e4, -7e4, 65519.0, np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-8,
               3e38, -3.3e38]
    x = np.concatenate([special, rng.standard_normal(40) * 10.0 ** rng.integers(-6, 6, 40)])
    x64 = x * (1 + 1e-12)
    x = x.astype(np.float32)
    with np.errstate(over="ignore"):
        got = [np.asarray(o) for o in under_configs(rounded_down_casts, (x, x64), backend,
                                                        samples=0).__next__()[1]]
        want = [_toward_zero(x, np.float16), _toward_zero(x, ml_dtypes.bfloat16),
                _toward_zero(x64, np.float32), x.astype(np.float16)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.view(f"u{g.itemsize}"), w.view(f"u{w.itemsize}"))
    assert "narrower float" in msg(trace_error(td.DTypeError, widening_rtz, x))


@td.tile_kernel
def widening_rtz(x):
    out = td.empty(x.shape, dtype=td.float64)
    for t in td.tile(x.shape[0]):
        out[t] = x[t].to(td.float64, fp_downcast_rounding="rtz")  # <- here
    return out


# ---- the generated Triton ---------------------------------------------------------------------
@td.tile_kernel
def dequantize(q, s, scale):
    """int4 nibbles, a shift by a tile amount and the libdevice functions in one kernel."""
    m, n = q.shape
    out = td.empty((m, n), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        v = q[tm, tn]
        lo = (v << 4) >> 4  # the low nibble, sign-extended
        hi = v >> s[tm, tn]
        f = (lo + hi).astype(td.float32) * scale[tm, tn]
        out[tm, tn] = td.round(f) + td.atan2(td.tan(f), td.trunc(f)) + td.log1p(td.abs(f))
    return out


def test_shifts_and_libdevice_compile_for_hopper() -> None:
    """Shifts by constants are plain `<<` and `>>`; a shift by a tile selects NumPy's result
    past the width; libdevice is imported once and called as Triton authors call it, and the
    module compiles to PTX for sm_90. Interpreted runs leave libdevice as Triton defines it."""
    pytest.importorskip("triton")
    q = np.ones((32, 64), np.int8)
    scale = np.ones((32, 64), np.float32)
    src = dequantize.source(q, q, scale, target="triton")
    assert src.count("from triton.language.extra import libdevice") == 1
    assert "libdevice.rint(" in src and "libdevice.atan2(" in src and "libdevice.tan(" in src
    assert "q_tile << 4" in src and ">> 4" in src
    assert "tl.where(s_tile.to(tl.uint8, bitcast=True) < 8, q_tile >> s_tile, q_tile >> 7)" in src
    dequantize.run(q, q, scale, backend="triton-interpret")
    from triton.language.extra import libdevice
    assert libdevice.rint.__module__ == "triton.language.extra.libdevice"
    (report,) = dequantize.compile(q, q, scale, arch="sm_90")
    # (triton 3.6's libdevice keeps the 32-byte table of tan's (sin's, cos's) reduction of large
    # arguments in local memory, which the report counts as a spill; triton 3.9's does not)
    assert report.problem is None or report.problem == "spills 32 bytes of local memory per thread"
    assert "shl.b16" in report.ptx or "shl.b32" in report.ptx
    assert "cvt.rni.f32.f32" in report.ptx  # rint: round to nearest even
    x, y = float_inputs(np.float32)  # every function of the library: each libdevice call exists
    assert math_ops.compile(x, y, arch="sm_90")[0].registers > 0
