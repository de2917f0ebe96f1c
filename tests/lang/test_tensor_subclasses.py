"""torch tensor subclasses built in host code around a kernel's tensors and returned, as
torchao's float8 wrappers return a `Float8TrainingTensor(data, scale, orig_dtype=x.dtype)`
(tiledsl/frontend/tensor_subclasses.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = triton.language


class Scaled(torch.Tensor):
    """torchao's Float8TrainingTensor shape: data and scale, the original dtype in its ctx."""

    @staticmethod
    def __new__(cls, data, scale, orig_dtype, copy_scale=False):
        self = torch.Tensor._make_wrapper_subclass(cls, data.size(), strides=data.stride(),
                                                   dtype=orig_dtype, device=data.device)
        self._data, self._scale, self._orig_dtype = data, scale.clone() if copy_scale else \
            scale, orig_dtype
        return self

    def __init__(self, data, scale, orig_dtype, copy_scale=False):
        pass

    def __tensor_flatten__(self):
        return ["_data", "_scale"], {"orig_dtype": self._orig_dtype}

    @staticmethod
    def __tensor_unflatten__(inner, ctx, outer_size, outer_stride):
        return Scaled(inner["_data"], inner["_scale"], ctx["orig_dtype"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"Scaled: {func}")

    __torch_function__ = torch._C._disabled_torch_function_impl

    def dequantize(self):
        return self._data.to(self._orig_dtype) * self._scale


@triton.jit
def _quantize(X, Y, S, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0)
    s = tl.max(tl.abs(x), axis=0) / 127.0
    tl.store(S, s)
    tl.store(Y + offs, (x / s).to(tl.int8), mask=offs < n)


@td.tile_kernel
def quantize(x, copy_scale: bool = False):
    y = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    s = torch.empty((), dtype=torch.float32, device=x.device)
    _quantize[(1,)](x, y, s, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    out = Scaled(y, s, orig_dtype=x.dtype, copy_scale=copy_scale)
    assert out._data is y  # (its inner tensors are the kernel's, in host code)
    return out, x.numel()


def test_a_subclass_built_in_host_code_is_returned_rebuilt() -> None:
    x = torch.randn(37, generator=torch.Generator().manual_seed(0))
    scale = x.abs().max() / 127  # (float32 math, as the kernel's: x / s of the max is 126.99)
    want = (x / scale).to(torch.int8)  # (toward zero, as `.to(tl.int8)`)
    for got, n in (quantize(x), quantize.run(x.numpy(), backend="triton-interpret")):
        assert type(got) is Scaled and got.dtype == torch.float32 and n == 37
        assert got._data.dtype == torch.int8 and torch.equal(got._data, want)
        np.testing.assert_allclose(float(got._scale), float(scale), rtol=1e-6)
    first = quantize(x)[0]
    quantize(2 * x)  # (a later call makes new tensors)
    assert torch.equal(first._data, want)
    with pytest.raises(td.TraceError, match="only this process can rebuild"):
        td.torch_op(quantize, name="tiledsl_tests::quantize_subclass")(x)
    with pytest.raises(td.TraceError, match="inner tensor '_scale' is none of the kernel's"):
        quantize(x, True)
