"""Triton's block pointers (tiledsl/lang/block_ptrs.py): `td.make_block_ptr`, `td.advance`, and
`td.load` / `td.store` with `boundary_check=` and `padding_option=`, as Triton's matmul tutorial
and FlagGems write them."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import gpu_backend, run_on, under_configs
from tiledsl.testing import assert_close

BACKENDS = ["numpy", "triton-interpret", gpu_backend()]


@td.tile_kernel
def block_matmul(a, b, BM: td.constexpr, BN: td.constexpr, BK: td.constexpr):
    """The matmul tutorial's block-pointer form: the K loop advances both pointers."""
    M, K = a.shape
    N = b.shape[1]
    c = td.empty((M, N), dtype=td.float32)
    for pid_m, pid_n in td.grid(td.cdiv(M, BM), td.cdiv(N, BN)):
        a_p = td.make_block_ptr(a, (M, K), (K, 1), (pid_m * BM, 0), (BM, BK), (1, 0))
        b_p = td.make_block_ptr(b, (K, N), (N, 1), (0, pid_n * BN), (BK, BN), (1, 0))
        acc = td.zeros((BM, BN), dtype=td.float32)
        for _ in td.range(0, td.cdiv(K, BK)):
            acc += td.dot(td.load(a_p, boundary_check=(0, 1)), td.load(b_p, boundary_check=(0, 1)))
            a_p = td.advance(a_p, (0, BK))
            b_p = td.advance(b_p, (BK, 0))
        c_p = td.make_block_ptr(c, (M, N), (N, 1), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
        td.store(c_p, acc, boundary_check=(0, 1))
    return c


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_matmul_tutorial_with_block_pointers(backend: str) -> None:
    rng = np.random.default_rng(60)
    a, b = rng.standard_normal((37, 45)).astype(np.float32), \
        rng.standard_normal((45, 29)).astype(np.float32)
    for _, out in under_configs(block_matmul, (a, b, 16, 16, 16), backend, samples=1):
        assert_close(out, a.astype(np.float64) @ b, np.float32)


@td.tile_kernel
def padded_rows(x, pad: td.constexpr, check: td.constexpr):
    """fla's (Ascend) chunk loads: a block from a row offset, out-of-range lanes padded."""
    T, K = x.shape
    out = td.full((td.cdiv(T, 16) * 16, 16), -1.0, dtype=x.dtype)
    for i_t in td.grid(td.cdiv(T, 16)):
        p = td.make_block_ptr(x + 0, (T, K), (K, 1), (i_t * 16, 0), (16, 16), (1, 0))
        q = td.make_block_ptr(out, (td.cdiv(T, 16) * 16, 16), (16, 1), (i_t * 16, 0), (16, 16),
                              (1, 0))
        td.store(q, td.load(p, boundary_check=check, padding_option=pad))
    return out


def test_boundary_check_pads_and_a_missing_one_is_caught() -> None:
    x = np.random.default_rng(61).standard_normal((37, 11)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        out = run_on(padded_rows, (x, "zero", (0, 1)), backend)
        want = np.zeros((48, 16))
        want[:37, :11] = x
        np.testing.assert_array_equal(out, want)
        nan = run_on(padded_rows, (x, "nan", (0, 1)), backend)
        assert np.isnan(nan[37:]).all() and np.isnan(nan[:, 11:]).all()
    with pytest.raises(td.OutOfBoundsError):  # rows past T: what boundary_check would mask
        padded_rows(x, "zero", (1,))


def test_block_pointer_errors_name_the_call() -> None:
    @td.tile_kernel
    def plain_with_check(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = td.load(x, [t], boundary_check=(0,))
        return out

    @td.tile_kernel
    def odd_block(x):
        for pid in td.grid(1):
            td.load(td.make_block_ptr(x, (5,), (1,), (0,), (5,), (0,)))

    @td.tile_kernel
    def wrong_rank(x):
        for pid in td.grid(1):
            p = td.make_block_ptr(x, (8,), (1,), (0,), (8,), (0,))
            td.load(td.advance(p, (1, 2)))

    x = np.zeros(8, np.float32)
    with pytest.raises(td.TraceError, match="boundary_check= and padding_option= belong to a "
                                            "block pointer"):
        plain_with_check(x)
    with pytest.raises(td.ShapeError, match=r"block_shape \(5,\) must be powers of two"):
        odd_block(x)
    with pytest.raises(td.ShapeError, match="2 offsets for a block of rank 1"):
        wrong_rank(x)
