"""Numerics at the edges, on the NumPy, Triton-interpreter and spatial backends, against NumPy:
conversions to bfloat16 (integers, bools, rounding to nearest even), bfloat16 max and min,
powers of signed zeros, -1 and infinities, float64 tanh, `x ** 0.5` of -inf and the sign of
-0.0. Ragged shapes (45 x 77), random data plus the special values."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from support import under_configs

BF16 = ml_dtypes.bfloat16
BACKENDS = ["numpy", "triton-interpret", "spatial"]
SHAPE = (45, 77)


def runs(kernel: Any, args: tuple, backend: str) -> list[tuple]:
    """Outputs (always a tuple) under the default config and one sampled config."""
    return [out if isinstance(out, tuple) else (out,)
            for _, out in under_configs(kernel, args, backend, samples=1)]


def assert_same(got: np.ndarray, want: np.ndarray, rtol: float = 0.0) -> None:
    """Equal as NumPy's result: NaN where it has NaN, the sign of every other value (zeros
    included), and values within `rtol` (infinities exactly)."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert g.shape == w.shape
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    number = ~np.isnan(w)
    np.testing.assert_array_equal(np.signbit(g[number]), np.signbit(w[number]))
    np.testing.assert_allclose(g, w, rtol=rtol, atol=0)


@td.tile_kernel
def to_bf16(i, flags, h, k):
    m, n = i.shape
    cast = td.empty((m, n), dtype=td.bfloat16)
    stored = td.empty((m, n), dtype=td.bfloat16)
    mixed = td.empty((m, n), dtype=td.bfloat16)
    from_bool = td.empty((m, n), dtype=td.bfloat16)
    index = td.empty((m, n), dtype=td.bfloat16)
    scaled = td.empty((m, n), dtype=td.bfloat16)
    for tm, tn in td.tile(m, n):
        cast[tm, tn] = i[tm, tn].astype(td.bfloat16)
        stored[tm, tn] = i[tm, tn]
        mixed[tm, tn] = h[tm, tn] + i[tm, tn]
        from_bool[tm, tn] = flags[tm, tn].astype(td.bfloat16)
        zero = td.zeros((tm, tn), dtype=td.bfloat16)
        index[tm, tn] = zero + tn.index[None, :].astype(td.bfloat16)
        scaled[tm, tn] = h[tm, tn] * k
    return cast, stored, mixed, from_bool, index, scaled


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("int_dtype", [np.int32, np.int64])
def test_ints_and_bools_convert_to_bfloat16(backend: str, int_dtype: type) -> None:
    """The interpreter converts an integer or a bool to bfloat16 by reinterpreting its bits;
    the generated code goes through float32 (ml_dtypes' rounding for |i| > 2**24)."""
    rng = np.random.default_rng(0)
    i = rng.integers(-2**31, 2**31, SHAPE).astype(int_dtype)
    i[0, :8] = [0, 1, -1, 3, -5, 300, 2**30 + 2**22 + 1, 2**24 + 1]
    flags = rng.random(SHAPE) < 0.5
    h = rng.standard_normal(SHAPE).astype(BF16)
    k = 1001  # not a bfloat16
    f32 = np.float32
    want = (i.astype(BF16), i.astype(BF16),
            (h.astype(f32) + i.astype(BF16).astype(f32)).astype(BF16), flags.astype(BF16),
            np.broadcast_to(np.arange(SHAPE[1]).astype(BF16), SHAPE),
            (h.astype(f32) * BF16(k).astype(f32)).astype(BF16))
    for outs in runs(to_bf16, (i, flags, h, k), backend):
        for got, w in zip(outs, want):
            assert_same(got, w)


@td.tile_kernel
def round_bf16(x32, x64, h):
    m, n = x32.shape
    a = td.empty((m, n), dtype=td.bfloat16)
    b = td.empty((m, n), dtype=td.bfloat16)
    c = td.empty((m, n), dtype=td.bfloat16)
    for tm, tn in td.tile(m, n):
        a[tm, tn] = x32[tm, tn].astype(td.bfloat16)
        b[tm, tn] = x64[tm, tn]
        c[tm, tn] = h[tm, tn] * 100
    return a, b, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_bfloat16_rounds_to_nearest_even(backend: str) -> None:
    """float32 -> bfloat16 rounds to nearest, ties to even, as ml_dtypes and a GPU do (the
    interpreter truncates): random values, and ties (low 16 bits 0x8000) of both parities."""
    rng = np.random.default_rng(1)
    x32 = rng.standard_normal(SHAPE).astype(np.float32)
    ties = (rng.integers(0, 2**31, SHAPE[1]).astype(np.uint32) & 0xBFFF0000 | 0x8000)
    x32[0] = ties.view(np.float32)
    x32[1, :4] = [np.inf, -np.inf, np.nan, -0.0]
    x64 = rng.standard_normal(SHAPE) * 1e3
    h = rng.standard_normal(SHAPE).astype(BF16)
    h[0, :2] = [2.59375, -2.59375]  # * 100 is 259.375: 260, not 258
    want = (x32.astype(BF16), x64.astype(BF16), (h.astype(np.float32) * 100).astype(BF16))
    for outs in runs(round_bf16, (x32, x64, h), backend):
        for got, w in zip(outs, want):
            assert_same(got, w)


