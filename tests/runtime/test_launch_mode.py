"""`with td.triton_launches():` a library's Triton launches run through tiledsl, its host code
(wrappers, autograd Functions, host math) as it is (tiledsl/runtime/launch_mode.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = triton.language


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


def scale(x, factor):
    """A wrapper as libraries write it: a grid function closing over this call's size."""
    out = torch.empty_like(x)
    n = x.numel()
    _scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, factor, BLOCK=64)
    return out


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return scale(x, factor)

    @staticmethod
    def backward(ctx, grad):
        return scale(grad, ctx.factor), None


def test_host_code_and_autograd_run_as_they_are() -> None:
    """Host math and views after the apply (TritonBench's fast_rope_embedding transposes it;
    fast_ce_loss divides its sum), and the backward's launches, through tiledsl."""
    gen = torch.Generator().manual_seed(0)
    for shape in ((3, 37), (5, 200)):  # (a grid function per size: a launch kernel each)
        x = torch.randn(*shape, generator=gen, requires_grad=True)
        with td.triton_launches():
            y = Scale.apply(x, 1.5).transpose(0, 1) / 4
            (y * y).sum().backward()
        x64 = x.detach().double().requires_grad_()
        want = (x64 * 1.5).transpose(0, 1) / 4
        (want * want).sum().backward()
        torch.testing.assert_close(y.detach().double(), want.detach(), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-6, atol=1e-6)


@triton.jit
def _sum_into_first(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.program_id(0) * 0, tl.sum(tl.load(x_ptr + offs, mask=offs < n,
                                                            other=0.0)))


def test_a_launch_is_checked_as_tiledsl_checks_kernels() -> None:
    """A race Triton would run silently, and an access past a tensor, are tiledsl's errors;
    outside the block, launches are Triton's again."""
    x = torch.randn(100)
    out = torch.empty(1)
    with td.triton_launches(), pytest.raises(td.TraceError, match="same elements"):
        _sum_into_first[(4,)](x, out, 100, BLOCK=32)  # every program stores to element 0
    with td.triton_launches(), pytest.raises(td.OutOfBoundsError, match="store to 'out_ptr'"):
        _scale_kernel[(1,)](x, out, 100, 2.0, BLOCK=64)  # out holds 1 element, n says 100
    from triton.runtime.jit import KernelInterface
    assert "launch_mode" not in KernelInterface.__getitem__.__code__.co_filename
    y = torch.randn(100, requires_grad=True)
    y0 = y.detach().clone()
    with td.triton_launches():  # (as Triton writes it: fast_ce_loss's backward writes the
        _scale_kernel[(2,)](y, y, 100, 2.0, BLOCK=64)  # logits' gradient over them)
    torch.testing.assert_close(y.detach(), 2 * y0)


@triton.jit
def _column_sums(x_ptr, out_ptr, n_rows, stride, BLOCK: tl.constexpr):
    """TritonBench's iv_dependent_matmul: the pointer a loop carries, made again from the
    loop's counter (int32 in Triton: its bound is a cdiv of int32 arguments)."""
    offs = tl.arange(0, BLOCK)
    ptrs = x_ptr + offs
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in range(0, tl.cdiv(n_rows, 1)):
        acc += tl.load(ptrs, mask=k < n_rows)
        ptrs = x_ptr + (k + 1) * stride + offs
    tl.store(out_ptr + offs, acc)


def test_int_arguments_are_typed_as_triton_types_them() -> None:
    """A launch's ints are int32 where they fit (a tile kernel's int argument is an int64, and
    the loop-carried pointer would change dtype: TritonBench's iv_dependent_matmul)."""
    x = torch.randn(7, 16)
    out = torch.empty(16)
    with td.triton_launches():
        _column_sums[(1,)](x, out, 7, x.stride(0), BLOCK=16)
    torch.testing.assert_close(out.double(), x.double().sum(0), rtol=1e-6, atol=1e-6)


@triton.jit
def _rows_doubled(X, Y, M, N, rows_per_program, BLOCK_N: tl.constexpr):
    """flash-attn's and Mamba's layer-norm backward: each program a block of rows, its pointers
    bumped by a loop whose bounds are int arguments."""
    row_start = tl.program_id(0) * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, M)
    cols = tl.arange(0, BLOCK_N)
    X += row_start * N
    Y += row_start * N
    for _ in range(row_start, row_end):
        tl.store(Y + cols, 2 * tl.load(X + cols, mask=cols < N, other=0.0), mask=cols < N)
        X += N
        Y += N


def test_a_loop_whose_bounds_are_int_arguments_steps_apart() -> None:
    """The race check traces again with the loop's bound arguments as constants (a launch's
    ints are runtime arguments; a wrapper's are constants where it computes them)."""
    x = torch.randn(13, 20)
    y = torch.empty_like(x)
    with td.triton_launches():
        _rows_doubled[(4,)](x, y, 13, 20, 4, BLOCK_N=32)
    torch.testing.assert_close(y, 2 * x)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 128})],
                 key=["n"])
@triton.jit
def _tuned_scale(x_ptr, out_ptr, block_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * factor, mask=offs < n)
    if tl.program_id(0) == 0:
        tl.store(block_ptr, BLOCK)


def test_an_autotuned_kernel_and_a_bad_grid() -> None:
    """The autotuner's `best_config` after the launch is the config it ran (mamba's SSD
    backward reads `kernel.best_config.kwargs["BLOCK_SIZE"]` to sum the blocks it wrote)."""
    x = torch.randn(300)
    out, block = torch.empty_like(x), torch.zeros(1, dtype=torch.int32)
    with td.triton_launches():
        _tuned_scale[lambda meta: (triton.cdiv(300, meta["BLOCK"]),)](x, out, block, 300, -2.0)
    np.testing.assert_array_equal(out.numpy(), -2.0 * x.numpy())
    assert _tuned_scale.best_config.kwargs["BLOCK"] == int(block)
    with td.triton_launches(), pytest.raises(td.ArgumentError, match="neither a constant"):
        _scale_kernel[[np.ones(2)]](x, out, 300, 2.0, BLOCK=64)
