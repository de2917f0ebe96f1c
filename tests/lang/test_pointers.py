"""Triton's pointer arithmetic (tiledsl/frontend/pointers.py): `x + offsets` in a grid points
into x's flat view; td.load, td.store and the atomics take a pointer as tl.load takes one; a
loop carries pointer bumps. Triton's own tutorial GEMM and FlagGems-style row kernels, as they
are written, against NumPy on ragged shapes on every backend; and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from support import gpu_backend, run_on

import tiledsl as td

BACKENDS = ["numpy", "triton-interpret", "spatial", gpu_backend()]


@td.tile_kernel
def softmax_rows(x, out, n_cols, BLOCK: td.constexpr):
    """FlagGems' row kernels: a row pointer, then `row + cols`; Triton's positional load
    (pointer, mask, other) and store (pointer, value, mask)."""
    for pid in td.grid(x.shape[0]):
        row = x + pid * n_cols
        cols = td.arange(0, BLOCK)
        v = td.load(row + cols, cols < n_cols, -float("inf"))
        e = td.exp(v - td.max(v, axis=0))
        out_ptr = out + pid * n_cols
        out_ptr += 0
        td.store(out_ptr + cols, (e / td.sum(e, axis=0)).to(out_ptr.dtype.element_ty),
                 cols < n_cols)


@td.tile_kernel
def matmul(a, b, c, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
           BM: td.constexpr, BN: td.constexpr, BK: td.constexpr):
    """Triton's tutorial GEMM (03-matrix-multiplication), its pointers bumped each K trip."""
    for pid_m, pid_n in td.grid(td.cdiv(M, BM), td.cdiv(N, BN)):
        offs_am = pid_m * BM + td.arange(0, BM)
        offs_bn = pid_n * BN + td.arange(0, BN)
        offs_k = td.arange(0, BK)
        a_ptrs = a + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
        acc = td.zeros((BM, BN), dtype=td.float32)
        for k in td.range(0, td.cdiv(K, BK)):
            av = td.load(a_ptrs, mask=(offs_am[:, None] < M) & (offs_k[None, :] < K - k * BK),
                         other=0.0)
            bv = td.load(b_ptrs, mask=(offs_k[:, None] < K - k * BK) & (offs_bn[None, :] < N),
                         other=0.0)
            acc = td.dot(av, bv, acc)
            a_ptrs += BK * stride_ak
            b_ptrs += BK * stride_bk
        c_ptrs = c + stride_cm * offs_am[:, None] + stride_cn * offs_bn[None, :]
        td.store(c_ptrs, acc, mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


@td.tile_kernel
def scaled_rows(q, out, n_cols, lim: td.constexpr):
    """Rows read through `q.stride()` (vLLM's `q_ptr + row * stride_qbs`), `lim` lanes each."""
    s0, s1 = q.stride()
    for row in td.grid(q.shape[0]):
        cols = td.arange(0, 64)
        x = td.load(q + row * s0 + cols * s1, mask=cols < lim, other=0.0)
        td.store(out + row * n_cols + cols, x * 2.0, mask=cols < n_cols)


@td.tile_kernel
def histogram(x, hist, n, BLOCK: td.constexpr):
    """An atomic through a pointer tile: tl.atomic_add(hist_ptr + bins, 1, mask=m)."""
    for pid in td.grid(td.cdiv(n, BLOCK)):
        offs = pid * BLOCK + td.arange(0, BLOCK)
        bins = td.load(x + offs, mask=offs < n, other=0)
        td.atomic_add(hist + bins, 1, mask=offs < n)


def _gemm_args(rng: np.random.Generator) -> tuple:
    m, n, k = 37, 29, 45
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return a, b, np.zeros((m, n), np.float32), m, n, k, k, 1, n, 1, n, 1, 16, 16, 16


@pytest.mark.parametrize("backend", BACKENDS)
def test_pointer_kernels_as_triton_writes_them(backend: str) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((7, 45)).astype(np.float32)
    out = np.zeros_like(x)
    run_on(softmax_rows, (x, out, 45, 64), backend)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    td.testing.assert_close(out, e / e.sum(1, keepdims=True), np.float32)
    args = _gemm_args(rng)
    run_on(matmul, args, backend)
    td.testing.assert_close(args[2], args[0].astype(np.float64) @ args[1], np.float32)
    bins = rng.integers(0, 10, 300).astype(np.int32)
    hist = np.zeros(10, np.int32)
    run_on(histogram, (bins, hist, 300, 64), backend)
    np.testing.assert_array_equal(hist, np.bincount(bins, minlength=10))


def test_the_gemm_compiles_to_a_loop_of_pointer_loads_for_sm90() -> None:
    pytest.importorskip("triton")
    args = _gemm_args(np.random.default_rng(8))
    src = matmul.source(*args, target="triton")
    assert "tl.load(a_ptr + a_ptrs" in src and "tl.dot(" in src
    (report,) = matmul.compile(*args, arch="sm_90")
    assert report.spill_bytes == 0


def test_pointer_misuse_is_a_clear_error() -> None:
    @td.tile_kernel
    def scaled_pointer(x):
        for pid in td.grid(1):
            td.store((x + 0) * 2, 1.0)

    @td.tile_kernel
    def float_offset(x):
        for pid in td.grid(1):
            td.store((x + 1) + 0.5, 1.0)

    @td.tile_kernel
    def moved_to_another(x, y):
        for pid in td.grid(1):
            p = x + 0
            for k in td.range(0, x.shape[0]):
                td.store(p, 1.0)
                p = y + k

    @td.tile_kernel
    def past_the_end(x):
        for pid in td.grid(1):
            td.store(x + 3 + td.arange(0, 4), 1.0)

    x = np.zeros(5, np.float32)
    with pytest.raises(td.TraceError, match="takes \\+ and - of integer offsets"):
        scaled_pointer(x)
    with pytest.raises(td.TraceError, match="moves by integer offsets"):
        float_offset(x)
    with pytest.raises(td.TraceError, match="a pointer into 'x' before the loop"):
        moved_to_another(x, x.copy())
    with pytest.raises(td.OutOfBoundsError, match="index 5 is out of bounds"):
        past_the_end(x)
    rng = np.random.default_rng(9)
    args = list(_gemm_args(rng))
    args[1] = args[1][::-1]  # negative strides: no memory a pointer could walk
    with pytest.raises(td.ArgumentError, match="cannot be viewed as shape"):
        matmul(*args)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pointers_into_arguments_laid_out_otherwise(backend: str) -> None:
    """A column-major `b` with its own strides, and vLLM's `q` sliced from a fused qkv: the
    pointers walk the argument's memory, as Triton's do."""
    rng = np.random.default_rng(10)
    a, b, c, m, n, k, *rest = _gemm_args(rng)
    bf = np.asfortranarray(b)
    rest[2:4] = bf.strides[0] // 4, bf.strides[1] // 4  # (1, k)
    qkv = rng.standard_normal((37, 3 * 45)).astype(np.float32)
    out = np.zeros((37, 45), np.float32)
    if backend == "spatial":  # which lays every argument out contiguously in DRAM
        with pytest.raises(td.BackendError, match="other than row-major"):
            matmul.run(a, bf, c, m, n, k, *rest, backend=backend)
        return
    run_on(matmul, (a, bf, c, m, n, k, *rest), backend)
    td.testing.assert_close(c, a.astype(np.float64) @ b, np.float32)
    if backend == "triton-gpu":  # sliced on the device (a copy to it would be contiguous)
        from support import on_cuda
        from lowering.backends.triton.interpret import to_numpy
        q, dev_out = on_cuda(qkv)[:, 45:90], on_cuda(out)
        scaled_rows.run(q, dev_out, 45, 45, backend="triton")
        out = to_numpy(dev_out.cpu())
    else:
        scaled_rows.run(qkv[:, 45:90], out, 45, 45, backend=backend)
    np.testing.assert_array_equal(out, 2 * qkv[:, 45:90])
    if backend == "numpy":  # lanes past a row's 45 reach k's memory: refused, not read
        with pytest.raises(td.OutOfBoundsError, match="offset 45 lies between the elements"):
            scaled_rows.run(qkv[:, 45:90], out, 45, 50, backend=backend)


@td.tile_kernel
def embedding_backward(grad_in, grad_out, indices, padding_idx, N: td.constexpr):
    """FlagGems' embedding backward: the weight gradient's pointer moves inside an `if` on a
    runtime scalar (from the tensor itself, its first element, on the other side)."""
    for pid in td.grid(indices.shape[0]):
        cols = td.arange(0, 64)
        row_idx = td.load(indices + pid)
        if row_idx != padding_idx:
            grad_in += row_idx * N
            g = td.load(grad_out + pid * N + cols, cols < N, other=0.0)
            td.atomic_add(grad_in + cols, g, mask=cols < N)


def test_a_pointer_moved_in_a_branch() -> None:
    idx = np.array([1, 2, 1, 0], np.int64)
    g = np.random.default_rng(10).standard_normal((4, 45)).astype(np.float32)
    want = np.zeros((3, 45))
    for i, r in enumerate(idx):
        if r != 2:
            want[r] += g[i]
    for backend in ("numpy", "triton-interpret"):
        grad = np.zeros((3, 45), np.float32)
        embedding_backward.run(grad, g, idx, 2, 45, backend=backend)
        td.testing.assert_close(grad, want, np.float32)


@td.tile_kernel
def neighbours(x, out, hist, n):
    """Scalar accesses whose offset may leave the tensor, under a user's mask stricter than the
    bounds (FlagGems' cumsum loads the previous block's total with `mask=pid > 0`): the
    generated code once kept only the bounds and dropped the mask."""
    for pid in td.grid(n):
        left = td.load(x + pid - 1, mask=pid > 1, other=0.0)
        right = td.load(x + pid + 1, mask=pid < n - 3, other=0.0)
        td.store(out + pid + 1, left + right, mask=pid < n - 3)
        td.atomic_add(hist + pid - 1, 1, mask=pid > 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scalar_access_keeps_its_mask_beside_the_bounds(backend: str) -> None:
    n = 9
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32) + 2
    out, hist = np.zeros(n, np.float32), np.zeros(n, np.int32)
    run_on(neighbours, (x, out, hist, n), backend)
    pid = np.arange(n)
    left = np.where(pid > 1, np.r_[0, x[:-1]], 0)
    right = np.where(pid < n - 3, np.r_[x[1:], 0], 0)
    expected = np.zeros(n)
    expected[1:][pid[:-1] < n - 3] = (left + right)[:-1][pid[:-1] < n - 3]
    td.testing.assert_close(out, expected, np.float32)
    np.testing.assert_array_equal(hist, (np.arange(n) >= 2) & (np.arange(n) < n - 1))


@td.tile_kernel
def column_and_transpose(a, out_col, out_t, BLOCK: td.constexpr):
    """Pointers into host views, with the strides read off them (FlagGems' wrappers pass
    `x.stride(0)` of whatever view they hold): a column `a[:, 3]` and a transpose `a.T`
    address their root's memory from their first element, as Triton's `data_ptr()` does."""
    col, t = a[:, 3], a.T
    (sc,), (s0, s1) = col.stride(), t.stride()
    for pid in td.grid(t.shape[0]):
        rows = td.arange(0, BLOCK)
        m = rows < t.shape[1]
        td.store(out_t + pid * t.shape[1] + rows, td.load(t + pid * s0 + rows * s1, mask=m),
                 mask=m)
        if pid == 0:
            td.store(out_col + rows, td.load(col + rows * sc, mask=m), mask=m)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pointers_into_views_take_the_views_strides(backend: str) -> None:
    a = np.random.default_rng(5).standard_normal((13, 6)).astype(np.float32)
    out_col, out_t = np.zeros(13, np.float32), np.zeros((6, 13), np.float32)
    run_on(column_and_transpose, (a, out_col, out_t, 16), backend)
    np.testing.assert_array_equal(out_col, a[:, 3])
    np.testing.assert_array_equal(out_t, a.T)


@td.tile_kernel
def unsloth_rms(X, W, eps: td.constexpr):
    """Unsloth's _rms_layernorm_forward merged with its wrapper: the kernel's parameters are
    the wrapper's names, moved along the row in the grid (`Y += row_idx * Y_row_stride`), and
    after the grid they are the tensors again."""
    n_rows, n_cols = X.shape
    Y = td.empty((n_rows, n_cols), X.dtype)
    r = td.empty(n_rows, td.float32)
    Y_row_stride, X_row_stride = Y.stride(0), X.stride(0)
    for row_idx in td.grid(n_rows):
        col_offsets = td.arange(0, 256)
        mask = col_offsets < n_cols
        Y += row_idx * Y_row_stride
        X += row_idx * X_row_stride
        r += row_idx
        X_row = td.load(X + col_offsets, mask=mask, other=0).to(td.float32)
        W_row = td.load(W + col_offsets, mask=mask, other=0)
        inv_var = td.math.rsqrt(td.sum(X_row * X_row, axis=0) / n_cols + eps)
        td.store(r, inv_var)
        td.store(Y + col_offsets, (X_row * inv_var).to(W_row.dtype) * W_row, mask=mask)
    return Y, r


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_tensor_name_rebound_in_a_grid_is_the_tensor_after_it(backend: str) -> None:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((21, 129)).astype(np.float32)
    w = rng.standard_normal(129).astype(np.float32)
    y, r = unsloth_rms.run(x, w, 1e-6, backend=backend)
    inv = 1 / np.sqrt((x.astype(np.float64) ** 2).mean(1) + 1e-6)
    td.testing.assert_close(r, inv, np.float32)
    td.testing.assert_close(y, x * inv[:, None] * w, np.float32)

    @td.tile_kernel
    def dequant(x, s):
        """Unsloth's fp8 weight_dequant inlined: the kernel's local `y = x * s` beside the
        wrapper's output `y`, which it returns."""
        y = td.empty_like(x)
        x_ptr, y_ptr = x, y
        for pid in td.grid(td.cdiv(x.shape[0], 16)):
            offs = pid * 16 + td.arange(0, 16)
            x = td.load(x_ptr + offs, mask=offs < x_ptr.shape[0])
            y = x * s
            td.store(y_ptr + offs, y, mask=offs < x_ptr.shape[0])
        return y

    np.testing.assert_array_equal(dequant.run(x[0], 2.0, backend=backend), 2 * x[0])

    @td.tile_kernel
    def rebound_number(x):
        total = 0.0
        for i in td.grid(x.shape[0]):
            total = td.load(x + i)  # a program's value cannot flow out of the grid
        out = td.full((1,), total, td.float32)
        return out

    with pytest.raises(td.TraceError, match="rebound inside it and read after it"):
        rebound_number(x[0])


def test_a_pointer_past_a_tensor_names_its_shape_and_offset() -> None:
    """Unsloth's rms backward with a 3-D tensor's stride(0) used for 2-D rows: the offset
    leaves the tensor, which NumPy says in the tensor's own terms (the GPU reads on)."""

    @td.tile_kernel
    def row_sums(x3):
        n_rows = x3.shape[0] * x3.shape[1]
        out = td.empty((n_rows,), dtype=td.float32)
        stride = x3.stride(0)  # (x3.stride(1) is a row's)
        for r in td.grid(n_rows):
            cols = td.arange(0, 8)
            td.store(out + r, td.sum(td.load(x3 + r * stride + cols, mask=cols < 5, other=0.0)))
        return out

    with pytest.raises(td.OutOfBoundsError, match=r"load from 'x3' \(shape \(2, 3, 5\)\) "
                       r"through its flat view: offset 30 is past its last element \(offset 29\)"):
        row_sums(np.ones((2, 3, 5), np.float32))
