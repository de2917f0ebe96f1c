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
