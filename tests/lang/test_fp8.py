"""fp8 (td.float8_e4m3fn, td.float8_e5m2): saturating casts as a GPU's cvt.rn.satfinite on
every backend, `@` on fp8 tiles accumulating in float32, fp8 wgmma in the sm_90 PTX, and the
error for arithmetic on fp8 tiles."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from support import example, gpu_backend, run_on, under_configs

import tiledsl as td

E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
BACKENDS = ["numpy", "triton-interpret", "spatial", gpu_backend()]


@td.tile_kernel
def quantize(x, dtype="float8_e4m3fn"):
    m, n = x.shape
    out = td.empty((m, n), dtype=dtype)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = x[tm, tn].astype(dtype)
    return out


@td.tile_kernel
def dequantize(x):
    m, n = x.shape
    out = td.empty((m, n), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = x[tm, tn]  # cast on store
    return out


@td.tile_kernel
def fp8_matmul(a, b):
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=td.float32)
        for tk in td.tile(k):
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc
    return out


# Hopper's fp8 wgmma adds products in a narrower accumulator than float32 (Triton's default on
# sm_90, max_num_imprecise_acc=2**30): an H100 gave relative errors 4.9e-5 (e5m2) and 6.2e-5
# (e4m3fn) at K = 45, against float32's tolerance of 2e-5; this factor allows 5e-4.
FP8_WGMMA = 25.0

# Inputs and what a GPU's cvt.rn.satfinite gives: round to nearest even, magnitudes past the
# largest finite value (448, 57344) and infinities saturate, NaN stays NaN.
EDGES = np.array([0.1, 447.0, 464.0, 465.0, 1e6, np.inf, -np.inf, np.nan, 2.0**-10, -3e9,
                  2.0**-9 * 1.5, 57344.0, 61440.0, -1e30, 0.0, -0.0], np.float32)
EXPECTED = {
    E4M3: [0.1015625, 448, 448, 448, 448, 448, -448, np.nan, 0.0, -448,
           2.0**-9 * 2, 448, 448, -448, 0.0, -0.0],
    E5M2: [0.09375, 448, 448, 448, 57344, 57344, -57344, np.nan, 2.0**-10, -57344,
           2.0**-9 * 1.5, 57344, 57344, -57344, 0.0, -0.0],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3fn", "e5m2"])
def test_casts_saturate_as_a_gpu(backend: str, dtype: np.dtype) -> None:
    x = np.tile(EDGES, (3, 1))  # 3 x 16, and ragged under most configs
    got = run_on(quantize, (x, dtype.name), backend)
    assert got.dtype == dtype
    expected = np.array(EXPECTED[dtype], np.float32)
    np.testing.assert_array_equal(got[1].astype(np.float32), expected)
    assert np.array_equal(np.signbit(got[0].astype(np.float32)), np.signbit(expected))
    # (torch's own conversion is no reference: torch 2.13 on the CPU saturates e4m3fn, while
    # torch 2.11 gave NaN past 464, on an H100 of 2026-11-26; that run's "triton-gpu" case
    # matched EXPECTED bit for bit)
    np.testing.assert_array_equal(got.view(np.uint8), np.tile(got[1].view(np.uint8), (3, 1)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_casts_from_every_dtype_go_through_float32(backend: str) -> None:
    """float64 rounds to float32 first (as the generated Triton does); integers, 16-bit floats
    and the other fp8 type are exact in float32; fp8 back to float32 is exact."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((7, 37)) * 100).astype(np.float32)
    x[0, :3] = [1e5, -1e5, np.nan]
    for src in (np.float64, np.float16, ml_dtypes.bfloat16, np.int32, E5M2):
        with np.errstate(all="ignore"):  # float16 overflows to inf, NaN to int32 is garbage
            xs = x.astype(src) if src != E5M2 else np.clip(x, -57344, 57344).astype(E5M2)
        for _, got in under_configs(quantize, (xs, "float8_e4m3fn"), backend, samples=1):
            expected = np.clip(xs.astype(np.float32), -448, 448).astype(E4M3)
            np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))
    back = run_on(dequantize, (x.astype(E4M3),), backend)
    np.testing.assert_array_equal(back, x.astype(E4M3).astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3fn", "e5m2"])
def test_fp8_matmul_accumulates_in_float32(backend: str, dtype: np.dtype) -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((37, 45)).astype(dtype)
    b = rng.standard_normal((45, 1)).astype(dtype) if backend == "spatial" else \
        rng.standard_normal((45, 29)).astype(dtype)
    ref = a.astype(np.float64) @ b.astype(np.float64)  # fp8 products are exact in float64
    for config, out in under_configs(fp8_matmul, (a, b), backend):
        assert out.dtype == np.float32, config
        td.testing.assert_close(out, ref, np.float32, factor=FP8_WGMMA if backend == "triton-gpu"
                                else 1.0)


@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3fn", "e5m2"])
def test_fp8_matmul_is_an_fp8_wgmma_on_sm90(dtype: np.dtype) -> None:
    pytest.importorskip("triton")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((256, 128)).astype(dtype)
    b = rng.standard_normal((128, 256)).astype(dtype)
    ptx = fp8_matmul.source(a, b, target="ptx", config=td.Config((128, 128, 64), 4, 3),
                            arch="sm_90")
    kind = "e4m3" if dtype == E4M3 else "e5m2"
    assert re.search(rf"wgmma\.mma_async\S*\.f32\.{kind}\.{kind}", ptx), \
        sorted(set(re.findall(r"wgmma\S*", ptx)))


@td.tile_kernel
def fp8_short_k(a, b):
    """Helion's fp8 attention at head_dim 16: one K of 16 fp8 lanes, under wgmma's 32."""
    out = td.empty((a.shape[0], b.shape[1]), dtype=td.float32)
    for tm, tn in td.tile(a.shape[0], b.shape[1]):
        out[tm, tn] = a[tm, :] @ b[:, tn]
    return out


@pytest.mark.parametrize("backend", ["triton-interpret", gpu_backend()])
def test_fp8_dots_take_k_of_at_least_32(backend: str) -> None:
    """sm_90's fp8 wgmma needs K >= 32: a K of 16 is widened with zero lanes (its Triton
    compile failed), and a K loop's block starts at 32."""
    pytest.importorskip("triton")
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((40, 16)).astype(E4M3), rng.standard_normal((16, 24)).astype(E4M3)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    td.testing.assert_close(run_on(fp8_short_k, (a, b), backend), ref, np.float32,
                            factor=FP8_WGMMA if backend == "triton-gpu" else 1.0)
    (report,) = fp8_short_k.compile(a, b, arch="sm_90")
    assert report.problem is None
    space = fp8_matmul.config_space(a, b, backend="triton-interpret")
    k_blocks = {c.block_sizes[2] for c in space.sample(40, seed=0)}
    assert min(k_blocks) >= 32 and space.default().block_sizes[2] >= 32


def test_block_scaled_matmul_on_a_spatial_preset_with_enough_dma_channels() -> None:
    """examples/block_scaled_matmul.py streams five tensors; the presets' PEs have 4 DMA
    channels (tests/backends/spatial/test_spatial.py DMA_BOUND), so this runs it on generic-8x8 with 8."""
    from lowering.backends.spatial.arch import PRESETS, Arch
    mod = example("block_scaled_matmul")
    arch = Arch.from_dict(dict(PRESETS["generic-8x8"]().to_dict(), dma_channels=8))
    args = mod.make_inputs(np.random.default_rng(6), {"m": 37, "k": 45, "n": 29}, np.float32)
    ref = mod.reference(*args)
    space = mod.block_scaled_matmul.config_space(*args, backend="spatial", arch=arch)
    for config in (space.default(), *space.sample(1, seed=0)):
        out = mod.block_scaled_matmul.run(*args, backend="spatial", arch=arch, config=config)
        td.testing.assert_close(out, ref, np.float32)


def test_cast_is_a_saturating_cvt_on_sm90() -> None:
    pytest.importorskip("triton")
    x = np.ones((64, 64), np.float32)
    ptx = quantize.source(x, "float8_e4m3fn", target="ptx", arch="sm_90")
    assert "cvt.rn.satfinite.e4m3x2.f32" in ptx
    src = quantize.source(x, "float8_e5m2", target="triton")
    assert ".to(tl.float8e5)" in src


def test_arithmetic_on_fp8_tiles_is_an_error() -> None:
    @td.tile_kernel
    def double(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = x[t] * 2.0
        return out

    with pytest.raises(td.DTypeError) as e:
        double(np.ones(5, E4M3))
    assert "out[t] = x[t] * 2.0" in str(e.value) and "x.astype(td.float32)" in str(e.value)
    assert "float8_e4m3fn" in str(e.value)


def test_fp8_outputs_have_tolerances() -> None:
    """One rounding to fp8 passes `assert_close` (0.027 in e4m3, 0.05 in e5m2 here); values
    scaled by 1.5 do not."""
    x = np.random.default_rng(7).standard_normal(1000)
    for dtype in (E4M3, E5M2):
        td.testing.assert_close(x.astype(dtype), x)
        with pytest.raises(AssertionError, match="exceeds"):
            td.testing.assert_close((1.5 * x).astype(dtype), x)


@td.tile_kernel
def fp8_cache(key, cache_u8, slots):
    """vLLM's fp8 KV cache, held as uint8 and viewed as float8 (`key_cache.view(
    current_platform.fp8_dtype())`): stored through a pointer, read back by tiles."""
    cache = cache_u8.view(td.float8_e4m3fn)
    n, d = key.shape
    for i in td.grid(n):
        offs = td.arange(0, 64)
        k = td.load(key + i * d + offs, mask=offs < d)
        td.store(cache + td.load(slots + i) * d + offs, k.to(td.float8_e4m3fn), mask=offs < d)
    back = td.empty(key.shape, td.float32)
    for i in td.grid(n):
        back[i, :] = cache[slots[i], :].to(td.float32)
    return back


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_uint8_tensor_viewed_as_fp8(backend: str) -> None:
    rng = np.random.default_rng(12)
    key = rng.standard_normal((5, 40)).astype(np.float32)
    slots = np.array([3, 0, 6, 2, 5], np.int64)
    cache = np.zeros((8, 40), np.uint8)
    if backend == "spatial":
        with pytest.raises(td.BackendError, match="read as another dtype"):
            fp8_cache.run(key, cache, slots, backend=backend)
        return
    back = run_on(fp8_cache, (key, cache, slots), backend)
    f8 = key.astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(cache[slots], f8.view(np.uint8))  # the bits, in place
    np.testing.assert_array_equal(back, f8.astype(np.float32))

    @td.tile_kernel
    def wider(x):
        y = x.view(td.float16)
        for t in td.tile(x.shape[0]):
            y[t] = y[t] * 2

    with pytest.raises(td.DTypeError, match="a view reads the same elements as another dtype"):
        wider(cache[0])


@td.tile_kernel
def mx_scales(x, old_scales, block: td.constexpr):
    """torchao's MX scales: each block's floor(log2(amax)) built as uint8 bits and viewed as
    float8_e8m0fnu; an e8m0 argument read through its bits (`s.view(torch.uint8)`) and by value
    (`s.to(torch.float32)`), and `new_zeros` of it (torch's 0 bits)."""
    import torch
    m, n = x.shape
    bits = torch.empty((m, n // block), dtype=torch.uint8)
    for i, j in td.grid(m, n // block):
        amax = td.max(td.abs(x[i, j * block + td.arange(0, block)]))
        e = td.floor(td.log2(amax)).to(td.int32) + 127
        bits[i, j] = td.clamp(e, 0, 254).to(td.uint8)
    raw = old_scales.view(torch.uint8)
    value = old_scales.to(torch.float32)
    return bits.view(torch.float8_e8m0fnu), raw, value, old_scales.new_zeros(3)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_e8m0_scales_are_bits_and_values(backend: str) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(14)
    x = (rng.standard_normal((3, 96)) * 50).astype(np.float32)
    old = np.array([0, 1, 100, 127, 128, 254, 255], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    on = (lambda a: torch.from_numpy(a.view(np.uint8)).view(torch.float8_e8m0fnu))
    x_t, old_t = torch.from_numpy(x), on(old)
    if backend == "triton-gpu":
        scales, raw, value, zeros = mx_scales(x_t.cuda(), old_t.cuda(), 32)
    else:
        scales, raw, value, zeros = mx_scales.run(x_t, old_t, 32, backend=backend)
    assert scales.dtype == torch.float8_e8m0fnu and zeros.dtype == torch.float8_e8m0fnu
    amax = np.abs(x.astype(np.float64)).reshape(3, 3, 32).max(-1)
    np.testing.assert_array_equal(scales.cpu().view(torch.uint8).numpy(),
                                  np.floor(np.log2(amax)) + 127)
    np.testing.assert_array_equal(raw.cpu().numpy(), old.view(np.uint8))
    want = np.where(old.view(np.uint8) == 255, np.nan, 2.0 ** (old.view(np.uint8) - 127.0))
    np.testing.assert_array_equal(value.cpu().numpy(), want.astype(np.float32))  # (2**-127 too)
    np.testing.assert_array_equal(zeros.cpu().view(torch.uint8).numpy(), [0, 0, 0])


def test_no_conversion_to_e8m0() -> None:
    @td.tile_kernel
    def rounded(x):
        out = td.empty(x.shape, td.float8_e8m0fnu)
        for t in td.tile(x.shape[0]):
            out[t] = x[t].to(td.float8_e8m0fnu)
        return out

    with pytest.raises(td.DTypeError, match=r"a conversion from float32 to float8_e8m0fnu: its "
                       r"rounding is not defined") as info:
        rounded.run(np.ones(4, np.float32), backend="numpy")
    assert "test_fp8.py" in str(info.value) and "view it" in str(info.value)
