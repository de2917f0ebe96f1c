"""td.argmax / td.argmin: NumPy's positions (the first NaN, the first of ties) on every backend,
over padded and ragged tiles, after a runtime start, under sampled configs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from support import under_configs

BACKENDS = ["numpy", "triton-interpret", "spatial"]
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f64": np.float64,
          "i8": np.int8, "i32": np.int32}


@td.tile_kernel
def row_positions(x):
    m, n = x.shape
    hi = td.empty((m, 1), dtype=td.int32)
    lo = td.empty((m,), dtype=td.int32)
    for tm in td.tile(m):
        row = x[tm, :]  # the whole row: a constant dimension (padded on Triton)
        hi[tm, :] = row.argmax(axis=1, keepdims=True)
        lo[tm] = td.argmin(row, axis=1)
    return hi, lo


@td.tile_kernel
def column_argmin(x):
    m, n = x.shape
    out = td.empty((n,), dtype=td.int32)
    for tn in td.tile(n):
        out[tn] = x[:, tn].argmin(axis=0)
    return out


@td.tile_kernel
def argmax_from(x, s: int):
    """The position of each row's maximum among columns s.. (a loop with a runtime start)."""
    m, n = x.shape
    out = td.empty((m,), dtype=td.int32)
    for tm in td.tile(m):
        best = td.full((tm,), -float("inf"), dtype=td.float32)
        at = td.full((tm,), -1, dtype=td.int32)
        for tn in td.tile(n, start=s):
            tile = x[tm, tn].astype(td.float32)
            top = tile.max(axis=1)
            wins = (top > best) | ((top != top) & (best == best)) | (at < 0)
            at = td.where(wins, tn.begin + tile.argmax(axis=1), at)
            best = td.where(wins, top, best)
        out[tm] = at
    return out


def data(shape: tuple[int, int], dtype: type, seed: int = 0) -> np.ndarray:
    """Random values with many ties, rows at the masking value, and (for floats) NaNs."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        x = rng.integers(-4, 4, shape).astype(dtype)  # ties everywhere
        x[1] = np.iinfo(dtype).min  # every lane equals argmax's mask value
        x[2] = np.iinfo(dtype).max
        return x
    x = rng.standard_normal(shape).round(1).astype(dtype)  # rounded: ties
    x[1] = -np.inf
    x[2] = np.inf
    x[3, 5:9] = np.nan
    x[4, -1] = np.nan  # in the last, partial tile
    return x


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("backend", BACKENDS)
def test_positions_in_a_row_match_numpy(backend: str, dtype: str) -> None:
    x = data((37, 45), DTYPES[dtype])
    wide = x.astype(np.float64)
    samples = 3 if backend == "numpy" or dtype == "f32" else 0  # the interpreter: ~1.5 s a run
    for config, (hi, lo) in under_configs(row_positions, (x,), backend, samples=samples):
        np.testing.assert_array_equal(hi, wide.argmax(axis=1, keepdims=True), f"{config}")
        np.testing.assert_array_equal(lo, wide.argmin(axis=1), f"{config}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_positions_down_columns_match_numpy(backend: str) -> None:
    x = np.ascontiguousarray(data((37, 45), np.float32, seed=1).T)  # NaN, -inf columns
    for config, out in under_configs(column_argmin, (x,), backend, samples=3):
        np.testing.assert_array_equal(out, x.argmin(axis=0), err_msg=f"{backend} {config}")


@pytest.mark.parametrize("backend, start", [
    (b, s) if b != "triton-interpret" else  # the interpreter takes 15 s here: the positions
    pytest.param(b, s, marks=pytest.mark.slow) for b in BACKENDS for s in (0, 13, 40)])  # above run on it
def test_lanes_before_a_runtime_start_never_win_a_tie(backend: str, start: int) -> None:
    """Masked lanes before the start hold -inf, as do rows 0-4: the first in-range lane wins."""
    x = data((37, 101), np.float32, seed=2)
    x[:5] = -np.inf
    x[7, 50:60] = np.nan
    ref = x[:, start:].astype(np.float64).argmax(axis=1) + start
    samples = 1 if backend == "triton-interpret" else 3
    for config, out in under_configs(argmax_from, (x, start), backend, samples=samples):
        np.testing.assert_array_equal(out, ref, err_msg=f"{backend} {config}")


def test_the_generated_triton_uses_numpys_rule() -> None:
    src = row_positions.source(data((37, 45), np.float32), target="triton")
    assert "def _argmax_nan(a, ia, b, ib):" in src and "def _argmin_nan(a, ia, b, ib):" in src
    assert "tl.reduce((x_tile, lanes), 1, _argmax_nan, keep_dims=True)[1]" in src


@td.tile_kernel
def two_axes(x):
    out = td.empty((1,), dtype=td.int32)
    for t in td.tile(1):
        out[t] = td.argmax(x[:, :], axis=(0, 1))
    return out


@td.tile_kernel
def no_axis(x):
    out = td.empty((1,), dtype=td.int32)
    for t in td.tile(1):
        out[t] = td.argmax(x[:, :])
    return out


@td.tile_kernel
def of_bools(x):
    m, n = x.shape
    out = td.empty((m,), dtype=td.int32)
    for tm in td.tile(m):
        out[tm] = (x[tm, :] > 0).argmax(axis=1)
    return out


def test_bad_uses_are_clear_errors() -> None:
    x = np.ones((4, 5), np.float32)
    with pytest.raises(td.ShapeError, match=r"td.argmax takes one axis, got \(0, 1\) for a 2-D "
                       r"tile"):
        two_axes(x)
    with pytest.raises(td.ShapeError, match=r"td.argmax takes one axis, got None"):
        no_axis(x)


def test_bool_positions_are_the_first_true() -> None:
    x = data((37, 45), np.float32, seed=3)
    np.testing.assert_array_equal(of_bools(x), (x > 0).argmax(axis=1))
