"""Scans and sorts along an axis (tiledsl/lang/scans.py): td.associative_scan with user combine
functions, td.sort, td.argsort and td.topk against NumPy (np.sort / argsort(kind="stable")) on
ragged shapes, NaN, ties and signed zeros, on every backend under sampled configs; the errors;
and the generated code compiling for sm_90."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support import gpu_backend, run_on, under_configs

import tiledsl as td

BACKENDS = ["numpy", "triton-interpret", "spatial", gpu_backend()]


def _add(a, b):
    return a + b


def _argmax_pair(v0, i0, v1, i1):  # a running (max, its first position)
    take = v1 > v0
    return td.where(take, v1, v0), td.where(take, i1, i0)


@td.tile_kernel
def scans(x, ix):
    m, n = x.shape
    rmax = td.empty_like(x)
    rsum = td.empty_like(x)
    best = td.empty((m, n), dtype=td.int32)
    for tm in td.tile(m):
        for tn in td.tile(n, block_size=64):  # one tile over the row, ragged (n < 64)
            row = x[tm, tn]
            rmax[tm, tn] = td.associative_scan(row, 1, lambda a, b: td.maximum(a, b))
            rsum[tm, tn] = td.associative_scan(_add, row, dim=1, reverse=True)  # Helion's order
            _, best[tm, tn] = td.associative_scan((row, ix[tm, tn]), 1, _argmax_pair)
    return rmax, rsum, best


def _scan_refs(x: np.ndarray) -> tuple:
    rsum = np.cumsum(x[:, ::-1].astype(np.float64), axis=1)[:, ::-1]
    first = np.array([[int(np.argmax(r[:j + 1])) for j in range(len(r))] for r in x], np.int32)
    return np.maximum.accumulate(x, axis=1), rsum, first


@pytest.mark.parametrize("backend", BACKENDS)
def test_associative_scans_match_numpy(backend: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 37)).astype(np.float32)
    x[2, 5:9] = 3.0  # ties: the first position wins
    ix = np.broadcast_to(np.arange(37, dtype=np.int32), x.shape).copy()
    rmax_ref, rsum_ref, best_ref = _scan_refs(x)
    for config, (rmax, rsum, best) in under_configs(scans, (x, ix), backend):
        np.testing.assert_array_equal(rmax, rmax_ref, err_msg=str(config))
        np.testing.assert_array_equal(best, best_ref, err_msg=str(config))
        # the GPU sums in a tree, NumPy lane by lane: equal up to rounding
        td.testing.assert_close(rsum, rsum_ref, np.float32)


@td.tile_kernel
def sorts(x, descending=False):
    m, n = x.shape
    v = td.empty_like(x)
    p = td.empty((m, n), dtype=td.int32)
    tv = td.empty((m, 4), dtype=x.dtype)
    tp = td.empty((m, 4), dtype=td.int32)
    for tm in td.tile(m):
        for tn in td.tile(n, block_size=64):
            row = x[tm, tn]
            v[tm, tn] = td.sort(row, axis=1, descending=descending)
            p[tm, tn] = td.argsort(row, axis=1, descending=descending)
            tv[tm, :], tp[tm, :] = td.topk(row, 4, axis=1, largest=not descending)
    return v, p, tv, tp


@td.tile_kernel
def column_sort(x):
    """Along axis 0 of the tile (Triton sorts the last axis: permuted there and back)."""
    m, n = x.shape
    out = td.empty((m, n), dtype=td.int32)
    for tn in td.tile(n):
        out[:, tn] = td.argsort(x[:, tn], axis=0)
    return out


def stable_argsort(x: np.ndarray, descending: bool) -> np.ndarray:
    """NumPy's stable order; descending is its reverse with ties still in lane order."""
    if not descending:
        return np.argsort(x, axis=1, kind="stable")
    n = x.shape[1]
    return n - 1 - np.argsort(x[:, ::-1], axis=1, kind="stable")[:, ::-1]


