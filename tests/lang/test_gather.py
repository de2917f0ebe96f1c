"""Data-dependent indexing: gathers and scatters through index tiles (NumPy's advanced indexing,
tiles acting as slices), masked loads and stores (`td.load` / `td.store` with `mask=`), and a
tile over n indexing an offsets tensor of n + 1 entries, on every backend under sampled configs,
with ragged shapes; out-of-range indices; the errors for what cannot work."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import example, fresh, kernel_of, under_configs
from tiledsl.testing import assert_close

BACKENDS = ["numpy", "triton-interpret", "spatial"]


@td.tile_kernel
def gathered_stats(table, idx):
    """Per column, the sum and the max of the rows `idx` picks: reductions over a gathered axis,
    whose lanes past the last index tile are masked with each reduction's identity."""
    n = idx.shape[0]
    _, e = table.shape
    sums = td.empty((e,), dtype=td.float32)
    maxes = td.empty((e,), dtype=table.dtype)
    for te in td.tile(e):
        s = td.zeros((te,), dtype=td.float32)
        m = td.full((te,), -float("inf"), dtype=table.dtype)
        for tb in td.tile(n):
            rows = table[idx[tb], te]
            s += rows.sum(axis=0)
            m = td.maximum(m, rows.max(axis=0))
        sums[te] = s
        maxes[te] = m
    return sums, maxes


@td.tile_kernel
def scatter_rows(src, idx, out):
    """out[idx[i], :] = src[i, :]: a scatter, in place."""
    n, e = src.shape
    for tb, te in td.tile(n, e):
        out[idx[tb], te] = src[tb, te]


@td.tile_kernel
def gather_matmul(a, idx, b):
    """a[idx] @ b: a GEMM of gathered rows (as a mixture of experts gathers its tokens)."""
    _, k = a.shape
    _, n = b.shape
    out = td.empty((idx.shape[0], n), dtype=a.dtype)
    for tm, tn in td.tile(idx.shape[0], n):
        rows = idx[tm]
        acc = td.zeros((tm, tn), dtype=td.float32)
        for tk in td.tile(k):
            acc += a[rows, tk] @ b[tk, tn]
        out[tm, tn] = acc
    return out


@td.tile_kernel
def apart(x, i, j):
    """x[:, i, :, j] with index tiles i and j apart: their shape comes first (NumPy's rule)."""
    p, _, r, _ = x.shape
    out = td.empty((i.shape[0], p, r), dtype=x.dtype)
    for ti, tp in td.tile(i.shape[0], p):
        out[ti, tp, :] = x[tp, i[ti], :, j[ti]]
    return out


