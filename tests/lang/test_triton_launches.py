"""Triton kernels and their wrappers as written (tiledsl/frontend/launches.py): a host-code
launch `kernel[grid](...)` of a `@triton.jit` kernel runs its body once per program of `grid`,
`tl` read as `td`; `@triton.autotune` configs become a knob, `@triton.heuristics` compute
their arguments. The kernels here are Triton's tutorials', unmodified."""

from __future__ import annotations

import contextlib
import functools
import sys

import numpy as np
import pytest

import tiledsl as td
from support import gpu_backend, run_on
from tiledsl.testing import assert_close

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = triton.language
core = pytest.importorskip("triton.language.core")
BACKENDS = ["numpy", "triton-interpret", gpu_backend()]


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(output_ptr + offsets, output, mask=mask)


@td.tile_kernel
def add(x, y):
    output = torch.empty_like(x)
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']), )  # noqa: E731
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
    return output


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@triton.autotune(configs=[
    triton.Config({'BLOCK_SIZE_M': 32, 'BLOCK_SIZE_N': 32, 'BLOCK_SIZE_K': 32, 'GROUP_SIZE_M': 8},
                  num_stages=3, num_warps=4),
    triton.Config({'BLOCK_SIZE_M': 64, 'BLOCK_SIZE_N': 32, 'BLOCK_SIZE_K': 16, 'GROUP_SIZE_M': 4},
                  num_stages=4, num_warps=4)], key=['M', 'N', 'K'])
