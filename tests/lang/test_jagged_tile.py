"""`td.jagged_tile(lengths)`, Helion's `hl.jagged_tile`: a loop to the longest row whose rows'
lanes past their own lengths are masked in every load and store that uses them."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import under_configs

BACKENDS = ["numpy", "triton-interpret"]


@td.tile_kernel
def jagged_mean(x_data, x_offsets, x_feature_counts, max_M: td.constexpr):
    """Helion's `_jagged_mean_kernel_default` (examples/jagged_mean.py) as written, `td.` for
    `hl.`/`torch.`: two jagged loops, over each row's features and its elements; the load
    through flat indices and the store of `out[tile_b, tile_m]` carry the rows' masks."""
    num_rows = x_offsets.shape[0] - 1
    out = td.zeros((num_rows, max_M), dtype=x_data.dtype)
    x_flat = x_data.view(-1)
    for tile_b in td.tile(num_rows):
        starts = x_offsets[tile_b]
        ends = x_offsets[tile_b.index + 1]
        nnz = ends - starts
        feature_counts = x_feature_counts[tile_b]
        for tile_m in td.jagged_tile(feature_counts):
            row_sums = td.zeros([tile_b, tile_m], dtype=x_data.dtype)
            for tile_k in td.jagged_tile(nnz):
                flat_indices = (starts[:, None] + tile_k.index[None, :])[:, :, None] * max_M
                flat_indices = flat_indices + tile_m.index[None, None, :]
                x_slice = td.load(x_flat, [flat_indices])
                row_sums = row_sums + x_slice.sum(axis=1)
            nnz_float = nnz.to(x_data.dtype)
            nnz_expanded = nnz_float[:, None]
            result = td.where(nnz_expanded > 0, row_sums / nnz_expanded, 0.0)
            out[tile_b, tile_m] = result
    return out


def _inputs() -> tuple:
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 9, 13)
    lengths[3] = 0  # an empty row
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    x = rng.standard_normal((offsets[-1], 5)).astype(np.float32)
    counts = rng.integers(1, 6, 13).astype(np.int32)
    return x, offsets, counts, 5


def _reference(x: np.ndarray, offsets: np.ndarray, counts: np.ndarray, m: int) -> np.ndarray:
    out = np.zeros((len(offsets) - 1, m))
    for i, (s, e, f) in enumerate(zip(offsets[:-1], offsets[1:], counts)):
        if e > s:
            out[i, :f] = x[s:e, :f].astype(np.float64).mean(0)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_helion_jagged_mean_as_written(backend: str) -> None:
    args = _inputs()
    expected = _reference(*args)
    for config, out in under_configs(jagged_mean, args, backend, samples=3):
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6, err_msg=str(config))


@td.tile_kernel
def jagged_stats(x, offsets, w, centre: float):
    """Helion's jagged_layer_norm reduces values computed from the loads over the jagged
    axis, `((v - mean) ** 2).sum(1)`, and jagged attention contracts over it (`p @ v`): the
    lanes past each row's length must not count, whatever they compute."""
    B = offsets.shape[0] - 1
    sq = td.empty((B,), dtype=td.float32)
    top = td.empty((B,), dtype=td.float32)
    prod = td.empty((B, w.shape[1]), dtype=td.float32)
    for tb in td.tile(B):
        starts = offsets[tb]
        lens = offsets[tb.index + 1] - starts
        s = td.zeros([tb], dtype=td.float32)
        m = td.full([tb], float("-inf"), dtype=td.float32)
        acc = td.zeros((tb, w.shape[1]), td.float32)
        for tk in td.jagged_tile(lens):
            v = td.load(x, [starts[:, None] + tk.index[None, :]])
            s = s + ((v - centre) * (v - centre)).sum(dim=1)
            m = td.maximum(m, (1.0 - v).amax(dim=1))
            acc += (v + 1.0) @ td.load(w, [tk.index[:, None], td.arange(0, w.shape[1])[None, :]],
                                       mask=tk.index[:, None] < w.shape[0])
        sq[tb] = s
        top[tb] = m
        prod[tb, :] = acc
    return sq, top, prod