def test_float64_goes_to_bfloat16_through_float32_on_a_gpu_too() -> None:
    """As ml_dtypes (the NumPy backend) does: 1 + 2**-8 + 2**-40 rounds to 1.0 through float32,
    to 1.0078125 directly, so a direct conversion on a GPU would disagree with the reference."""
    pytest.importorskip("triton")
    x = np.full(SHAPE, 1 + 2**-8 + 2**-40)
    assert np.all(x.astype(BF16) == 1.0)
    args = (x.astype(np.float32), x, x.astype(BF16))
    source = round_bf16.source(*args, target="triton")
    assert ".to(tl.float32).to(tl.bfloat16)" in source
    assert [r.problem for r in round_bf16.compile(*args, arch="sm_90")] == [None]


@td.tile_kernel
def row_max_min(x):
    m, _ = x.shape
    hi = td.empty((m,), dtype=x.dtype)
    lo = td.empty((m,), dtype=x.dtype)
    for tm in td.tile(m):
        hi[tm] = td.max(x[tm, :], axis=1)
        lo[tm] = td.min(x[tm, :], axis=1)
    return hi, lo


@pytest.mark.parametrize("backend", BACKENDS)
def test_bfloat16_max_and_min(backend: str) -> None:
    """The interpreter compares bfloat16 bit patterns; max and min reduce in float32 there."""
    x = np.random.default_rng(2).standard_normal(SHAPE).astype(BF16)
    x[3, 5] = np.nan  # NaN still wins
    wide = x.astype(np.float64)
    for hi, lo in runs(row_max_min, (x,), backend):
        assert_same(hi, np.max(wide, axis=1))
        assert_same(lo, np.min(wide, axis=1))


def test_bfloat16_max_and_min_compile_for_a_gpu() -> None:
    """triton 3.6's NaN-propagating maximum of bfloat16 values is float32, which tl.reduce
    refused: the reduction runs in float32 on the GPU too."""
    pytest.importorskip("triton")
    x = np.zeros(SHAPE, BF16)
    assert [r.problem for r in row_max_min.compile(x, arch="sm_90")] == [None]


@td.tile_kernel
def power(x, y):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = x[tm, tn] ** y[tm, tn]
    return out


@td.tile_kernel
def power_of_scalar(x, p):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = x[tm, tn] ** p
    return out


EDGE_BASES = [-np.inf, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, np.inf, np.nan]
EDGE_EXPONENTS = [-np.inf, -3.0, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 2.5, 3.0, np.inf,
                  np.nan]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_power_of_a_tile_matches_np_power(backend: str, dtype: type) -> None:
    """`x ** y` with a tile exponent is np.power: every pair of special values ((-0.0) ** 3 is
    -0.0, (-0.0) ** -1 is -inf, (-1) ** inf is 1, (-inf) ** 0.5 is inf), then random data."""
    x, y = (a.astype(dtype) for a in np.meshgrid(EDGE_BASES, EDGE_EXPONENTS, indexing="ij"))
    rng = np.random.default_rng(3)
    rx = (rng.standard_normal(SHAPE) * 3).astype(dtype)
    ry = np.where(rng.random(SHAPE) < 0.5, rng.integers(-4, 5, SHAPE),
                  rng.uniform(-3, 3, SHAPE)).astype(dtype)
    with np.errstate(all="ignore"):
        want, rwant = np.power(x, y), np.power(rx.astype(np.float64), ry.astype(np.float64))
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for (got,) in runs(power, (x, y), backend):
        assert_same(got, want, rtol)
    for (got,) in runs(power, (rx, ry), backend):
        assert_same(got, rwant, rtol)
    for p in (0.5, -1.0, 3.0, np.inf):  # a runtime exponent, one value for the whole tile
        with np.errstate(all="ignore"):
            want = np.power(x, np.full_like(x, p))  # not np.power(x, p): NumPy's sqrt for 0.5
        for (got,) in runs(power_of_scalar, (x, p), backend):
            assert_same(got, want, rtol)