@td.tile_kernel
def masked(x):
    """The upper triangle of x (7 elsewhere) doubled where positive, -1 elsewhere (with Triton's
    cache hints, which change no value)."""
    m, n = x.shape
    out = td.full((m, n), -1.0, dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        v = td.load(x, [tm, tn], mask=tn.index[None, :] >= tm.index[:, None], other=7,
                    eviction_policy="evict_first")
        td.store(out, [tm, tn], v * 2.0, mask=v > 0, cache_modifier=".cs")
    return out


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reduction_over_a_gathered_axis_is_exact(backend: str) -> None:
    table = _rng().standard_normal((13, 37)).astype(np.float32)
    idx = _rng(1).integers(0, 13, 53).astype(np.int64)  # 53: a prime, so tiles end ragged
    rows = table.astype(np.float64)[idx]
    for config, (sums, maxes) in under_configs(gathered_stats, (table, idx), backend):
        assert_close(sums, rows.sum(axis=0), np.float32)
        assert_close(maxes, rows.max(axis=0), np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scatter_writes_the_rows_its_index_tile_names(backend: str) -> None:
    src = _rng().standard_normal((29, 11)).astype(np.float32)
    idx = _rng(1).permutation(31)[:29].astype(np.int32)  # two rows of out stay unwritten
    space = scatter_rows.config_space(src, idx, np.zeros((31, 11), np.float32), backend=backend)
    for config in [space.default(), *space.sample(2, seed=0)]:
        out = np.full((31, 11), 5.0, np.float32)
        scatter_rows.run(src, idx, out, backend=backend, config=config)
        want = np.full((31, 11), 5.0, np.float32)
        want[idx] = src
        np.testing.assert_array_equal(out, want)


def test_equal_indices_that_write_different_values_are_a_race_error() -> None:
    """A race on a GPU (Triton keeps one of the writes): the NumPy backend refuses it at the
    store's line under every config, whether the equal indices fall in one program's tile or
    in two programs'; equal indices that write equal values are one write."""
    src = _rng().standard_normal((29, 3)).astype(np.float32)
    idx = _rng(2).integers(0, 4, 29).astype(np.int32)
    space = scatter_rows.config_space(src, idx, np.zeros((4, 3), np.float32), backend="numpy")
    for config in [space.default(), *space.sample(3, seed=1)]:
        with pytest.raises(td.RaceError, match="store to 'out': equal indices write") as e:
            scatter_rows.run(src, idx, np.zeros((4, 3), np.float32), backend="numpy",
                             config=config)
        assert e.value.loc is not None and "out[idx[tb], te]" in e.value.loc.source_line()
    same = _rng(3).standard_normal((4, 3)).astype(np.float32)[idx]  # duplicates agree
    out = np.zeros((4, 3), np.float32)
    scatter_rows(same, idx, out)
    want = np.zeros((4, 3), np.float32)
    want[idx] = same
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_tiles_apart_put_their_shape_first(backend: str) -> None:
    x = _rng().standard_normal((23, 5, 3, 7)).astype(np.float32)
    i = _rng(1).integers(0, 5, 19).astype(np.int32)
    j = _rng(2).integers(0, 7, 19).astype(np.int64)
    for _, out in under_configs(apart, (x, i, j), backend):
        np.testing.assert_array_equal(out, x[:, i, :, j])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_masked_load_reads_other_and_a_masked_store_skips(backend: str) -> None:
    x = _rng().standard_normal((37, 29)).astype(np.float32)
    v = np.where(np.triu(np.ones((37, 29), bool)), x, 7.0)
    want = np.where(v > 0, 2 * v, -1.0)
    for _, out in under_configs(masked, (x,), backend):
        assert_close(out, want, np.float32)


def test_cache_hints_reach_triton_and_bad_ones_are_errors() -> None:
    x = _rng().standard_normal((9, 5)).astype(np.float32)
    src = masked.source(x, target="triton")
    assert "eviction_policy='evict_first')" in src and "cache_modifier='.cs')" in src

    @td.tile_kernel
    def both(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = td.load(x, [t], eviction_policy="evict_last", cache_modifier=".ca")
        return out

    @td.tile_kernel
    def unknown(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            td.store(out, [t], x[t], cache_modifier=".ca")  # a load's modifier
        return out

    with pytest.raises(td.TraceError, match="not both"):
        both(x[0])
    with pytest.raises(td.TraceError, match=r"cache_modifier='\.ca' is not one of '\.wb'"):
        unknown(x[0])


@td.tile_kernel
def twice_volatile(x):
    """Triton's `tl.load(p, volatile=True)`: each load reads memory, so two of one address
    stay two (CSE merges plain ones)."""
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.load(x, [t], volatile=True) + td.load(x, [t], volatile=True)
    return out


def test_a_volatile_load_reaches_triton_and_is_never_merged() -> None:
    x = _rng().standard_normal(37).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(twice_volatile.run(x, backend=backend), 2 * x)
    assert twice_volatile.source(x, target="triton").count("volatile=True)") == 2


@pytest.mark.parametrize("backend", ["numpy", "spatial"])
def test_an_index_outside_the_table_is_out_of_bounds(backend: str) -> None:
    mod = example("embedding")
    x, weight = mod.make_inputs(_rng(), {"batch": 1, "n": 37, "vocab": 11, "dim": 5})
    x[0, 20] = 11
    with pytest.raises(td.OutOfBoundsError) as info:
        mod.embedding.run(x, weight, backend=backend)
    text = str(info.value)
    assert "load from 'weight': index 11 is out of bounds for dimension 0 (size 11)" in text
    assert "embedding.py" in text and "weight[x_flat[tile_b], tile_e]" in text


def test_triton_masks_an_index_outside_the_table() -> None:
    mod = example("embedding")
    x, weight = mod.make_inputs(_rng(), {"batch": 1, "n": 37, "vocab": 11, "dim": 5})
    x[0, 20] = -3
    out = mod.embedding.run(x, weight, backend="triton-interpret")
    ok = np.arange(37)[None, :] != 20
    np.testing.assert_array_equal(out[ok], weight[x[ok]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gemm_of_gathered_rows(backend: str) -> None:
    a = _rng().standard_normal((23, 40)).astype(np.float16)
    b = _rng(1).standard_normal((40, 29)).astype(np.float16)
    idx = _rng(2).integers(0, 23, 37).astype(np.int32)
    want = a.astype(np.float64)[idx] @ b
    for _, out in under_configs(gather_matmul, (a, idx, b), backend):
        assert_close(out, want, np.float16)


def test_a_gather_is_pointer_arithmetic_and_compiles_for_sm_90() -> None:
    a = _rng().standard_normal((23, 64)).astype(np.float16)
    b = _rng(1).standard_normal((64, 32)).astype(np.float16)
    idx = _rng(2).integers(0, 23, 64).astype(np.int32)
    config = td.Config((32, 32, 32), 4, 3, group_m=4, tma=True)
    text = gather_matmul.source(a, idx, b, target="triton", config=config)
    assert "b_desc.load([" in text  # TMA for the plain operand, pointers for the gather:
    assert "tl.load(a_ptr + idx_tile[:, None] * 64 + offs_tk[None, :], mask=(idx_tile[:, " \
           "None] >= 0) & (idx_tile[:, None] < 23)" in text
    assert [r.problem for r in gather_matmul.compile(a, idx, b, config=config, arch="sm_90")] \
        == [None]
    ce = example("cross_entropy")
    text = ce.cross_entropy.source(*ce.make_inputs(_rng(), {"n": 37, "v": 45}), target="triton")
    assert "tl.load(logits_ptr + tmp_2, mask=(tmp_2 >= 0) & (tmp_2 < 1665) & mask_tile_n)" \
        in text  # one logit per row, through the flat view at tile_n.index * v + labels
    mod = example("jagged_sum")
    args = mod.make_inputs(_rng(), {"rows": 7, "m": 45, "max_len": 5}, np.float16)
    assert [r.problem for r in mod.jagged_sum.compile(*args, arch="sm_90")] == [None]


# ---- what cannot work ---------------------------------------------------------------------------
@td.tile_kernel
def offsets_of(x, offsets):
    n = x.shape[0]
    out = td.empty((n,), dtype=offsets.dtype)
    for tb in td.tile(n):
        out[tb] = offsets[tb]  # <- here
    return out


@td.tile_kernel
def write_offsets(x, offsets):
    for tb in td.tile(x.shape[0]):
        offsets[tb] = x[tb]


@td.tile_kernel
def unaligned_indices(x, i, j):
    out = td.empty((i.shape[0],), dtype=x.dtype)
    for ti, tj in td.tile(i.shape[0], j.shape[0]):
        out[ti] = x[i[ti], j[tj]].sum(axis=1)  # <- here
    return out


@td.tile_kernel
def bool_index(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[x[t] > 0]  # <- here
    return out


@td.tile_kernel
def scatter_race(src, idx):
    m, n = src.shape
    out = td.zeros((idx.shape[0],), dtype=src.dtype)
    for tm, tn in td.tile(m, n):
        out[idx[tm]] = src[tm, tn].sum(axis=1)  # <- here
    return out


def test_a_tile_indexes_its_own_size_or_an_offsets_tensor_one_longer() -> None:
    x = np.zeros(7, np.float32)
    np.testing.assert_array_equal(offsets_of(x, np.arange(8)), np.arange(7))
    # Only a load from an integer tensor: `x[t] + y[t]` with y one longer is still a mistake,
    # and so is a store into a longer tensor.
    for size, dtype, past in ((9, np.int64, False), (6, np.int64, True), (8, np.float32, False)):
        with pytest.raises(td.ShapeError, match="which has") as info:
            offsets_of(x, np.arange(size).astype(dtype))
        assert ("an offsets tensor of n + 1 entries" in str(info.value)) == (dtype == np.int64)
        assert ("run past the end" in str(info.value)) == past
        assert "out[tb] = offsets[tb]  # <- here" in str(info.value)
    with pytest.raises(td.ShapeError, match="which has 8"):
        write_offsets(np.arange(7), np.zeros(8, np.int64))


def test_index_tiles_that_do_not_broadcast_and_bool_indices_are_errors() -> None:
    x = np.zeros((5, 5), np.float32)
    with pytest.raises(td.ShapeError, match="index tiles of 'x\\[...\\]' have shapes \\(ti,\\) "
                       "and \\(tj,\\) which do not broadcast"):
        unaligned_indices(x, np.zeros(3, np.int32), np.zeros(4, np.int32))
    with pytest.raises(td.TraceError, match="td.load\\(x, \\[...\\], mask=m\\)"):
        bool_index(np.zeros(5, np.float32))


def test_a_scatter_that_leaves_out_a_grid_dimension_is_a_race() -> None:
    with pytest.raises(td.TraceError, match="does not use grid dimension 'tn'"):
        scatter_race(np.zeros((5, 40), np.float32), np.arange(5))


@td.tile_kernel
def centered_rows(x, width: td.constexpr):
    """Liger's group_norm reads masked-off lanes as the row's mean (`other=` a runtime
    value), so they add nothing once it is subtracted."""
    out = td.empty((x.shape[0], width), x.dtype)
    for r in td.grid(x.shape[0]):
        cols = td.arange(0, width)
        mean = td.mean(x[r, :])
        out[r, :] = td.load(x, [r, cols], mask=cols < x.shape[1], other=mean) - mean
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial"])
def test_a_runtime_value_fills_masked_lanes(backend: str) -> None:
    x = np.random.default_rng(5).standard_normal((3, 5)).astype(np.float32)
    want = np.zeros((3, 8))
    want[:, :5] = x - x.astype(np.float64).mean(1, keepdims=True)
    td.testing.assert_close(centered_rows.run(x, 8, backend=backend), want, np.float32)
    with pytest.raises(td.TraceError, match="other= is a number or a scalar or tile value"):
        @td.tile_kernel
        def bad_other(x):
            for r in td.grid(x.shape[0]):
                x[r, :] = td.load(x, [r, td.arange(0, 8)], mask=td.arange(0, 8) < 5, other="0")
        bad_other(x)


@td.tile_kernel
def last_of_cumsum(x, out, B: td.constexpr):
    """FlagGems' unique: `tl.store(ptr + tl.zeros_like(i0), cumsum, mask=i0 == B - 1)` writes
    one lane of a tile to element 0, and every lane reads element p."""
    for p in td.grid(out.shape[0]):
        i0 = td.arange(0, B)
        c = td.cumsum(td.load(x, [i0], mask=i0 < x.shape[0], other=0))
        td.store(out, [p + td.zeros_like(i0)], c + td.load(x, [p + i0 * 0]), mask=i0 == B - 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_tile_of_one_value_addresses_every_lane(backend: str) -> None:
    """Written as a scalar in Triton, such an index used to leave a scalar pointer beside a
    tile value: a crash inside Triton."""
    x = _rng().integers(1, 9, 37).astype(np.int64)
    out = np.zeros(2, np.int64)
    run = last_of_cumsum.run(x, out, 64, backend=backend)
    assert run is None and list(out) == [x.sum() + x[0], x.sum() + x[1]]
