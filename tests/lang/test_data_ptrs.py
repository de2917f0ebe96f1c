"""Host code's `x.data_ptr()` and the objects that carry one to a Triton launch
(tiledsl/frontend/data_ptrs.py), `torch._prims_common.elementwise_dtypes` on kernel tensors
(tiledsl/lang/type_promotion.py) and a block pointer's `.type.element_ty`: FlagGems'
pointwise operators, whose generated wrappers pass `StridedBuffer`s (a flip is one that starts
at the last element with negative strides) to kernels that read through block pointers."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from tests.support import gpu_backend, run_on
from tiledsl.testing import assert_close

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = triton.language
prims = pytest.importorskip("torch._prims_common")


class StridedBuffer:
    """FlagGems' utils/tensor_wrapper.py StridedBuffer, the parts its wrappers use."""

    def __init__(self, base, shape=None, strides=None, dtype=None, offset=0):
        self._base = base
        self.dtype = dtype or base.dtype
        self.offset = offset
        if offset == 0:
            self._data_ptr = self._base.data_ptr()
        else:
            self._data_ptr = self._base.data_ptr() + self.dtype.itemsize * offset
        self.shape = tuple(shape if shape is not None else self._base.shape)
        self._strides = tuple(strides if strides is not None else self._base.stride())
        self.ndim = len(self.shape)

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._data_ptr


