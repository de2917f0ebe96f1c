"""td.cumsum: NumPy's prefix sums (in the dtype a sum has) on every backend, over padded and
ragged tiles and after a runtime start, under sampled configs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from support import example, under_configs
from tiledsl.testing import assert_close

BACKENDS = ["numpy", "triton-interpret", "spatial"]
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f64": np.float64,
          "i8": np.int8, "bool": np.bool_}


@td.tile_kernel
def prefix_sums(x):
    m, n = x.shape
    rows = td.empty((m, n), dtype=td.float64 if x.dtype == td.float64 else td.int64
                    if not x.dtype.is_float else td.float32)
    cols = td.empty_like(rows)
    for tm in td.tile(m):
        rows[tm, :] = td.cumsum(x[tm, :], axis=1)  # the whole row (padded on Triton)
    for tn in td.tile(n):
        cols[:, tn] = x[:, tn].cumsum(axis=0)
    return rows, cols


@td.tile_kernel
def cumsum_from(x, s: int):
    """Prefix sums of x + 1 along each row from column s on (a loop with a runtime start); 0
    before s. The lanes before s load as 0 but hold 1 after the add: the mask must clear them."""
    m, n = x.shape
    out = td.full((m, n), 0.0, dtype=td.float32)
    for tm in td.tile(m):
        carry = td.zeros((tm,), dtype=td.float32)
        for tn in td.tile(n, start=s):
            tile = x[tm, tn] + 1.0
            out[tm, tn] = carry[:, None] + td.cumsum(tile, axis=1)
            carry += tile.sum(axis=1)
    return out


def data(shape: tuple[int, int], dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "i":
        return rng.integers(-128, 128, shape).astype(dtype)  # sums leave int8's range
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("backend", BACKENDS)
def test_prefix_sums_match_numpy(backend: str, dtype: str) -> None:
    x = data((37, 45), DTYPES[dtype])
    wide = x.astype(np.float64)
    for config, (rows, cols) in under_configs(prefix_sums, (x,), backend, samples=3):
        assert rows.dtype == {"f64": np.float64, "i8": np.int64, "bool": np.int64}.get(
            dtype, np.float32)  # a sum's dtype
        assert_close(rows, np.cumsum(wide, axis=1), DTYPES[dtype])
        assert_close(cols, np.cumsum(wide, axis=0), DTYPES[dtype])


@pytest.mark.parametrize("start", [0, 13, 40])
@pytest.mark.parametrize("backend", BACKENDS)
def test_lanes_before_a_runtime_start_add_nothing(backend: str, start: int) -> None:
    x = data((37, 101), np.float32, seed=1)
    ref = np.zeros(x.shape)
    ref[:, start:] = np.cumsum(x[:, start:].astype(np.float64) + 1, axis=1)
    for config, out in under_configs(cumsum_from, (x, start), backend, samples=3):
        assert_close(out, ref, np.float32)


def test_the_generated_triton_scans_in_the_sum_dtype() -> None:
    src = prefix_sums.source(data((37, 45), np.float16), target="triton")
    assert "tl.cumsum(x_tile.to(tl.float32), axis=1)" in src


@td.tile_kernel
def no_axis(x):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm in td.tile(m):
        out[tm, :] = td.cumsum(x[tm, :])
    return out


def test_a_missing_axis_is_a_clear_error() -> None:
    with pytest.raises(td.ShapeError, match=r"td.cumsum: axis None is not an axis of a 2-D tile"):
        no_axis(np.ones((4, 5), np.float32))


def test_a_row_walked_in_column_tiles_compiles_for_the_gpu_on_every_supported_triton() -> None:
    """The running carry of row_cumsum is a float sum of a loaded tile whose final value is
    unused: triton 3.6's OptimizeThreadLocality pass failed on it ("PassManager::run failed")
    for every config with more than one column tile (the GPU's default at 4096x4096 among
    them). workarounds.py adds 0 to the tile there (CI runs this file under triton 3.6 too)."""
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    mod = example("row_cumsum")
    x = mod.make_inputs(np.random.default_rng(0), {"m": 64, "n": 1024})[0]
    for config in (td.Config((4, 256), 4, 3), td.Config((64, 64), 4, 3)):
        (report,) = mod.row_cumsum.compile(x, config=config, arch="sm_90")
        assert report.registers > 0



@td.tile_kernel
def suffix_sums(x):
    """fla's chunk_local_cumsum with reverse=True (Triton's tl.cumsum keyword): sums from the
    last lane of a whole row or column (padded to a power of two on Triton: the padding must add
    nothing)."""
    m, n = x.shape
    rows = td.empty((m, n), dtype=td.float32)
    cols = td.empty((m, n), dtype=td.float32)
    for tm in td.tile(m):
        rows[tm, :] = td.cumsum(x[tm, :], axis=1, reverse=True)
    for tn in td.tile(n):
        cols[:, tn] = td.cumsum(x[:, tn], axis=0, reverse=True)
    return rows, cols


@pytest.mark.parametrize("backend", BACKENDS)
def test_reversed_prefix_sums(backend: str) -> None:
    x = data((37, 45), np.float16, seed=3)
    wide = x.astype(np.float64)
    for config, (rows, cols) in under_configs(suffix_sums, (x,), backend, samples=2):
        assert rows.dtype == np.float32  # a sum's dtype: 16-bit floats in float32
        assert_close(rows, np.cumsum(wide[:, ::-1], axis=1)[:, ::-1], np.float16)
        assert_close(cols, np.cumsum(wide[::-1], axis=0)[::-1], np.float16)