@td.tile_kernel
def tanh(x):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = td.tanh(x[tm, tn])
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tanh_is_accurate_and_odd(backend: str, dtype: type) -> None:
    """float64 tanh to about 1e-15 relative (Triton's used to be a short series, 1e-9); tanh
    of -0.0 is -0.0."""
    rng = np.random.default_rng(4)
    x = np.geomspace(1e-9, 30, SHAPE[0] * SHAPE[1]) * rng.choice([-1.0, 1.0], SHAPE[0] * SHAPE[1])
    x = x.reshape(SHAPE).astype(dtype)
    x[0, :5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
    rtol = 1e-15 if dtype == np.float64 else 4e-6
    for (got,) in runs(tanh, (x,), backend):
        assert_same(got, np.tanh(x.astype(np.float64)), rtol)


@td.tile_kernel
def square_root(x):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    first = td.empty((m,), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = x[tm, tn] ** 0.5
    for i in td.grid(m):
        first[i] = x[i, 0] ** 0.5  # a scalar base: the 0.5 is not broadcast
    return out, first


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64])
def test_power_one_half_is_a_square_root(backend: str, dtype: type) -> None:
    """`x ** 0.5` is NumPy's `x ** 0.5`, a square root, in every dtype: (-inf) ** 0.5 is NaN
    (np.power's inf came out for 16-bit floats) and (-0.0) ** 0.5 is -0.0."""
    x = np.random.default_rng(5).uniform(-4, 100, SHAPE).astype(dtype)
    x[:5, 0] = [-np.inf, -0.0, np.inf, np.nan, -4.0]
    x[0, 1:4] = [-np.inf, -0.0, 4.0]
    with np.errstate(all="ignore"):
        want = (x ** 0.5).astype(dtype)  # NumPy gives float32 for bfloat16
    for out, first in runs(square_root, (x,), backend):
        assert_same(out, want)
        assert_same(first, want[:, 0])


@td.tile_kernel
def negate(x):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = -x[tm, tn]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_negation_flips_the_sign_of_zero(backend: str) -> None:
    """-(0.0) is -0.0 (triton 3.6 computes `-x` as 0 - x, which gives 0.0)."""
    x = np.random.default_rng(6).standard_normal(SHAPE).astype(np.float32)
    x[0, :4] = [0.0, -0.0, np.inf, np.nan]
    for (got,) in runs(negate, (x,), backend):
        assert_same(got, -x)


@td.tile_kernel
def quotients(x, y, s: float):
    """SGLang's fp8 quant divides fp16 values: `_absmax / fp8_max`, `gate_up / output_s`."""
    out = td.empty((3,) + x.shape, td.float32)
    for t in td.tile(x.shape[0]):
        a, b = x[t], y[t]
        q = a / b
        assert q.dtype == td.float32  # Triton's rule: 16-bit `/` computes in float32
        out[0, t] = q
        out[1, t] = a / s
        out[2, t] = a % b
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_16_bit_division_is_float32_as_triton_s(backend: str, dtype: type) -> None:
    rng = np.random.default_rng(30)
    x, y = (rng.uniform(0.5, 2.0, 45).astype(dtype) for _ in range(2))
    xs, ys = x.astype(np.float32), y.astype(np.float32)
    for config, out in under_configs(quotients, (x, y, 448.0), backend, samples=1):
        np.testing.assert_allclose(out[0], xs / ys, rtol=2e-7)  # one float32 rounding,
        np.testing.assert_allclose(out[1], xs / np.float32(448.0), rtol=2e-7)  # not a 16-bit
        np.testing.assert_allclose(out[2], np.fmod(xs, ys), rtol=2e-7, atol=1e-7)  # one


@pytest.mark.parametrize("backend", BACKENDS)
def test_integral_powers_are_exact(backend: str) -> None:
    """C's pow (libdevice's on a GPU): a float power with an integral result that the dtype
    holds is exact, as np.power's (FlagGems' int pow computes in float32 and truncates: an
    exp2(y * log2(x)) gave 6 ** 4 = 1296.0004, 624 for 5 ** 4 once truncated)."""
    rng = np.random.default_rng(11)
    x = rng.integers(-9, 10, (7, 33)).astype(np.float32)
    y = rng.integers(0, 8, (7, 33)).astype(np.float32)
    for (got,) in runs(power, (x, y), backend):
        np.testing.assert_array_equal(got, np.power(x, y))


@td.tile_kernel
def divide_toward_zero(x, y):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.div_rz(x[t], y[t])
    return out


def _quotient_toward_zero(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x / y rounded toward zero, from the exact quotient (fractions)."""
    from fractions import Fraction
    out = []
    for a, b in zip(x.tolist(), y.tolist()):
        exact = Fraction(a) / Fraction(b)
        try:
            with np.errstate(over="ignore"):
                q = x.dtype.type(float(exact))
        except OverflowError:  # past float64's range
            q = x.dtype.type(np.inf if exact > 0 else -np.inf)
        if not np.isfinite(q) or abs(Fraction(float(q))) > abs(exact):
            q = np.nextafter(q, x.dtype.type(0))
        out.append(q)
    return np.array(out, x.dtype)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_div_rz_rounds_toward_zero_to_the_bit(backend: str, dtype: type) -> None:
    """libdevice's div_rz (FlagGems' trunc_divide is trunc(div_rz(x, y))): about half of
    random quotients round differently from `/`, and an overflow is the largest finite."""
    rng = np.random.default_rng(13)
    x = (rng.standard_normal(1500) * 10).astype(dtype)
    y = (rng.standard_normal(1500) * 3).astype(dtype)
    x[:2], y[:2] = (np.finfo(dtype).max, -np.finfo(dtype).max), (0.5, 0.25)
    want = _quotient_toward_zero(x, y)
    assert (want != x / y).sum() > 500
    np.testing.assert_array_equal(divide_toward_zero.run(x, y, backend=backend), want)