@triton.heuristics({'EVEN_K': lambda args: args['K'] % args['BLOCK_SIZE_K'] == 0})
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                  ACTIVATION: tl.constexpr, EVEN_K: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@td.tile_kernel
def matmul(a, b, activation=""):
    assert a.shape[1] == b.shape[0], "Incompatible dimensions"
    assert a.is_contiguous(), "Matrix A must be contiguous"
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = lambda META: (  # noqa: E731
        triton.cdiv(M, META['BLOCK_SIZE_M']) * triton.cdiv(N, META['BLOCK_SIZE_N']), )
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), ACTIVATION=activation)
    return c


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_vector_add_tutorial_as_written(backend: str) -> None:
    rng = np.random.default_rng(70)
    x, y = (rng.standard_normal(3001).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(run_on(add, (x, y), backend), x + y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_vector_add_on_transposed_inputs(backend: str) -> None:
    """torch.empty_like(x) is laid out as x is (torch's preserve_format), so the tutorial's flat
    offsets pair each output element with its own inputs on transposed arrays too."""
    rng = np.random.default_rng(72)
    x, y = (rng.standard_normal((37, 5)).astype(np.float32).T for _ in range(2))
    out = run_on(add, (x, y), backend)
    np.testing.assert_array_equal(out, x + y)
    if backend != "triton-gpu":
        assert out.strides == x.strides


@td.tile_kernel
def doubled_into_new_tensors(x, c):
    """The vector-add kernel's flat offsets into tensors made like x in each memory format."""
    outs = (torch.empty_like(x), x.clone(), torch.zeros_like(x, memory_format=torch.
            contiguous_format), torch.empty_like(c, memory_format=torch.channels_last))
    for src, out in zip((x, x, x, c), outs):
        add_kernel[(triton.cdiv(src.numel(), 64),)](src, src, out, src.numel(), BLOCK_SIZE=64)
    return outs


def test_new_tensors_take_the_memory_format_torch_gives_them() -> None:
    x = torch.randn(37, 5).T  # transposed
    c = torch.randn(2, 3, 4, 5)
    outs = doubled_into_new_tensors(x, c)
    for out, like in zip(outs, (torch.empty_like(x), x.clone(), torch.zeros_like(
            x, memory_format=torch.contiguous_format), torch.empty_like(
            c, memory_format=torch.channels_last))):
        assert out.stride() == like.stride()
    for out in outs[:2]:  # laid out as x: each element is its own, doubled
        torch.testing.assert_close(out, 2 * x, rtol=0, atol=0)
    torch.testing.assert_close(outs[2].view(-1), 2 * x.T.reshape(-1), rtol=0, atol=0)
    torch.testing.assert_close(outs[3].permute(0, 2, 3, 1).reshape(-1), 2 * c.reshape(-1),
                               rtol=0, atol=0)  # (channels last: c's memory order, doubled)


@triton.jit
def _top4_and_clamped(x_ptr, top_ptr, clamped_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    v = tl.load(x_ptr + r)
    tl.store(top_ptr + tl.arange(0, 4), tl.topk(v, 4))  # Triton's: the values, largest first
    kept = tl.clamp(v, -0.5, 0.5, propagate_nan=tl.PropagateNan.ALL)
    tl.store(clamped_ptr + r, tl.maximum(kept, 0.0, propagate_nan=tl.PropagateNan.ALL))


@td.tile_kernel
def top4_and_clamped(x):
    top, clamped = torch.empty(4, dtype=x.dtype), torch.empty_like(x)
    _top4_and_clamped[(1,)](x, top, clamped, x.numel())
    return top, clamped


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_tritons_topk_and_propagate_nan(backend: str) -> None:
    x = np.random.default_rng(73).standard_normal(16).astype(np.float32)
    x[3] = np.nan
    top, clamped = run_on(top4_and_clamped, (x,), backend)
    np.testing.assert_array_equal(top, torch.topk(torch.from_numpy(x), 4).values)  # NaN first
    np.testing.assert_array_equal(clamped, np.maximum(np.clip(x, -0.5, 0.5), 0.0))


@triton.jit
def _find_seq_idx(query_start_len_ptr, target_idx, num_seqs, BLOCK_Q: tl.constexpr):
    left: tl.int32 = 0  # vLLM's unified attention: the first trip is on Python ints
    right = num_seqs
    while left < right:
        mid = (left + right) // 2  # Triton's int32 (Python's int64 made it drift)
        val = tl.load(query_start_len_ptr + mid)
        mid_val = val // BLOCK_Q + mid
        if mid_val <= target_idx:
            left = mid + 1
        else:
            right = mid
    return left - 1


@triton.jit
def _seq_of_each_block(cu_ptr, out_ptr, num_seqs):
    t = tl.program_id(0)
    tl.store(out_ptr + t, _find_seq_idx(cu_ptr, t, num_seqs, 4))


@td.tile_kernel
def seq_of_each_block(cu, n):
    out = torch.empty(n, dtype=torch.int32)
    _seq_of_each_block[(n,)](cu, out, cu.shape[0] - 1)
    return out


def test_a_binary_search_over_python_ints_keeps_tritons_int32() -> None:
    cu = np.array([0, 5, 6, 12, 30], np.int32)
    want = [np.searchsorted(cu[:-1] // 4 + np.arange(4), t, side="right") - 1 for t in range(12)]
    np.testing.assert_array_equal(seq_of_each_block(cu, 12), want)


@triton.jit
def _column_sums(x_ptr, out_ptr, rows, N: tl.constexpr):
    acc = tl.zeros((N,), tl.float32)
    for r in range(rows, flatten=True):  # Unsloth's grouped GEMM: Triton ignores the keyword
        acc += tl.load(x_ptr + r * N + tl.arange(0, N))
    tl.store(out_ptr + tl.arange(0, N), acc)


@td.tile_kernel
def column_sums(x):
    out = torch.empty(x.shape[1], dtype=torch.float32)
    _column_sums[(1,)](x, out, x.shape[0], x.shape[1])
    return out


@triton.jit
def _chunk_sums(x_ptr, out_ptr, T: tl.constexpr, BT: tl.constexpr):
    for i in range(0, tl.cdiv(T, BT)):  # a Python int here (T is constexpr), a scalar in
        o_t = (i * BT).to(tl.int64) + tl.arange(0, BT)  # Triton's loop: fla's based attention
        tl.store(out_ptr + i, tl.sum(tl.load(x_ptr + o_t, mask=o_t < T, other=0.0)))


@td.tile_kernel
def chunk_sums(x):
    out = torch.empty(triton.cdiv(x.shape[0], 8), dtype=x.dtype)
    _chunk_sums[(1,)](x, out, x.shape[0], 8)
    return out


def test_to_of_an_int_expression_in_a_triton_body() -> None:
    x = np.random.default_rng(79).standard_normal(37).astype(np.float32)
    want = [x[i:i + 8].astype(np.float64).sum() for i in range(0, 37, 8)]
    assert_close(chunk_sums(x), np.array(want), np.float32)


@td.tile_kernel
def range_with_a_keyword(x):
    out = td.empty_like(x)
    for i in range(x.shape[0], flatten=True):
        out[i] = x[i]
    return out


def test_builtin_range_keywords_in_a_triton_body() -> None:
    x = np.random.default_rng(74).standard_normal((7, 16)).astype(np.float32)
    assert_close(column_sums(x), x.astype(np.float64).sum(0), np.float32)
    with pytest.raises(td.TraceError, match="range\\(\\) takes no keyword arguments"):
        range_with_a_keyword(x)  # outside a Triton body: Python's error


@td.tile_kernel
def add_and_log(x, y):
    """Unsloth's grouped GEMM logs what the launch returns (Triton's compiled kernel)."""
    output = torch.empty_like(x)
    compiled = add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, output, x.numel(), BLOCK_SIZE=256)
    assert compiled.name == "add_kernel" and compiled.n_regs is None, compiled
    _ = f"{compiled.name}: n_regs={compiled.n_regs} n_spills={compiled.n_spills} " \
        f"metadata={compiled.metadata}"
    return output


def test_a_launch_returns_the_kernel_s_name() -> None:
    x, y = (np.random.default_rng(76).standard_normal(300).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(add_and_log(x, y), x + y)


libdevice_round = pytest.importorskip("triton.language.extra.cuda.libdevice").round


@triton.jit
def _rounded(x_ptr, away_ptr, even_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    v = tl.load(x_ptr + r)
    tl.store(away_ptr + r, tl.extra.cuda.libdevice.round(v))  # SGLang's int8 quantization
    tl.store(away_ptr + N + r, libdevice_round(v))  # (`from ...libdevice import round`)
    tl.store(even_ptr + r, tl.extra.libdevice.rint(v))
    w = tl.where(tl.abs(v) < 1e18, v, 0.0)  # (in int64's range; NaN compares False)
    tl.store(even_ptr + N + r, tl.extra.cuda.libdevice.llrint(w).to(tl.float32))
    tl.store(away_ptr + 2 * N + r, tl.extra.cuda.libdevice.llround(w).to(tl.float32))


@td.tile_kernel
def rounded(x):
    away, even = torch.empty(3 * x.numel(), dtype=x.dtype), torch.empty(2 * x.numel(), dtype=x.dtype)
    _rounded[(1,)](x, away, even, x.numel())
    return away, even



@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_libdevice_round_goes_half_away_from_zero(backend: str) -> None:
    x = np.array([2.5, -2.5, 0.5, -0.5, 1.5, 0.49999997, -0.49999997, 3.7, -3.7, 1e30, np.inf,
                  np.nan, -0.0, 126.5, -127.5, 7.0], np.float32)
    away, even = run_on(rounded, (x,), backend)
    x64 = x.astype(np.float64)  # (|x| + 0.5 is exact in float64: C's roundf, independently)
    with np.errstate(invalid="ignore"):
        want = np.where(np.isfinite(x64), np.copysign(np.floor(np.abs(x64) + 0.5), x64), x64)
    np.testing.assert_array_equal(away[:32], np.tile(want.astype(np.float32), 2))
    np.testing.assert_array_equal(even[:16], np.round(x))
    finite = np.abs(x) < 1e18  # llrint / llround: to int64
    np.testing.assert_array_equal(even[16:][finite], np.round(x)[finite])
    np.testing.assert_array_equal(away[32:][finite], want.astype(np.float32)[finite])


@td.tile_kernel
def add_merged_heads(x, y):
    """An attention wrapper's `o.transpose(1, 2).reshape(b, t, h * d)`: torch's copy (no view
    of x has that order), which the launch's pointers walk, not x's own memory."""
    b, h, t, d = x.shape
    merged = x.transpose(1, 2).reshape(b, t, h * d)
    output = torch.empty_like(merged)
    add_kernel[(triton.cdiv(merged.numel(), 128),)](merged, y, output, merged.numel(),
                                                     BLOCK_SIZE=128)
    return output


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_launch_on_a_reshape_that_copies(backend: str) -> None:
    rng = np.random.default_rng(71)
    x, y = rng.standard_normal((2, 3, 5, 4)).astype(np.float32), \
        rng.standard_normal((2, 5, 12)).astype(np.float32)
    want = x.transpose(0, 2, 1, 3).reshape(2, 5, 12) + y
    np.testing.assert_array_equal(run_on(add_merged_heads, (x, y), backend), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_autotuned_matmul_tutorial_as_written(backend: str) -> None:
    """Its autotune configs are a knob of the config space (sampled below, both configs);
    the EVEN_K heuristic takes each config's BLOCK_SIZE_K."""
    rng = np.random.default_rng(71)
    a, b = rng.standard_normal((70, 48)).astype(np.float16), \
        rng.standard_normal((48, 50)).astype(np.float16)
    want = a.astype(np.float64) @ b
    space = matmul.config_space(a, b, "leaky_relu", backend="numpy")
    assert [p.name for p in space.params] == ["matmul_kernel_config"]
    default = matmul.config_space(a, b, "leaky_relu", backend=backend.removesuffix("-gpu"))\
        .default()
    for choice in (0, 1):  # each autotune config
        out = run_on(matmul, (a, b, "leaky_relu"), backend,
                     config=default.replace(matmul_kernel_config=choice))
        assert_close(out, np.where(want >= 0, want, 0.01 * want), np.float16)


def test_program_id_outside_a_launch_says_to_write_the_grid_loop() -> None:
    @td.tile_kernel
    def plain(x):
        out = td.empty_like(x)
        pid = td.program_id(0)
        out[pid] = x[pid]
        return out

    with pytest.raises(td.TraceError, match="names its programs with a grid loop"):
        plain(np.zeros(4, np.float32))

    @td.tile_kernel
    def inside(x):
        out = torch.empty_like(x)
        for _ in td.grid(1):
            add_kernel[(1,)](x, x, out, 4, BLOCK_SIZE=4)
        return out

    with pytest.raises(td.TraceError, match=r"add_kernel\[grid\]\(\.\.\.\) launches a Triton "
                                            "kernel, in host code"):
        inside(np.zeros(4, np.float32))


@triton.jit
def _double_row(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(o_ptr + pid * n + offs, tl.load(x_ptr + pid * n + offs, mask=offs < n) * 2,
             mask=offs < n)


@td.tile_kernel
def doubled_rows(x):
    """A @triton.jit kernel called from a grid's body: tl.program_id is the grid's index."""
    m, n = x.shape
    out = td.empty_like(x)
    for _ in td.grid(m):
        _double_row(x, out, n, BLOCK=64)
    return out


def test_a_triton_kernel_called_from_a_grid_reads_its_program_id() -> None:
    x = np.random.default_rng(72).standard_normal((5, 37)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(doubled_rows.run(x, backend=backend), 2 * x)


from triton.language.extra import libdevice  # noqa: E402

triton_cast = tl.cast  # Unsloth's module-level aliases of Triton builtins
triton_tanh = libdevice.tanh


class LibEntry(triton.KernelInterface):
    """FlagGems' `@libentry()` structure (its caching left out): a wrapper with `.fn`."""

    def __init__(self, fn):  # type: ignore[no-untyped-def]
        self.fn = fn
        self.arg_names = fn.arg_names

    def run(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return self.fn.run(*args, **kwargs)


@LibEntry
@triton.jit
def tanh_rows_kernel(x_ptr, y_ptr, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_ptr += row * triton_cast(stride, tl.int64)
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + row * BLOCK + offs, triton_tanh(tl.load(x_ptr + offs)))


@td.tile_kernel
def tanh_rows(x):
    y = torch.empty_like(x)
    tanh_rows_kernel[(x.shape[0],)](x, y, x.stride(0), BLOCK=x.shape[1])
    return y


@td.tile_kernel
def tanh_twice(x):
    """FlagGems' `mean_dim` calls `mean`: a kernel's wrapper called by another's host code."""
    return tanh_rows(tanh_rows(x))


def test_wrapped_launches_aliases_and_a_kernel_calling_a_kernel() -> None:
    x = np.random.default_rng(73).standard_normal((3, 16)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        assert_close(tanh_rows.run(x, backend=backend), np.tanh(x.astype(np.float64)),
                     np.float32)
        assert_close(tanh_twice.run(x, backend=backend),
                     np.tanh(np.tanh(x.astype(np.float64))), np.float32)


from triton.language.extra.libdevice import rsqrt  # noqa: E402 (Liger's module-level import)

EPS_SCALE = tl.constexpr(1.0)  # a constexpr global, as Liger's LOG2_E


@triton.jit
def _rms_kernel(Y_ptr, X_ptr, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(X_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    rstd = rsqrt(tl.sum(x * x, axis=0) / n_cols + eps * EPS_SCALE)
    one = 1.0  # a constexpr in Triton, which `.to` makes a scalar (flash-attn's `zero.to`)
    tl.store(Y_ptr + row * n_cols + cols, x * rstd * one.to(x.dtype), mask=cols < n_cols)


@td.tile_kernel
def rms_rows(X, eps):
    """Liger's wrapper habits: a device branch, a device context, requires_grad checks; and
    flash-attn's launch through `torch.library.wrap_triton`."""
    n_rows, n_cols = X.shape
    Y = torch.empty_like(X)
    assert not X.requires_grad
    if X.device.type == "xpu":
        raise RuntimeError("not this device")
    dtype = X.dtype
    warps = {torch.float16: 8, torch.float32: 4}  # (the matmul tutorial's `configs[dtype]`)
    with torch.cuda.device(X.device):
        torch.library.wrap_triton(_rms_kernel)[(n_rows,)](
            Y, X, n_cols, eps, BLOCK_SIZE=triton.next_power_of_2(n_cols),
            num_warps=warps[dtype])
    return Y


@torch.library.triton_op("tiledsl_tests::rms_impl", mutates_args={"Y"})
def rms_impl(Y: torch.Tensor, X: torch.Tensor, eps: float) -> None:
    _rms_kernel[(X.shape[0],)](Y, X, X.shape[1], eps, BLOCK_SIZE=triton.next_power_of_2(X.shape[1]))


@td.tile_kernel
@torch.inference_mode()
def rms_through_an_op(X, eps):
    """flash-attn's layer norm calls its `@triton_op("flash_attn::layer_norm_fwd_impl")`: the
    op's body runs; lightllm's wrappers are under `@torch.inference_mode()` / `no_grad()`."""
    Y = torch.empty_like(X)
    rms_impl(Y, X, eps)
    return Y


def test_a_wrapper_s_device_checks_and_a_kernel_s_module_globals() -> None:
    x = np.random.default_rng(74).standard_normal((5, 37)).astype(np.float32)
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6)
    for backend in ("numpy", "triton-interpret"):
        assert_close(rms_rows.run(x, 1e-6, backend=backend), want, np.float32)
    assert_close(rms_through_an_op.run(x, 1e-6), want, np.float32)


def ensure_contiguous(fn):  # type: ignore[no-untyped-def]
    """Liger's decorator of its autograd forwards, as written."""
    @functools.wraps(fn)
    def wrapper(ctx, *args, **kwargs):  # type: ignore[no-untyped-def]
        def maybe_to_contiguous(x):  # type: ignore[no-untyped-def]
            return x.contiguous() if isinstance(x, torch.Tensor) else x
        args = [maybe_to_contiguous(arg) for arg in args]
        return fn(ctx, *args, **kwargs)
    return wrapper


@contextlib.contextmanager
def device_context(device):  # type: ignore[no-untyped-def]
    """Liger's device context, as written: a generator under `@contextmanager`."""
    device = torch.device(device)
    backend = getattr(torch, device.type, None)
    if backend is not None and hasattr(backend, "device"):
        with backend.device(device):
            yield
    else:
        yield


@triton.jit
def _offset_rms_kernel(Y_ptr, X_ptr, n_cols, eps, offset, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(X_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    offset = offset.to(tl.float32)  # a float argument is a runtime scalar in Triton
    rstd = rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(Y_ptr + row * n_cols + cols, x * rstd + offset, mask=cols < n_cols)


def offset_rms_forward(X, eps, offset):  # type: ignore[no-untyped-def]
    n_rows, n_cols = X.shape
    BLOCK_SIZE, num_warps = triton.next_power_of_2(n_cols), 4
    Y = torch.empty_like(X)
    with device_context(X.device):
        _offset_rms_kernel[(n_rows,)](Y, X, n_cols, eps, offset, BLOCK_SIZE=BLOCK_SIZE,
                                      num_warps=num_warps)
    return Y, X, BLOCK_SIZE, num_warps


class OffsetRMS(torch.autograd.Function):
    @staticmethod
    @ensure_contiguous
    def forward(ctx, X, eps, offset=0.5):  # type: ignore[no-untyped-def]
        Y, X, BLOCK_SIZE, num_warps = offset_rms_forward(X, eps, offset)
        ctx.BLOCK_SIZE, ctx.num_warps = BLOCK_SIZE, num_warps
        ctx.save_for_backward(X)
        return Y


class OffsetRMSNoCtx(torch.autograd.Function):  # the `setup_context` style
    @staticmethod
    def forward(X, eps):  # type: ignore[no-untyped-def]
        return offset_rms_forward(X, eps, -1.0)[0]

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        raise AssertionError("prepares a backward only: not called")


@td.tile_kernel
def offset_rms(X, eps):
    return OffsetRMS.apply(X, eps), OffsetRMSNoCtx.apply(X, eps)


def test_liger_s_autograd_function_forward_and_its_helpers_as_written() -> None:
    """`Function.apply` runs `forward` (through `functools.wraps` and `@contextmanager`
    helpers, rewritten as any helper), a float argument is a runtime scalar in the kernel, and
    the forward helper returns its block size and warps beside the tensors."""
    x = np.random.default_rng(75).standard_normal((6, 21)).astype(np.float32)
    normed = x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6)
    for backend in ("numpy", "triton-interpret"):
        y, y_no_ctx = offset_rms.run(x, 1e-6, backend=backend)
        assert_close(y, normed + 0.5, np.float32)
        assert_close(y_no_ctx, normed - 1.0, np.float32)
    forward = td.tile_kernel(offset_rms_forward)
    y, same_x, block, warps = forward.run(x, 1e-6, 0.25, backend="numpy")
    assert_close(y, normed + 0.25, np.float32)
    assert (block, warps) == (32, 4) and same_x.shape == x.shape


@tl.constexpr
def accum_type(d):  # type: ignore[no-untyped-def]
    """FlagGems' `get_scan_accum_type`: plain Python returning Triton's dtypes."""
    return tl.int64 if d.is_int() else tl.float32


def heur_block(args):  # type: ignore[no-untyped-def]
    """FlagGems' heuristics ask the device and set the launch's warps."""
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return 4 if args["n"] < sms else 8


@triton.heuristics({"BLOCK": heur_block, "num_warps": lambda args: 4})
@triton.jit
def _scan_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + core.arange(0, BLOCK)
    acc: tl.constexpr = accum_type(x_ptr.dtype.element_ty)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0).to(acc)
    if x_ptr.dtype.element_ty.is_int():  # Triton's int1 is an int
        x = x * (1 << (x_ptr.dtype.element_ty.int_bitwidth - 1))
    programs = tl.num_programs(0).to(tl.int64)
    tl.store(y_ptr + offs, tl.cumsum(x, 0) + programs, mask=offs < n)


@td.tile_kernel
def scans(x):
    y = torch.empty(x.shape, dtype=torch.int64 if x.dtype.is_int() else torch.float32)
    _scan_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y


@pytest.mark.parametrize("dtype", [np.bool_, np.int16, np.float32])
def test_flag_gems_kernel_spellings(dtype: type) -> None:
    """`import triton.language.core as core`, a `@tl.constexpr` helper's Triton dtype, Triton's
    int1 answering `is_int()`, `int_bitwidth`, `tl.num_programs(0).to(...)`, and heuristics
    that query the device and give `num_warps`."""
    x = (np.random.default_rng(77).random(11) * 4).astype(dtype)
    scale = {np.bool_: 1, np.int16: 1 << 15}.get(dtype, 1)
    want = np.concatenate([np.cumsum(x[i:i + 4].astype(np.float64) * scale)
                           for i in range(0, 11, 4)]) + 3  # BLOCK 4 (11 < 132 SMs): 3 programs
    for backend in ("numpy", "triton-interpret"):
        y = scans.run(x, backend=backend)
        assert y.dtype == (np.float32 if dtype is np.float32 else np.int64)
        assert_close(y, want, np.float32)


@functools.lru_cache
def cached_sms(index):  # type: ignore[no-untyped-def]
    """FlagGems' `get_num_sms`, cached: the device query inside is still answered; Liger's
    `infer_device()` test: in a kernel, a GPU is available (the kernel's device is one)."""
    if not torch.cuda.is_available():
        return 1
    return torch.cuda.get_device_properties(index).multi_processor_count


@triton.jit
def _count_kernel(x_ptr, out_ptr, total_ptr, n, SMS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    positive = x > 0
    running = tl.cumsum(positive.to(tl.uint32), axis=0)  # Triton's sums keep 32 bits
    count = tl.sum(positive, axis=0)  # a bool's sum is uint32
    tl.static_assert(running.dtype == tl.uint32 and count.dtype == tl.uint32)
    tl.static_assert((running + offs).dtype == tl.uint32)  # unsigned meets signed: Triton's
    wide = tl.program_id(0).to(tl.uint64) * BLOCK + offs  # (exponential_'s uint64 offsets)
    tl.store(out_ptr + wide, running + SMS, mask=offs < n)
    tl.store(total_ptr, tl.sum(x, axis=0, dtype=tl.float64) + count)


@td.tile_kernel
def counts(x):
    out = torch.empty(x.shape, dtype=torch.int64)
    total = torch.empty((1,), dtype=torch.float64)
    _count_kernel[(1,)](x, out, total, x.numel(), cached_sms(x.device.index), 16)
    return out, total


def test_a_triton_bodys_sums_take_tritons_dtypes() -> None:
    """In a @triton.jit body an int sum keeps Triton's dtype (uint32 here: int64 is tiledsl's
    own) and an unsigned int meets a signed one as in Triton, `dtype=` chooses a sum's dtype,
    and a `functools.lru_cache` helper is rewritten as any."""
    x = np.random.default_rng(78).standard_normal(13).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        out, total = counts.run(x, backend=backend)
        np.testing.assert_array_equal(out, np.cumsum(x > 0) + 132)
        assert_close(total, np.array([x.astype(np.float64).sum() + (x > 0).sum()]), np.float32)


TORCH_TO_TRITON = {torch.float32: tl.float32, torch.float16: tl.float16}  # Liger's ops/utils


@triton.jit
def _biased_kernel(Y, X, B, N, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr,
                   num_warps: tl.constexpr):
    c = tl.arange(0, BLOCK)
    x = tl.load(X + c, mask=c < N)
    tl.store(Y + c, (x * num_warps + tl.load(B)).to(OUT_DTYPE), mask=c < N)


class Biased(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    @ensure_contiguous
    def forward(ctx, X, B):  # type: ignore[no-untyped-def]
        Y = torch.empty_like(X).float()
        _biased_kernel[(1,)](Y, X.detach(), B, X.numel(), TORCH_TO_TRITON[Y.dtype], BLOCK=32,
                             num_warps=4)
        return Y


@td.tile_kernel
def biased(x, b):
    return Biased.apply(x, b)


def test_more_of_ligers_wrapper_habits() -> None:
    """A forward under `@torch.amp.custom_fwd`, `x.float()` and `x.detach()`, a dict keyed by
    torch's dtypes read with a tensor's dtype, a kernel taking `num_warps` itself, and
    `tl.load(B)` of a 0-d tensor argument (its value)."""
    x = np.random.default_rng(79).standard_normal(21).astype(np.float16)
    for backend in ("numpy", "triton-interpret"):
        y = biased.run(x, np.array(0.25, np.float32), backend=backend)
        assert y.dtype == np.float32
        assert_close(y, x.astype(np.float64) * 4 + 0.25, np.float16)


@triton.jit
def _strided_rows(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for r in range(pid, n_rows, tl.num_programs(0).to(tl.int64)):  # a grid-stride loop
        v = tl.load(x_ptr + r * n_cols + cols, mask=cols < n_cols)
        tl.store(y_ptr + r * n_cols + cols, v * 2, mask=cols < n_cols)


@td.tile_kernel
def strided_rows(x, n_rows, n_cols):
    y = torch.empty_like(x)
    count = max(t.ndim for t in (x, n_rows) if torch.is_tensor(t))  # FlagGems' overload key
    with torch.cuda.device(torch.device("cuda")):
        _strided_rows[(3,)](x, y, n_rows, n_cols, BLOCK=triton.next_power_of_2(n_cols) * count)
    return y


def test_grid_stride_loops_and_int_arguments_made_constexpr() -> None:
    """`tl.num_programs(0).to(tl.int64)` stays a known step, an int argument reaching a
    constexpr through `triton.next_power_of_2` makes the kernel trace with its value, and
    `torch.is_tensor` and `torch.cuda.device(torch.device("cuda"))` answer as torch does."""
    x = np.random.default_rng(84).standard_normal((7, 5)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        assert_close(strided_rows.run(x, 7, 5, backend=backend), x.astype(np.float64) * 2,
                     np.float32)


def test_a_launch_under_triton_interpret_env(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With TRITON_INTERPRET=1, @triton.jit makes an InterpretedFunction: launched the same."""
    import os
    import subprocess
    import sys
    script = tmp_path / "launch.py"
    script.write_text(
        "import numpy as np, torch, triton, triton.language as tl, tiledsl as td\n"
        "@triton.jit\n"
        "def k(x_ptr, y_ptr, n, B: tl.constexpr):\n"
        "    o = tl.program_id(0) * B + tl.arange(0, B)\n"
        "    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n) * 3, mask=o < n)\n"
        "@td.tile_kernel\n"
        "def f(x):\n"
        "    y = torch.empty_like(x)\n"
        "    k[(triton.cdiv(x.numel(), 16),)](x, y, x.numel(), B=16)\n"
        "    return y\n"
        "x = np.arange(37, dtype=np.float32)\n"
        "assert (f(x) == 3 * x).all()\n")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


SCALE = 2.0  # read by the @triton.jit kernel below: a new value traces again


@triton.jit
def _scaled_kernel(x_ptr, y_ptr, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n) * SCALE, mask=o < n)


@td.tile_kernel
def scaled(x):
    y = torch.empty_like(x)
    _scaled_kernel[(triton.cdiv(x.numel(), 16),)](x, y, x.numel(), B=16)
    return y


def test_a_global_a_launched_kernel_reads_keys_the_trace(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    x = np.arange(37, dtype=np.float32)
    np.testing.assert_array_equal(scaled(x), 2 * x)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 3.0)
    np.testing.assert_array_equal(scaled(x), 3 * x)


@triton.jit
def _row_sums_reversed_operands(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    """FlagGems' batch_norm spells `feat_pid + mean_pointer`: an int plus a pointer."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    s = tl.sum(tl.load(pid * N + x_ptr + cols, mask=cols < N, other=0.0))
    tl.store(pid + out_ptr, s)


@td.tile_kernel
def reversed_row_sums(x):
    """torch's `empty(size=...)` and dtype predicates in the wrapper (FlagGems' instance_norm
    and trace)."""
    assert x.dtype.is_floating_point and x.dtype.is_signed and not x.dtype.is_complex
    out = torch.empty(size=(x.shape[0],), dtype=x.dtype, device=x.device)
    _row_sums_reversed_operands[(x.shape[0],)](x, out, x.shape[1], BLOCK=64)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_an_int_plus_a_pointer(backend: str) -> None:
    x = np.random.default_rng(88).standard_normal((5, 37)).astype(np.float32)
    assert_close(run_on(reversed_row_sums, (x,), backend), x.astype(np.float64).sum(1),
                 np.float32)


@triton.jit
def _wrapped_rows_matmul(A, B, C, M, K: tl.constexpr, N: tl.constexpr, BLOCK_M: tl.constexpr):
    rm = tl.arange(0, BLOCK_M) % M  # rows past M wrap: one row stored from several lanes
    rk = tl.arange(0, K)
    rn = tl.arange(0, N)
    a = tl.load(A + rm[:, None] * K + rk[None, :])
    b = tl.load(B + rk[:, None] * N + rn[None, :])
    tl.store(C + rm[:, None] * N + rn[None, :], tl.dot(a, b))


@td.tile_kernel
def wrapped_rows_matmul(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    _wrapped_rows_matmul[(1,)](a, b, c, a.shape[0], a.shape[1], b.shape[1], BLOCK_M=128)
    return c


def test_equal_rows_of_a_dot_stored_from_several_lanes_are_equal() -> None:
    """flash-attn's linear (Triton's `rm % M` matmuls): the lanes past M store the dot's rows
    again, which a GPU computes equal; NumPy's float32 matmul rounds them apart by their place
    in the tile (a RaceError on the NumPy backend before its dots multiplied in float64)."""
    rng = np.random.default_rng(75)
    a = rng.standard_normal((74, 64)).astype(np.float32)
    b = rng.standard_normal((64, 256)).astype(np.float32)
    assert_close(wrapped_rows_matmul.run(a, b), a.astype(np.float64) @ b, np.float32)


@triton.jit
def _expert_blocks(expert_ids_ptr, cumsum_ptr, block_size: tl.constexpr):
    """FlagGems' moe_align_block_size (stage 4): each program writes the blocks of the range
    of rows the caller's cumulative counts give it."""
    pid = tl.program_id(0)
    start_idx = tl.load(cumsum_ptr + pid)
    end_idx = tl.load(cumsum_ptr + pid + 1)
    for i in range(start_idx, end_idx, block_size):
        tl.store(expert_ids_ptr + i // block_size, pid)


@td.tile_kernel
def expert_blocks(cumsum, n_blocks):
    out = torch.zeros(n_blocks, dtype=torch.int32)
    _expert_blocks[(cumsum.shape[0] - 1,)](out, cumsum, 4)
    return out


def test_a_triton_store_indexed_by_loaded_values_is_checked_on_the_data() -> None:
    """A store the race check cannot tell apart, indexed by loaded values, in a Triton kernel
    (whose author cannot write disjoint=True) is taken as disjoint=True is: the NumPy backend
    checks each run."""
    cumsum = np.array([0, 8, 8, 16, 24], np.int32)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(expert_blocks.run(cumsum, 6, backend=backend),
                                      [0, 0, 2, 2, 3, 3])
    with pytest.raises(td.RaceError, match=r"program \(0,\) writes an element program \(2,\) "
                       "wrote in this grid, at element \\(2,\\); a Triton kernel's store"):
        expert_blocks(np.array([4, 12, 8, 16], np.int32), 6)  # ranges that meet


@triton.jit
def _persistent_row_sums(x_ptr, out_ptr, n_tiles, k_tiles, NUM_SMS: tl.constexpr,
                         BM: tl.constexpr, BK: tl.constexpr, MARK: tl.constexpr):
    """Triton's persistent matmul tutorial as it was (TritonBench's matmul_persistent): one
    loop over this program's tiles and their k steps, the tile changing under `if ki == 0`."""
    start_pid = tl.program_id(0)
    tiles_per_sm = n_tiles // NUM_SMS + (start_pid < n_tiles % NUM_SMS)
    tile_id = start_pid - NUM_SMS
    ki = -1
    acc = tl.zeros((BM,), dtype=tl.float32)
    for _ in range(0, k_tiles * tiles_per_sm):
        ki = tl.where(ki == k_tiles - 1, 0, ki + 1)
        if ki == 0:
            tile_id += NUM_SMS
        rows = tile_id * BM + tl.arange(0, BM)
        cols = ki * BK + tl.arange(0, BK)
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * (k_tiles * BK) + cols[None, :]), axis=1)
        if ki == k_tiles - 1:
            tl.store(out_ptr + rows, acc + MARK * start_pid)  # (MARK: who wrote it)
            acc = tl.zeros((BM,), dtype=tl.float32)


@td.tile_kernel
def persistent_row_sums(x, sms, programs, mark=0):
    out = torch.empty(x.shape[0], dtype=torch.float32)
    _persistent_row_sums[(programs,)](x, out, x.shape[0] // 8, x.shape[1] // 4, sms, 8, 4, mark)
    return out


def test_a_store_indexed_by_what_a_loop_carries_is_checked_on_the_data() -> None:
    """The race check cannot follow `tile_id` (carried, bumped under an `if`): in a Triton
    kernel the store is taken as disjoint=True is, and the NumPy backend checks each run."""
    x = np.random.default_rng(79).standard_normal((56, 12)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        assert_close(persistent_row_sums.run(x, 3, 3, backend=backend),
                     x.astype(np.float64).sum(1), np.float32)
    with pytest.raises(td.RaceError, match="a Triton kernel's store"):
        persistent_row_sums(x, 2, 3, 1)  # a program more than it strides by: programs 0 and 2
        # write tiles 2, 4 and 6


@triton.jit
def _scaled_rows_sum(x_ptr, s_ptr, out_ptr, n_k, NO_GROUPS: tl.constexpr, B: tl.constexpr):
    offs = tl.arange(0, B)
    if NO_GROUPS:
        scales = tl.load(s_ptr + offs)
    acc = tl.zeros((B,), dtype=tl.float32)
    for kk in range(0, n_k):
        if not NO_GROUPS:
            scales = tl.load(s_ptr + kk * B + offs)
        acc += tl.load(x_ptr + kk * B + offs) * scales
    tl.store(out_ptr + offs, acc)


@td.tile_kernel
def scaled_rows_sum(x, s, group_size):
    """A GPTQ dequantizing matmul's `NO_GROUPS=group_size == K`: a test of an int argument
    given to a tl.constexpr parameter traces per value, as Triton compiles per value."""
    out = torch.empty(16, dtype=x.dtype)
    _scaled_rows_sum[(1,)](x, s, out, x.shape[0] // 16, group_size == x.shape[0], 16)
    return out


def test_a_test_of_an_int_argument_given_to_a_constexpr_is_static() -> None:
    x, s = (np.random.default_rng(76).random(48).astype(np.float32) for _ in range(2))
    for group, scales in ((48, np.tile(s[:16], 3)), (16, s)):
        assert_close(scaled_rows_sum.run(x, s, group),
                     (x * scales).astype(np.float64).reshape(3, 16).sum(0), np.float32)


@triton.heuristics({"SMOOTHED": lambda args: args["smoothing"] > 0.0})
@triton.jit
def _smoothed_copy(x_ptr, out_ptr, smoothing, SMOOTHED: tl.constexpr, B: tl.constexpr):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs)
    if SMOOTHED:
        x = x * (1 - smoothing) + smoothing / B
    tl.store(out_ptr + offs, x)


@td.tile_kernel
def smoothed_copy(x, smoothing: float):
    """flash-attn's cross entropy: a heuristic's `args["smoothing"] > 0.0` of a Python float
    argument is a constexpr, traced per value."""
    out = torch.empty_like(x)
    _smoothed_copy[(1,)](x, out, smoothing, B=x.shape[0])
    return out


def test_a_heuristic_testing_a_float_argument_is_static() -> None:
    x = np.random.default_rng(78).random(16).astype(np.float32)
    for s in (0.0, 0.1):
        assert_close(smoothed_copy.run(x, s), x.astype(np.float64) * (1 - s) + s / 16,
                     np.float32)
    assert "smoothing" in smoothed_copy.specs.static  # (a runtime `if` would compute the same)


@triton.jit
def _log_clamped(X, Y, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0)
    tl.store(Y + offs, tl.log(tl.maximum(x, eps)), mask=offs < n)


@td.tile_kernel
def log_clamped(x, eps: float):
    """Liger's KL divergence: `tl.log(tl.maximum(y_true, eps))` of a float16 tile and a float
    argument, Triton's float32 scalar: 1e-10 as a float16 would be 0, and log(0) -inf."""
    y = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    _log_clamped[(1,)](x, y, x.numel(), eps, BLOCK=8)
    return y


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_a_float_argument_is_tritons_float32_scalar(backend: str) -> None:
    x = np.array([0.0, 0.5, 1e-3, 0.0, 2.0], np.float16)
    want = np.log(np.maximum(x.astype(np.float64), np.float32(1e-10)))
    assert_close(run_on(log_clamped, (x, 1e-10), backend), want, np.float32)


def _build_doubler():  # type: ignore[no-untyped-def]
    import triton.language as tl  # a local the kernel closes over (torchao's lazy builds)

    @triton.jit
    def _doubler(X, Y, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * 2, mask=offs < n)
    return _doubler


_DOUBLER = None


def _get_doubler():  # type: ignore[no-untyped-def]
    """torchao's `_get_act_quant_kernel`: a global bound under `if`s, the kernel built once."""
    global _DOUBLER
    kernel = _DOUBLER
    if kernel is None:
        kernel = _build_doubler()
        _DOUBLER = kernel
    return kernel


@td.tile_kernel
def doubled(x):
    y = torch.empty_like(x)
    _get_doubler()[(triton.cdiv(x.numel(), 8),)](x, y, x.numel(), BLOCK=8)
    return y


def test_a_kernel_built_lazily_inside_a_function() -> None:
    x = np.random.default_rng(80).standard_normal(19).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(doubled.run(x, backend=backend), 2 * x)
    assert _DOUBLER is not None
