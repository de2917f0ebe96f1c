"""Spin locks (tiledsl/frontend/locks.py): Triton's layer-norm backward, whose programs take
turns adding their partial weight gradients into shared buffers under a lock, runs as written;
the NumPy backend runs such a grid one program at a time and checks that one lock guards each
element; a lock never released, and locked data reached under two locks, are errors."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from tests.support import gpu_backend, under_configs
from tiledsl.testing import assert_close

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = triton.language


# From Triton's tutorial python/tutorials/05-layer-norm.py, as written.
@triton.jit
def _layer_norm_bwd_dx_fused(DX, DY, DW, DB, X, W, B, M, V, Lock, stride, N, eps,
                             GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    # position of elements processed by this program
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    # offset data pointers to start at the row of interest
    X += row * stride
    DY += row * stride
    DX += row * stride
    # offset locks and weight/bias gradient pointer
    # each kernel instance accumulates partial sums for
    # DW and DB into one of GROUP_SIZE_M independent buffers
    # these buffers stay in the L2, which allow this kernel
    # to be fast
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    # load data to SRAM
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(M + row)
    rstd = tl.load(V + row)
    # compute dx
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    mean1 = tl.sum(xhat * wdy, axis=0) / N
    mean2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * mean1 + mean2)) * rstd
    # write-back dx
    tl.store(DX + cols, dx, mask=mask)
    # accumulate partial sums for dw/db
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = (dy).to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    # first store doesn't accumulate
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    # release lock
    tl.atomic_xchg(Lock, 0)

# Backward pass (total DW + total DB)


@triton.jit
def _layer_norm_bwd_dwdb(DW, DB, FINAL_DW, FINAL_DB, M, N,
                         BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.)
        db += tl.load(DB + offs, mask=mask, other=0.)
    sum_dw = tl.sum(dw, axis=0)
    sum_db = tl.sum(db, axis=0)
    tl.store(FINAL_DW + cols, sum_dw, mask=cols < N)
    tl.store(FINAL_DB + cols, sum_db, mask=cols < N)


@td.tile_kernel
def layer_norm_bwd(dy, x, w, b, m, v, BLOCK_SIZE, num_warps, eps, group):
    """The tutorial's LayerNorm.backward with its `ctx` values as arguments, and the number of
    partial-sum buffers `group` instead of its heuristic (at least 64), so that a few rows
    share each lock."""
    # heuristics for amount of parallel reduction stream for DG/DB
    N = w.shape[0]
    GROUP_SIZE_M = group
    # allocate output
    locks = torch.zeros(2 * GROUP_SIZE_M, dtype=torch.int32, device=w.device)
    _dw = torch.zeros((GROUP_SIZE_M, N), dtype=x.dtype, device=w.device)
    _db = torch.zeros((GROUP_SIZE_M, N), dtype=x.dtype, device=w.device)
    dw = torch.empty((N, ), dtype=w.dtype, device=w.device)
    db = torch.empty((N, ), dtype=w.dtype, device=w.device)
    dx = torch.empty_like(dy)
    # enqueue kernel using forward pass heuristics
    # also compute partial sums for DW and DB
    x_arg = x.reshape(-1, x.shape[-1])
    M, N = x_arg.shape
    _layer_norm_bwd_dx_fused[(M, )](  #
        dx, dy, _dw, _db, x, w, b, m, v, locks,  #
        x_arg.stride(0), N, eps,  #
        BLOCK_SIZE_N=BLOCK_SIZE,  #
        GROUP_SIZE_M=GROUP_SIZE_M,  #
        num_warps=num_warps)
    grid = lambda meta: [triton.cdiv(N, meta['BLOCK_SIZE_N'])]  # noqa: E731
    # accumulate partial sums in separate kernel
    _layer_norm_bwd_dwdb[grid](
        _dw, _db, dw, db, min(GROUP_SIZE_M, M), N,  #
        BLOCK_SIZE_M=32,  #
        BLOCK_SIZE_N=128, num_ctas=1)
    return dx, dw, db


def _layer_norm_grads(dy: np.ndarray, x: np.ndarray, w: np.ndarray, eps: float) -> tuple:
    """dx, dw, db of y = (x - mean) * rstd * w + b, in float64."""
    x, dy, w = (a.astype(np.float64) for a in (x, dy, w))
    rstd = 1 / np.sqrt(x.var(1, keepdims=True) + eps)
    xhat = (x - x.mean(1, keepdims=True)) * rstd
    wdy = w * dy
    dx = (wdy - (xhat * (xhat * wdy).mean(1, keepdims=True) + wdy.mean(1, keepdims=True))) * rstd
    return dx, (dy * xhat).sum(0), dy.sum(0)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_the_layer_norm_backward_adds_under_shared_locks(backend: str) -> None:
    rng = np.random.default_rng(3)
    M, N, eps = 37, 100, 1e-5  # 37 rows, 8 buffers: up to 5 programs share each lock
    x = (rng.standard_normal((M, N)) * 2 + 0.5).astype(np.float32)
    dy = rng.standard_normal((M, N)).astype(np.float32)
    w, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    mean = x.mean(1, dtype=np.float64).astype(np.float32)
    rstd = (1 / np.sqrt(x.var(1, dtype=np.float64) + eps)).astype(np.float32)
    expected = _layer_norm_grads(dy, x, w, eps)
    args = (dy, x, w, b, mean, rstd, 128, 4, eps, 8)
    for config, got in under_configs(layer_norm_bwd, args, backend, samples=1):
        for g, e in zip(got, expected):
            assert_close(g, e, np.float32)
    ir = layer_norm_bwd.source(*args)
    assert "locked = true" in ir and 'lock = "acquire"' in ir, ir  # (the race check's reason)
    src = layer_norm_bwd.source(*args, target="triton")
    assert src.count('sem="acq_rel"') == 4, src  # Triton's default, for all 4 atomics


@td.tile_kernel
def locked_counts(x, lock, group: int, data_group: int):
    """Each program adds its row into slot `row % data_group` of `acc` under lock
    `row % group` (Helion's spelling; with data_group != group the lock guards the wrong
    slots)."""
    acc = td.zeros([data_group, x.shape[1]], dtype=x.dtype)
    for row in td.grid(x.shape[0]):
        while td.atomic_cas(lock, [row % group], 0, 1) == 1:
            pass
        slot = row % data_group
        acc[slot, :] = acc[slot, :] + x[row, :]
        td.atomic_xchg(lock, [row % group], 0)
    return acc


def test_a_lock_guards_the_elements_its_programs_touch() -> None:
    x = np.random.default_rng(4).standard_normal((11, 6)).astype(np.float32)
    acc = locked_counts.run(x, np.zeros(4, np.int32), 4, 4, backend="numpy")
    expected = np.stack([x[s::4].astype(np.float64).sum(0) for s in range(4)])
    assert_close(acc, expected, np.float32)
    assert 'sem="acquire"' in locked_counts.source(x, np.zeros(4, np.int32), 4, 4,
                                                     target="triton")  # made so (relaxed)
    with pytest.raises(td.RaceError, match="element \\(0, 0\\) is accessed under the lock at "
                       "element 2 of its buffer, and was accessed under the lock at element 0"
                       ) as err:  # rows 0 and 2 add into slot 0 under locks 0 and 2
        locked_counts.run(x, np.zeros(4, np.int32), 4, 2, backend="numpy")
    assert "acc[slot, :] = acc[slot, :] + x[row, :]" in str(err.value)


def test_lock_errors() -> None:
    @td.tile_kernel
    def never_released(x, lock):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            while td.atomic_cas(lock, [0], 0, 1) == 1:
                pass
            out[t] = x[t]
        return out

    @td.tile_kernel
    def unlocked_sum(x):  # the same adds without a lock still race
        acc = td.zeros([2, x.shape[1]], dtype=x.dtype)
        for row in td.grid(x.shape[0]):
            acc[row % 2, :] = acc[row % 2, :] + x[row, :]
        return acc

    x = np.ones((8, 4), np.float32)
    with pytest.raises(td.TraceError, match="the lock taken by the `while` loop at line \\d+ "
                       "is not released"):
        never_released.run(x[:, 0], np.zeros(1, np.int32), backend="numpy")
    with pytest.raises(td.TraceError, match="the index of this store to 'acc'"):
        unlocked_sum.run(x, backend="numpy")
