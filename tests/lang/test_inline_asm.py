"""`td.inline_asm_elementwise` (Triton's `tl.inline_asm_elementwise`): the assembly passes to the
GPU as written, and the NumPy backend and Triton's interpreter run its PTX
(lowering/backends/numpy/ptx.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from lowering.backends.numpy import ptx
from support import gpu_backend, run_on
from tiledsl.testing import assert_close

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")
torch = pytest.importorskip("torch")

BACKENDS = ["numpy", "triton-interpret", "spatial", gpu_backend()]

# flash-linear-attention's softplus, one register (fla/ops/utils/softplus.py)
SOFTPLUS = " ".join("""{
    .reg .pred p;
    setp.gt.f32  p, $1, 20.;
    @p  mov.f32  $0, $1;
    @!p mul.f32            $0, $1, 1.4426950408889634;
    @!p ex2.approx.ftz.f32 $0, $0;
    @!p add.f32            $0, $0, 1.0;
    @!p lg2.approx.ftz.f32 $0, $0;
    @!p mul.f32            $0, $0, 0.6931471805599453;
}""".split("\n"))

# Triton's docstring example: four uint8 in one register, two outputs, pack=4
BYTES_AND_MAX = """
{
    .reg .b8 tmp<4>;
    mov.b32 {tmp0, tmp1, tmp2, tmp3}, $8;
    cvt.u32.u8 $0, tmp0;
    cvt.u32.u8 $1, tmp1;
    cvt.u32.u8 $2, tmp2;
    cvt.u32.u8 $3, tmp3;
}
cvt.rn.f32.s32 $4, $0;
cvt.rn.f32.s32 $5, $1;
cvt.rn.f32.s32 $6, $2;
cvt.rn.f32.s32 $7, $3;
max.f32 $4, $4, $9;
max.f32 $5, $5, $10;
max.f32 $6, $6, $11;
max.f32 $7, $7, $12;
"""


@triton.jit
def _tanh_approx(x):  # mamba3's helpers (mamba_ssm/ops/triton/mamba3/utils.py)
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", constraints="=f,f", args=[x],
                                     dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _softplus(x):
    return tl.inline_asm_elementwise(asm=SOFTPLUS, constraints="=r,r", pack=1, args=[x],
                                     dtype=tl.float32, is_pure=True)


@triton.jit
def _asm_kernel(x_ptr, a_ptr, t_ptr, s_ptr, c_ptr, d_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    a = tl.load(a_ptr + offs, mask=offs < n)
    tl.store(t_ptr + offs, _tanh_approx(x), mask=offs < n)
    tl.store(s_ptr + offs, _softplus(x), mask=offs < n)
    c, d = tl.inline_asm_elementwise(BYTES_AND_MAX, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r",
                                     [a, x], dtype=(tl.int32, tl.float32), is_pure=True, pack=4)
    tl.store(c_ptr + offs, c, mask=offs < n)
    tl.store(d_ptr + offs, d, mask=offs < n)


@td.tile_kernel
def asm_ops(x, a):
    t, s, d = (torch.empty_like(x) for _ in range(3))
    c = torch.empty(x.shape, dtype=torch.int32)
    _asm_kernel[(triton.cdiv(x.numel(), 16),)](x, a, t, s, c, d, x.numel(), BLOCK=16)
    return t, s, c, d


@pytest.mark.parametrize("backend", BACKENDS)
def test_mamba_and_fla_assembly_runs_on_the_cpu(backend: str) -> None:
    rng = np.random.default_rng(81)
    x = (rng.standard_normal(37) * 12).astype(np.float32)  # (softplus' both branches; ragged
    a = rng.integers(0, 256, 37).astype(np.uint8)  # against pack=4)
    t, s, c, d = run_on(asm_ops, (x, a), backend)
    wide = x.astype(np.float64)
    assert_close(t, np.tanh(wide), np.float32)
    assert_close(s, np.where(wide > 20, wide, np.log1p(np.exp(wide))), np.float32, factor=4)
    np.testing.assert_array_equal(c, a.astype(np.int32))
    np.testing.assert_array_equal(d, np.maximum(a.astype(np.float32), x))


def test_the_assembly_reaches_the_gpu_as_written() -> None:
    x = np.ones(37, np.float32)
    source = asm_ops.source(x, np.ones(37, np.uint8), target="triton")
    assert "tl.inline_asm_elementwise('tanh.approx.f32 $0, $1;', '=f,f'" in source
    assert "pack=4" in source


def test_ptx_the_cpu_runs() -> None:
    """The instructions beyond the kernels above: packed pairs, conversions with rounding,
    unordered compares, shifts and wide products."""
    f32 = np.array([1.5, -2.5, np.nan, 3e38], np.float32)
    pair = ("{ .reg .b64 ra, rb, rc; mov.b64 ra, { $2, $3 }; mov.b64 rb, { $4, $5 }; "
            "mul.f32x2 rc, ra, rb; mov.b64 { $0, $1 }, rc; }")  # Helion's Blackwell attention
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(ptx.run(pair, [f32, f32], [np.float32], 2)[0], f32 * f32)
    rounded = ptx.run("cvt.rni.s32.f32 $0, $1;", [f32], [np.int32], 1)[0]
    np.testing.assert_array_equal(rounded, [2, -2, 0, 2**31 - 1])  # (to even; NaN 0; clamped)
    unordered = "{ .reg .pred p; setp.neu.f32 p, $1, $1; selp.s32 $0, 1, 0, p; }"
    np.testing.assert_array_equal(ptx.run(unordered, [f32], [np.int32], 1)[0], [0, 0, 1, 0])
    ints = np.array([-8, 3, 1 << 30], np.int32)
    np.testing.assert_array_equal(ptx.run("shr.s32 $0, $1, 2;", [ints], [np.int32], 1)[0],
                                  ints >> 2)
    wide = ptx.run("mul.wide.s32 $0, $1, $1;", [ints], [np.int64], 1)[0]
    np.testing.assert_array_equal(wide, ints.astype(np.int64) ** 2)
    e4m3 = np.array([0.5, -2.0, 448.0], ml_dtypes.float8_e4m3fn)
    decode = ("{ .reg .b16 sc, lo, hi; .reg .b32 h2; mov.b32 {sc, _}, $1; "  # Helion's nvfp4
              "cvt.rn.f16x2.e4m3x2 h2, sc; mov.b32 {lo, hi}, h2; cvt.f32.f16 $0, lo; }")
    np.testing.assert_array_equal(ptx.run(decode, [e4m3.view(np.uint8)], [np.float32], 1)[0],
                                  e4m3.astype(np.float32))
    x = np.array([1.0, 3.0, 0.25, 0.3, 1e-39, 6e-39, 0.0, 2.0**127, 2.0**127 * 1.5, np.inf,
                  np.nan, -3.0, 5e-45], np.float32)  # torchao's MX scales (sm_100)
    scale = ptx.run("cvt.rp.ue8m0x2.f32 $0, 0.0, $1;", [x], [np.uint16], 1)[0]
    np.testing.assert_array_equal(scale, _f32_to_e8m0_rceil(x))  # torchao's software path
    both = ptx.run("cvt.rz.satfinite.ue8m0x2.f32 $0, $1, $1;", [x], [np.uint16], 1)[0]
    np.testing.assert_array_equal(both >> 8, both & 0xFF)
    np.testing.assert_array_equal(both[:9] & 0xFF, [127, 128, 125, 125, 0, 0, 0, 254, 254])


def _f32_to_e8m0_rceil(x: np.ndarray) -> np.ndarray:
    """torchao's `_triton_f32_to_e8m0_rceil`, in NumPy."""
    bits = x.view(np.int32)
    exponent, mantissa = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    up = np.where(exponent == 0, mantissa > 0x400000, mantissa != 0)
    return np.where(exponent != 0xFF, exponent + up, 0xFF)


@td.tile_kernel
def one_asm(x, asm: td.constexpr, constraints: td.constexpr):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.inline_asm_elementwise(asm, constraints, [x[t]], td.float32)
    return out


def test_assembly_errors_name_the_line() -> None:
    x = np.ones(8, np.float32)
    with pytest.raises(td.DTypeError, match="name 1 output and 2 input registers") as e:
        one_asm(x, "mov.b32 $0, $1;", "=r,r,r")
    assert e.value.loc.source_line().startswith("out[t] = td.inline_asm_elementwise")
    with pytest.raises(td.BackendError, match="'brev.b32' is not an instruction") as e:
        one_asm(x, "brev.b32 $0, $1;", "=r,r")
    assert e.value.loc is not None and "Triton backend passes any" in e.value.hint
