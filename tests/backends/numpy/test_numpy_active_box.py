"""A `td.tile(stop)` loop's iterations run on their active programs alone where those form a
box of the grid (lowering/backends/numpy/active_box.py; issue 32: causal attention's idle
programs computed every iteration)."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.numpy import active_box, memory
from tiledsl.testing import relative_error


@td.tile_kernel
def causal_row_sums(x):
    b, m, n = x.shape
    out = td.empty((b, m), dtype=x.dtype)
    for bh, tm in td.tile(b, m, block_size=(1, None)):
        acc = td.zeros((tm,), dtype=x.dtype)
        for tk in td.tile(tm.end):  # keys up to the row tile's end: fewer for early tiles
            s = x[bh.begin, tm, tk]
            acc += td.sum(td.where(tm.index[:, None] >= tk.index[None, :], s, 0.0), axis=1)
        out[bh.begin, tm] = acc
    return out


def test_causal_loop_runs_on_the_active_box() -> None:
    x = np.random.default_rng(0).standard_normal((3, 37, 37))
    before = active_box.sliced
    out = causal_row_sums.run(x, config=td.Config(block_sizes=(8, 4)))
    assert relative_error(out, np.tril(x).sum(axis=2)) < 1e-12
    assert active_box.sliced > before


@td.tile_kernel
def causal_prefix_sums(x):
    b, n = x.shape
    out = td.empty((b, n), dtype=x.dtype)
    for bh, tm in td.tile(b, n, block_size=(1, None)):
        acc = td.zeros((tm,), dtype=x.dtype)
        for tk in td.tile(tm.end):  # keys up to the row tile's end, loaded by key tile alone
            v = x[bh.begin, tk]
            acc += td.sum(td.where(tm.index[:, None] >= tk.index[None, :], v[None, :], 0.0),
                          axis=1)
        out[bh.begin, tm] = acc
    return out


def test_key_tiles_inside_every_active_stop_load_as_plain_tiles(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Row tiles of 8, key tiles of 4: each iteration's key tile ends before the stop (the row
    tile's end) of every program still running it, so its range carries no per-program stop:
    the key load is a plain loop tile's (a recipe's view), never the runtime-stop path
    (memory.without_stops, a mask per call)."""
    x = np.random.default_rng(2).standard_normal((2, 37))
    monkeypatch.setattr(memory, "without_stops", lambda *a: pytest.fail("a per-program stop"))
    out = causal_prefix_sums.run(x, config=td.Config(block_sizes=(8, 4)))
    assert relative_error(out, np.cumsum(x, axis=1)) < 1e-12


@td.tile_kernel
def causal_swap(x):
    b, m, n = x.shape
    out = td.empty((b, m), dtype=x.dtype)
    for bh, tm in td.tile(b, m, block_size=(1, None)):
        p = td.zeros((tm,), dtype=x.dtype)
        q = td.zeros((tm,), dtype=x.dtype)
        for tk in td.tile(tm.end):  # carried values swapped: no merge may see another's write
            p, q = q + td.sum(x[bh.begin, tm, tk], axis=1), p
        out[bh.begin, tm] = p - q
    return out


def test_swapped_carried_values_merge_from_the_old_ones() -> None:
    x = np.random.default_rng(1).standard_normal((2, 29, 29))
    config = td.Config(block_sizes=(4, 4))
    expected = causal_swap.run(x, config=config)
    real = active_box.box_of
    try:
        active_box.box_of = lambda *a: None  # every program computes every iteration
        np.testing.assert_allclose(expected, causal_swap.run(x, config=config), rtol=1e-12)
    finally:
        active_box.box_of = real
