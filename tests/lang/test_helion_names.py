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