@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_and_dots_over_a_jagged_axis_count_each_row_s_lanes(backend: str) -> None:
    """Sampled configs hold several rows in a tile (the default's row block is 1 on NumPy),
    so the shorter rows have lanes up to the longest: they used to count (NaN, or 1 each)."""
    offsets = np.array([0, 3, 5, 9, 10, 30, 47, 47], dtype=np.int64)
    x = np.random.default_rng(9).standard_normal(47).astype(np.float32)
    w = np.random.default_rng(10).standard_normal((20, 16)).astype(np.float32)
    rows = [x[s:e].astype(np.float64) for s, e in zip(offsets[:-1], offsets[1:])]
    want_sq = [((r - 0.5) ** 2).sum() for r in rows]
    want_top = [(1 - r).max() if r.size else -np.inf for r in rows]
    want_prod = np.stack([(r + 1) @ w[:r.size] for r in rows])
    for config, (sq, top, prod) in under_configs(jagged_stats, (x, offsets, w, 0.5), backend,
                                                 samples=3):
        td.testing.assert_close(sq, np.array(want_sq), np.float32)
        np.testing.assert_array_equal(np.isinf(top), np.isinf(want_top))
        td.testing.assert_close(top[:-1], np.array(want_top[:-1]), np.float32)
        td.testing.assert_close(prod, want_prod, np.float32)


def test_a_mean_over_a_jagged_axis_is_each_row_s_mean() -> None:
    @td.tile_kernel
    def row_means(x, offsets):
        B = offsets.shape[0] - 1
        out = td.empty((B,), dtype=td.float32)
        for tb in td.tile(B):
            starts = offsets[tb]
            lens = offsets[tb.index + 1] - starts
            for tk in td.jagged_tile(lens, block_size=32):  # one tile holds each whole row
                out[tb] = (td.load(x, [starts[:, None] + tk.index[None, :]]) * 2.0).mean(dim=1)
        return out

    offsets = np.array([0, 3, 5, 9, 10, 30], dtype=np.int64)
    x = np.random.default_rng(11).standard_normal(30).astype(np.float32)
    want = [2 * x[s:e].astype(np.float64).mean() for s, e in zip(offsets[:-1], offsets[1:])]
    for backend in BACKENDS:
        for config, out in under_configs(row_means, (x, offsets), backend, samples=2):
            td.testing.assert_close(out, np.array(want), np.float32)


@td.tile_kernel
def row_orders(x, offsets):
    B = offsets.shape[0] - 1
    up = td.zeros((B, 32), dtype=td.float32)
    down = td.zeros((B, 32), dtype=td.float32)
    suffix = td.zeros((B, 32), dtype=td.float32)
    for tb in td.tile(B):
        starts = offsets[tb]
        lens = offsets[tb.index + 1] - starts
        for tk in td.jagged_tile(lens, block_size=32):  # one tile holds each whole row
            v = td.exp(td.load(x, [starts[:, None] + tk.index[None, :]]))
            up[tb, tk] = td.sort(v, dim=1)
            down[tb, tk] = td.sort(v, dim=1, descending=True)
            suffix[tb, tk] = td.associative_scan(v, 1, lambda a, b: a + b, reverse=True)
    return up, down, suffix


def test_sorts_and_reversed_scans_along_a_jagged_axis_see_each_row_s_lanes() -> None:
    """The lanes past a row's length come first in a reversed scan and, by value, anywhere
    in a sort (exp of a masked load's 0 is 1): they used to count, up to the longest row."""
    offsets = np.array([0, 3, 5, 9, 10, 30], dtype=np.int64)
    x = np.random.default_rng(12).standard_normal(30).astype(np.float32)
    want = np.zeros((3, 5, 32))
    for i, (s, e) in enumerate(zip(offsets[:-1], offsets[1:])):
        r = np.exp(x[s:e].astype(np.float64))
        want[:, i, :e - s] = np.sort(r), np.sort(r)[::-1], np.cumsum(r[::-1])[::-1]
    for backend in BACKENDS:
        for config, outs in under_configs(row_orders, (x, offsets), backend, samples=2):
            for out, w in zip(outs, want):
                td.testing.assert_close(out, w, np.float32)


def test_compiles_for_sm90() -> None:
    pytest.importorskip("triton")
    (report,) = jagged_mean.compile(*_inputs(), arch="sm_90")
    assert report.spill_bytes == 0


def test_lengths_must_be_integers_of_one_row_dimension() -> None:
    @td.tile_kernel
    def float_lengths(x, w):
        out = td.zeros_like(x)
        for tb in td.tile(x.shape[0]):
            for tk in td.jagged_tile(w[tb]):
                out[tb, tk] = x[tb, tk]
        return out

    x = np.ones((4, 6), np.float32)
    with pytest.raises(td.TraceError, match="integer scalar or a 1-D integer tile"):
        float_lengths(x, np.ones(4, np.float32))
