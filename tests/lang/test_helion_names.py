"""Helion's spellings (tiledsl/lang/helion_names.py): a kernel written with `hl.specialize`,
`hl.static_range`, `hl.tile_begin`... and `hl.cumprod` runs with `td.` in place of `hl.`."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import under_configs


@td.tile_kernel
def scaled_cumprod(x, repeats: int):
    m, n = x.shape
    n = td.specialize(n)
    k = td.specialize(repeats)  # an int argument: traced once per value
    out = td.empty((m, n), dtype=td.float32)
    spans = td.empty((m, 3), dtype=td.int32)
    for tile_m in td.tile(m, block_size=4):
        acc = td.zeros((tile_m, n), dtype=td.float32)
        for _ in td.static_range(k):
            acc = acc + x[tile_m, :]
        rows = td.subscript(td.tile_index(tile_m), [slice(None), None])
        out[tile_m, :] = td.cumprod(acc, dim=1) + 0 * rows
        spans[tile_m, 0] = td.zeros((tile_m,), dtype=td.int32) + td.tile_begin(tile_m)
        spans[tile_m, 1] = td.zeros((tile_m,), dtype=td.int32) + td.tile_end(tile_m)
        spans[tile_m, 2] = td.zeros((tile_m,), dtype=td.int32) + td.tile_id(tile_m) \
            * td.tile_block_size(tile_m)
    return out, spans


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_helion_spellings(backend: str) -> None:
    x = np.random.default_rng(0).uniform(0.3, 0.6, (10, 7)).astype(np.float32)
    rows = np.arange(10)
    begin = rows // 4 * 4
    want_spans = np.stack([begin, np.minimum(begin + 4, 10), begin], axis=1)
    for repeats in (2, 3):
        expected = np.cumprod(repeats * x.astype(np.float64), axis=1)
        for config, (out, spans) in under_configs(scaled_cumprod, (x, repeats), backend):
            np.testing.assert_allclose(out, expected, rtol=1e-5, err_msg=str(config))
            np.testing.assert_array_equal(spans, want_spans)
    with pytest.raises(td.TraceError, match="td.specialize\\(\\) takes a size"):
        bad_specialize(x)


@td.tile_kernel
def bad_specialize(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        n = td.specialize(td.sum(x[t, 0]))
        out[t, :] = x[t, :] * n
    return out


@td.tile_kernel
def normalized_rows(x):
    """Helion's matmul_layernorm and rms_norm_bwd spellings: `register_reduction_dim`,
    `torch.var_mean(..., correction=0)`, `x.new_empty`, `x.new_zeros`."""
    m = x.shape[0]
    n = td.register_reduction_dim(x.size(1))
    out = x.new_empty([m, n])
    stats = x.new_zeros((m, 3), dtype=td.float32)
    for tile_m in td.tile(m):
        row = x[tile_m, :].to(td.float32)
        var, mean = td.var_mean(row, dim=-1, keepdim=True, correction=0)
        out[tile_m, :] = (row - mean) * td.rsqrt(var + 1e-5)
        stats[tile_m, 0] = row.var(dim=-1)
        stats[tile_m, 1] = row.std(dim=1, correction=0)
        stats[tile_m, 2] = mean.reshape(tile_m)
    return out, stats


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_torch_statistics_and_new_tensors(backend: str) -> None:
    x = np.random.default_rng(9).standard_normal((11, 7)).astype(np.float32)
    out, stats = normalized_rows.run(x, backend=backend)
    x64 = x.astype(np.float64)
    mean, var = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    td.testing.assert_close(out, (x64 - mean) / np.sqrt(var + 1e-5), np.float32)
    td.testing.assert_close(stats, np.stack([x64.var(1, ddof=1), x64.std(1), mean[:, 0]], 1),
                            np.float32)


@td.tile_kernel
def block_sums(x):
    """Helion's rms_norm_bwd: `hl.tile(mb_cta.begin, mb_cta.end)` walks the rows of the
    enclosing tile (tiledsl's `td.tile(t.end, start=t.begin)`), and `hl.tile(0, t.end)` the
    rows up to its end."""
    m, n = x.shape
    out = td.zeros((m,), td.float32)
    for mb_cta in td.tile(m):
        acc = td.zeros((n,), td.float32)
        for mb in td.tile(mb_cta.begin, mb_cta.end):
            acc += td.sum(x[mb, :], axis=0)
        for tk in td.tile(0, mb_cta.end, block_size=None):  # hl.tile(0, end): [0, end)
            acc += td.sum(x[tk, :], axis=0) * 0.5 ** 10
        out[mb_cta] = td.zeros((mb_cta,), td.float32) + td.sum(acc)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_tile_over_an_enclosing_tiles_span(backend: str) -> None:
    x = np.random.default_rng(12).standard_normal((21, 5)).astype(np.float32)
    for config, out in under_configs(block_sums, (x,), backend, samples=1):
        b = config.block_sizes[0]
        sums = [x[i:i + b].astype(np.float64).sum() + x[:i + b].astype(np.float64).sum() / 1024
                for i in range(0, 21, b)]
        td.testing.assert_close(out, np.repeat(sums, b)[:21], np.float32)


@td.tile_kernel
def causal_rowsum(x, use_id: bool):
    """Helion's mamba2_chunk_scan: `hl.tile((tile_m.id + 1) * block_m, block_size=block_k)`
    with `block_k = hl.register_block_size(32, 32)`, a block size free of any one dimension."""
    n = x.shape[0]
    bm = td.register_block_size(n)
    bk = td.register_block_size(32, 32)
    out = td.empty((n,), dtype=x.dtype)
    for tm in td.tile(n, block_size=bm):
        acc = td.zeros([tm], dtype=td.float32)
        stop = (tm.id + 1) * bm if use_id else tm.end
        for tk in td.tile(stop, block_size=bk):
            acc += td.where(tm.index[:, None] >= tk.index[None, :], x[tm, tk], 0.0).sum(axis=1)
        out[tm] = acc
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_two_argument_block_size_cuts_tiles_of_any_size(backend: str) -> None:
    x = np.random.default_rng(14).standard_normal((45, 45)).astype(np.float32)
    want = np.array([x[i, :i + 1].astype(np.float64).sum() for i in range(45)])
    for use_id in (True, False):  # a stop of no static bound, and one of 45
        for config, out in under_configs(causal_rowsum, (x, use_id), backend, samples=2):
            td.testing.assert_close(out, want, np.float32)


def test_a_dimension_s_block_size_cuts_a_runtime_stop_up_to_it() -> None:
    """Helion's one-argument register_block_size is the largest block: a loop with a runtime
    stop takes a block of its own up to it (it was refused)."""
    @td.tile_kernel
    def tied(x):
        n = x.shape[0]
        bk = td.register_block_size(n)
        out = td.empty((n,), dtype=x.dtype)
        for tm in td.tile(n, block_size=4):
            acc = td.zeros([tm], dtype=td.float32)
            for tk in td.tile((tm.id + 1) * 16, block_size=bk):
                acc += td.sum(x[tm, tk], axis=1)
            out[tm] = acc
        return out

    x = np.random.default_rng(5).standard_normal((20, 20)).astype(np.float32)
    rows = np.arange(20)
    want = [x[i, :min((i // 4 + 1) * 16, 20)].astype(np.float64).sum() for i in rows]
    for backend in ("numpy", "triton-interpret"):
        td.testing.assert_close(tied.run(x, backend=backend), np.array(want), np.float32)


@td.tile_kernel
def two_phases(x, w):
    """Helion's split_k_barrier: `hl.barrier()` between two grids (they run in order), and
    `w.contiguous().view(-1)` (gather_gemv) on an argument."""
    (n,) = x.shape
    tmp = td.zeros(x.shape, dtype=x.dtype)
    out = td.empty(x.shape, dtype=x.dtype)
    w_flat = w.contiguous().view(-1)
    for t in td.tile(n):
        tmp[t] = x[t] * 2.0
    td.barrier()
    for t in td.tile(n):
        out[t] = tmp[t] + w_flat[t]
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_barrier_between_grids_and_contiguous_arguments(backend: str) -> None:
    x = np.random.default_rng(18).standard_normal(37).astype(np.float32)
    w = np.random.default_rng(19).standard_normal((37, 1)).astype(np.float32)
    for config, out in under_configs(two_phases, (x, w), backend, samples=1):
        td.testing.assert_close(out, 2.0 * x + w[:, 0], np.float32)
    assert td.PowerOfTwoFragment(16, 64, 32).choices == (16, 32, 64)  # helion.autotuner's


def test_a_barrier_in_a_grid_says_what_to_write_and_a_view_s_copy_copies() -> None:
    @td.tile_kernel
    def in_grid(x):
        for t in td.tile(x.shape[0]):
            td.barrier()
            x[t] = x[t] + 1.0

    @td.tile_kernel
    def copied_view(x):
        y = x.T.contiguous()  # a copy: transposing in place through the view would race
        for t in td.tile(x.shape[0]):
            x[t, :] = y[t, :]

    with pytest.raises(td.TraceError, match="inside a grid") as e:
        in_grid(np.ones(4, np.float32))
    assert "grids of one kernel run one after the other" in e.value.hint
    x = np.random.default_rng(20).standard_normal((4, 4)).astype(np.float32)
    copied_view(want := x.copy())  # `x.T.contiguous()` is a copy, as torch's: x becomes x.T
    np.testing.assert_array_equal(want, x.T)


@td.tile_kernel
def flex_spellings(x):
    """Helion's flex attention: `tile.begin + hl.arange(tile.block_size)` (the tile's indices),
    `tile.block_size` as a shape entry, and `v.new_full([], n)` on a tile value."""
    m, n = x.shape
    out = td.empty_like(x)
    for tile_m in td.tile(m):
        rows = tile_m.begin + td.arange(tile_m.block_size)
        v = x[tile_m, :]
        acc = td.zeros([tile_m.block_size, n], dtype=td.float32)
        out[tile_m, :] = v + rows[:, None].to(td.float32) + acc + v.new_full([], 3) + \
            v.new_ones(v.shape)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_helion_tile_block_size_spellings(backend: str) -> None:
    x = np.random.default_rng(43).standard_normal((45, 7)).astype(np.float32)
    for config, out in under_configs(flex_spellings, (x,), backend):
        td.testing.assert_close(out, x + np.arange(45)[:, None] + 4.0, np.float32)


@td.tile_kernel
def dropout_2d(x, p: float, seed: int):
    """Helion's low_mem_dropout draws `hl.rand([tile], seed=seed)`; in two dimensions, at each
    element's row-major index; `m % block` of a registered block size (Helion's
    attention_backward asserts it divides)."""
    m, n = x.shape
    block_m = td.register_block_size(m)
    assert m % block_m >= 0  # (an int: the config's block size)
    out = td.empty_like(x)
    for tm, tn in td.tile([m, n], block_size=[block_m, None]):
        keep = td.rand([tm, tn], seed=seed) > p
        out[tm, tn] = td.where(keep, x[tm, tn] / (1 - p), 0.0)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_helion_rand_of_tiles(backend: str) -> None:
    x = np.random.default_rng(44).standard_normal((13, 20)).astype(np.float32)
    keep = td.philox.rand(5, np.arange(13 * 20)).reshape(13, 20) > 0.3
    for config, out in under_configs(dropout_2d, (x, 0.3, 5), backend, samples=1):
        td.testing.assert_close(out, np.where(keep, x / 0.7, 0.0), np.float32)


def test_a_tile_value_has_the_kernel_s_device() -> None:
    """Helion's flex attention's `mask_mod` makes tiles on `b.device` of a tile value, and
    `v.new_ones(size=...)` with torch's keyword."""
    torch = pytest.importorskip("torch")

    @td.tile_kernel
    def plus_one(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            v = x[t]
            out[t] = v + torch.ones_like(v, device=v.device) + v.new_ones(size=v.shape)
        return out

    x = np.random.default_rng(45).standard_normal(37).astype(np.float32)
    np.testing.assert_allclose(plus_one(x), x + 2, rtol=1e-6, atol=1e-6)
