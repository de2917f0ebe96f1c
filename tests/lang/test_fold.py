"""`td.reduce` (`tl.reduce`, Helion's `hl.reduce`): a reduction by a user's combine function
(tiledsl/lang/scans.py, the IR op `fold`), as FlagGems writes its products, Welford variances
and `all`, against NumPy in float64 on ragged rows, on every backend under sampled configs; rows
of a jagged tile with no lane give `other`; the errors; and the code compiling for sm_90."""

from __future__ import annotations

import numpy as np
import pytest
from support import gpu_backend, under_configs

import tiledsl as td

BACKENDS = ["numpy", "triton-interpret", "spatial", gpu_backend()]


def _mul(a, b):
    return a * b


def _welford(mean_x, count_x, m_x, mean_y, count_y, m_y):  # FlagGems' var_mean.welford_func
    count = count_x + count_y
    _count = td.maximum(count, 1)
    mc_x = mean_x * count_x
    mc_y = mean_y * count_y
    mean = (mc_x + mc_y) / _count
    m = m_x + mc_x * mean_x + m_y + mc_y * mean_y - count * mean * mean
    return mean, count, m


def _both(a, b):  # FlagGems' all.reduce_all: `and` in a combine function is elementwise
    return a and b


def _argmax_pair(va, ia, vb, ib):  # the larger value; on ties the first position
    take = (va > vb) | ((va == vb) & (ia < ib))
    return td.where(take, va, vb), td.where(take, ia, ib)


@td.tile_kernel
def folds(x):
    m, n = x.shape
    prod = td.empty((m,), dtype=x.dtype)
    var = td.empty((m, 1), dtype=x.dtype)
    best = td.empty((m,), dtype=td.int32)
    every = td.empty((m,), dtype=td.int1)
    total = td.empty((1,), dtype=x.dtype)
    for tm in td.tile(m):
        for tn in td.tile(n, block_size=64):  # one tile over the row, ragged (n < 64)
            row = x[tm, tn]
            prod[tm] = td.reduce(row, 1, _mul)  # Triton's order: no identity fills the edge
            mean, count, m2 = td.reduce((row, td.full(row.shape, 1.0, x.dtype), td.zeros_like(
                row)), axis=1, combine_fn=_welford, keep_dims=True)
            var[tm, :] = m2 / count
            lanes = td.broadcast_to(tn.index[None, :], row.shape)
            _, best[tm] = td.reduce((row, lanes), 1, _argmax_pair)
            every[tm] = td.reduce(_both, row > -2.0, dim=1)  # Helion's order
    for tn in td.tile(n, block_size=64):  # every axis at once
        total[:] = td.reduce(x[0:2, tn], None, lambda a, b: a + b, keep_dims=True).reshape(1)
    return prod, var, best, every, total


@pytest.mark.parametrize("backend", BACKENDS)
def test_folds_match_numpy(backend: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.5, (7, 37)).astype(np.float32)
    x[2, 5:9] = 1.75  # ties: the first position wins
    x[4, 3] = -3.0
    x64 = x.astype(np.float64)
    for config, (prod, var, best, every, total) in under_configs(folds, (x,), backend):
        td.testing.assert_close(prod, x64.prod(1), np.float32)
        td.testing.assert_close(var, x64.var(1, keepdims=True), np.float32)
        np.testing.assert_array_equal(best, x.argmax(1), err_msg=str(config))
        np.testing.assert_array_equal(every, (x > -2).all(1), err_msg=str(config))
        td.testing.assert_close(total, x64[:2].sum(keepdims=True).ravel(), np.float32)


@td.tile_kernel
def row_maxima(x, offsets):
    B = offsets.shape[0] - 1
    out = td.full((B,), 99.0, dtype=td.float32)
    for tb in td.tile(B):
        starts = offsets[tb]
        lens = offsets[tb.index + 1] - starts
        for tk in td.jagged_tile(lens, block_size=32):
            v = td.load(x, [starts[:, None] + tk.index[None, :]])  # 0.0 past a row's end
            out[tb] = td.reduce(td.maximum, v, 1, other=-7.5)
    return out


def test_a_jagged_row_folds_its_own_lanes_and_an_empty_one_gives_other() -> None:
    """Row 1 is empty: alone in its tile of rows, the loop over its lanes takes no trip; beside
    row 0 it does, and the fold of no lane is `other`."""
    offsets = np.array([0, 3, 3, 9, 10, 30], dtype=np.int64)
    x = -np.random.default_rng(12).uniform(1, 2, 30).astype(np.float32)  # all below the fill
    want = np.array([x[s:e].max() if e > s else 0 for s, e in zip(offsets[:-1], offsets[1:])])
    for backend in ("numpy", "triton-interpret"):
        for config, out in under_configs(row_maxima, (x, offsets), backend, samples=3):
            want[1] = -7.5 if config.block_sizes[0] > 1 else 99.0
            np.testing.assert_array_equal(out, want, err_msg=f"{backend} {config}")


def test_folds_compile_for_sm90() -> None:
    pytest.importorskip("triton")
    x = np.ones((64, 37), np.float32)
    assert ", 1, _combine_" in folds.source(x, target="triton")
    (report,) = folds.compile(x, arch="sm_90")[:1]
    assert ".target sm_90" in report.ptx and report.spill_bytes == 0


def test_bad_uses_are_clear_errors() -> None:
    @td.tile_kernel
    def int_other(x):
        out = td.empty((x.shape[0],), dtype=x.dtype)
        for t in td.tile(x.shape[0]):
            out[t] = td.reduce(x[t, :], 1, td.maximum, other=float("-inf"))
        return out

    @td.tile_kernel
    def outside(x):
        out = td.empty((x.shape[0],), dtype=x.dtype)
        for t in td.tile(x.shape[0]):
            s = x[t, :].sum()
            out[t] = td.reduce(x[t, :], 1, lambda a, b: a + b + s)  # noqa: B023
        return out

    with pytest.raises(td.TraceError, match="does not fit a int32 tile") as e:
        int_other(np.ones((4, 8), np.int32))
    assert "other=float(\"-inf\")" in str(e.value)
    with pytest.raises(td.TraceError, match="td.reduce: combine_fn uses a value from outside"):
        outside(np.ones((4, 8), np.float32))