def _awkward(dtype: type, rng: np.random.Generator) -> np.ndarray:
    x = rng.integers(-4, 5, (5, 37)).astype(np.float64)  # many ties
    if np.dtype(dtype).kind == "f":
        x[0, [1, 7, 30]] = [np.nan, np.nan, -np.nan]  # (a NaN with its sign bit set too)
        x[1, [2, 3]] = [np.inf, -np.inf]
        x[2, [4, 6]] = [-0.0, 0.0]
        x[3] = rng.standard_normal(37)
    return x.astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, np.bool_],
                         ids=["f32", "bf16", "i32", "bool"])
def test_sorts_match_numpy_stable_order(backend: str, dtype: type) -> None:
    x = _awkward(dtype, np.random.default_rng(1))
    for descending in (False, True):
        order = stable_argsort(x, descending)
        best = stable_argsort(x, not descending)[:, :4]  # topk(largest=not descending)
        samples = 1 if backend == "numpy" else 0
        for config, (v, p, tv, tp) in under_configs(sorts, (x, descending), backend, samples):
            np.testing.assert_array_equal(p, order, err_msg=f"{config} {descending}")
            np.testing.assert_array_equal(v, np.take_along_axis(x, order, 1))  # -0.0 == 0.0
            np.testing.assert_array_equal(tp, best)
            np.testing.assert_array_equal(tv, np.take_along_axis(x, best, 1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_topk_over_fewer_lanes_than_k_and_column_sorts(backend: str) -> None:
    """A row of 3 in-range lanes (the tile holds 64): the fourth result is position -1 and the
    fill (-inf for the largest); a sort along axis 0 under sampled column blocks."""
    x = np.array([[2.0, np.nan, -1.0]], np.float32)
    _, p, tv, tp = run_on(sorts, (x, False), backend)
    np.testing.assert_array_equal(p, [[2, 0, 1]])
    np.testing.assert_array_equal(tp, [[1, 0, 2, -1]])
    np.testing.assert_array_equal(tv, [[np.nan, 2.0, -1.0, -np.inf]])
    y = np.random.default_rng(2).integers(0, 5, (13, 23)).astype(np.float32)
    for config, out in under_configs(column_sort, (y,), backend):
        np.testing.assert_array_equal(out, np.argsort(y, axis=0, kind="stable"), str(config))


def test_scans_and_sorts_compile_for_sm90() -> None:
    pytest.importorskip("triton")
    x = np.ones((64, 100), np.float32)
    ix = np.zeros((64, 100), np.int32)
    assert "tl.associative_scan((x_tile, ix_tile,), 1, _combine_" in \
        scans.source(x, ix, target="triton")
    for k, args in ((scans, (x, ix)), (sorts, (x, True))):
        (report,) = k.compile(*args, arch="sm_90")
        assert ".target sm_90" in report.ptx and report.spill_bytes == 0


def test_bad_uses_are_clear_errors() -> None:
    @td.tile_kernel
    def outside(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            s = x[t].sum()
            out[t] = td.associative_scan(x[t], 0, lambda a, b: a + b + s)  # noqa: B023
        return out

    @td.tile_kernel
    def topk_of_a_tile(x):
        out = td.empty((4,), dtype=x.dtype)
        for t in td.tile(x.shape[0]):
            out[:], _ = td.topk(x[t], 4)
        return out

    @td.tile_kernel
    def sort64(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = td.sort(x[t])
        return out

    @td.tile_kernel
    def two_axes(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = td.associative_scan(_add, x[t], 0, dim=0)
        return out

    x = np.ones(10, np.float32)
    with pytest.raises(td.TraceError, match="give the axis once") as e:
        two_axes(x)
    assert "td.associative_scan(_add, x[t], 0, dim=0)" in str(e.value)
    with pytest.raises(td.TraceError, match="outside it") as e:
        outside(x)
    assert "lambda a, b: a + b + s" in str(e.value)
    with pytest.raises(td.ShapeError, match="block_size=") as e:
        topk_of_a_tile(x)
    assert "td.topk(x[t], 4)" in str(e.value)
    with pytest.raises(td.BackendError, match="up to 32 bits") as e:
        sort64.run(x.astype(np.float64), backend="triton-interpret")
    assert "td.sort(x[t])" in str(e.value)
    with pytest.raises(td.DTypeError, match="float8_e4m3fn"):
        sort64(x.astype(ml_dtypes.float8_e4m3fn))
    np.testing.assert_array_equal(sort64(x[::-1].copy().astype(np.float64)), x)  # numpy: any dtype