@triton.jit
def _mul_add_rank_2(in0_ptr, in1_ptr, out0_ptr, in0_stride0, in0_stride1, out0_stride0,
                    out0_stride1, s0, s1, tile_size0: tl.constexpr, tile_size1: tl.constexpr):
    """FlagGems' generated rank-2 pointwise kernel (block pointers), computing 2 * x + y."""
    pid = tl.program_id(0)
    num_tiles1 = tl.cdiv(s1, tile_size1)
    offset0 = ((pid // num_tiles1) * tile_size0).to(tl.int32)
    offset1 = ((pid % num_tiles1) * tile_size1).to(tl.int32)
    in0_bptr = tl.make_block_ptr(in0_ptr, (s0, s1), (in0_stride0, in0_stride1),
                                 (offset0, offset1), (tile_size0, tile_size1), order=(1, 0))
    in0 = tl.load(in0_bptr, boundary_check=(1, 0)).to(in0_ptr.type.element_ty)
    in1 = tl.load(in1_ptr)
    out0 = 2 * in0 + in1
    out0_bptr = tl.make_block_ptr(out0_ptr, (s0, s1), (out0_stride0, out0_stride1),
                                  (offset0, offset1), (tile_size0, tile_size1), order=(1, 0))
    tl.store(out0_bptr, out0.to(out0_bptr.type.element_ty), boundary_check=(1, 0))


@td.tile_kernel
def flip_mul_add(x, y):
    """2 * flip(x, dims=(0, 1)) + y[0, 0], in the dtype torch promotes x and y to."""
    _, result = prims.elementwise_dtypes(
        x, y, type_promotion_kind=prims.ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    out = torch.empty(x.shape, dtype=result, device=x.device)
    m, n = x.shape
    strides = x.stride()
    last = sum((s - 1) * st for s, st in zip(x.shape, strides))
    flipped = StridedBuffer(x, x.shape, tuple(-st for st in strides), offset=last)
    grid = (triton.cdiv(m, 8) * triton.cdiv(n, 16),)
    _mul_add_rank_2[grid](flipped, StridedBuffer(y), out, *flipped.stride(), *out.stride(), m, n,
                          tile_size0=8, tile_size1=16)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_strided_buffer_flip_with_promotion(backend: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((13, 37)).astype(np.float16)
    y = rng.standard_normal((5, 3)).astype(np.float32)
    got = run_on(flip_mul_add, (x, y), backend)
    assert np.asarray(got).dtype == np.float32  # fp16 with fp32 promotes to fp32, as torch's
    want = 2 * x.astype(np.float64)[::-1, ::-1] + y.astype(np.float64)[0, 0]
    assert_close(got, want, dtype="float32")


@td.tile_kernel
def _promoted(x, i, kind):
    compute, result = prims.elementwise_dtypes(
        x, i, 1.5, type_promotion_kind=getattr(prims.ELEMENTWISE_TYPE_PROMOTION_KIND, kind))
    out = torch.empty(x.shape, dtype=result, device=x.device)
    for t in td.tile(x.shape[0]):
        out[t] = x[t].to(compute) + i[t].to(compute)
    return out


@pytest.mark.parametrize("kind,dtypes", [("DEFAULT", ("float16", "float16")),
                                         ("INT_TO_FLOAT", ("int32", "float32")),
                                         ("NO_OPMATH", ("bfloat16", "bfloat16"))])
def test_elementwise_dtypes_are_torchs(kind: str, dtypes: tuple) -> None:
    """Each promotion kind gives what torch gives for tensors of those dtypes (a Python float
    among the arguments: an int tensor promotes to float32)."""
    import ml_dtypes
    rng = np.random.default_rng(0)
    dtype = ml_dtypes.bfloat16 if dtypes[0] == "bfloat16" else np.dtype(dtypes[0])
    x = (rng.standard_normal(9) * 4).astype(dtype)
    i = rng.integers(-5, 5, 9).astype(np.int32) if dtypes[0] == "int32" else \
        rng.standard_normal(9).astype(dtype)
    got = _promoted.run(x, i, kind, backend="numpy")
    as_torch = [torch.from_numpy(a.astype(np.float32)).to(getattr(torch, dtypes[0]))
                for a in (x, i)]
    _, want = prims.elementwise_dtypes(
        *as_torch, 1.5, type_promotion_kind=getattr(prims.ELEMENTWISE_TYPE_PROMOTION_KIND, kind))
    assert str(got.dtype) == str(want).removeprefix("torch.") == dtypes[1]
    assert_close(got, x.astype(np.float64) + i.astype(np.float64), dtype=dtypes[1])


@td.tile_kernel
def _addresses(x, y):
    a, b = x.data_ptr(), x[1:].data_ptr()
    assert a == x.data_ptr() and a != y.data_ptr() and a != b
    assert b - a == x.shape[1] * x.element_size() and (a + 4) % 16 == 4
    out = torch.empty_like(y)
    for t in td.tile(y.shape[0]):
        out[t] = y[t] + (b - a)
    return out


def test_data_ptr_arithmetic() -> None:
    """Addresses compare, subtract within a tensor and answer alignment, known while tracing."""
    x = np.ones((3, 5), np.float32)
    y = np.arange(4, dtype=np.float32)
    assert_close(_addresses.run(x, y, backend="numpy"), y + 20.0, dtype="float32")


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


@td.tile_kernel
def _reinterpret(x, as_dtype, offset):
    out = torch.empty(x.shape, dtype=torch.int16, device=x.device)
    _copy[(1,)](StridedBuffer(x, dtype=as_dtype, offset=offset), out, x.numel(), BLOCK=8)
    return out


@td.tile_kernel
def _address_as_int(x):
    return int(x.data_ptr())


def test_data_ptr_misuse() -> None:
    """Bits read as another dtype of the same size work (torch.float16 as int16); another size,
    and an address as a number, are errors naming the argument or the address."""
    x = np.array([1.0, -2.0, 0.5], np.float16)
    got = _reinterpret.run(x, torch.int16, 0, backend="numpy")
    np.testing.assert_array_equal(got, x.view(np.int16))
    with pytest.raises(td.TraceError, match=r"argument 'src' \(StridedBuffer\) reads 'x' "
                       r"\(float16\) as int32"):
        _reinterpret.run(x, torch.int32, 0, backend="numpy")
    with pytest.raises(td.TraceError, match="as a number: a kernel tensor's address is not"):
        _address_as_int.run(x, backend="numpy")


@triton.jit
def _kernel_f16_to_f8(Y, X, N, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < N
    x = tl.load(X + offs, mask=mask)
    tl.store(Y + offs, x, mask=mask)


@td.tile_kernel
def f16_to_f8(x, dtypes=tl.float8e5):
    """TritonBench's f8 conversion wrapper, as written: a Triton dtype argument,
    `str(x.device)`, `x.untyped_storage().size()` and `triton.reinterpret(int8 tensor, fp8)`
    (Triton's TensorWrapper: a pointer-like object)."""
    assert x.dtype in [torch.float16, torch.float32]
    assert "cuda" in str(x.device), f"CUDA tensors only but got {x.device}"
    ret = torch.empty_like(x, dtype=torch.int8)
    grid = lambda META: (triton.cdiv(x.numel(), META['BLOCK_SIZE']),)  # noqa: E731
    numel = x.untyped_storage().size() // x.element_size()
    _kernel_f16_to_f8[grid](triton.reinterpret(ret, dtypes), x, numel, BLOCK_SIZE=64)
    return ret


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_reinterpreted_fp8_output_as_written(backend: str) -> None:
    """float16 to float8_e5m2 through the reinterpreted int8 output: torch's bits exactly."""
    x = (np.random.default_rng(5).standard_normal(201) * 20).astype(np.float16)
    for dt, torch_dt in ((tl.float8e5, torch.float8_e5m2), (tl.float8e4nv, torch.float8_e4m3fn)):
        got = run_on(f16_to_f8, (x, dt), backend)
        want = torch.from_numpy(x).to(torch_dt).view(torch.int8).numpy()
        np.testing.assert_array_equal(got, want)
