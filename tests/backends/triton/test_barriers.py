"""Barriers in generated Triton between accesses to the same memory in one program
(lowering/backends/triton/barriers.py): a store and a later load of one tensor in two loops
with their own block sizes may run on different threads, so a `tl.debug_barrier()` orders
them; the in-place update `x[i] = f(x[i])` needs none."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td

pytest.importorskip("triton")

EPS = 1e-6


@td.tile_kernel
def fused_add_rms_norm(x, residual, weight):
    """residual += x in place, then out = rms_norm(residual) * weight: the first loop stores
    `residual`, the second (another block size) reloads it."""
    m, n = x.shape
    out = td.empty_like(x)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.float32)
        for tn in td.tile(n):
            r = x[tm, tn] + residual[tm, tn]
            residual[tm, tn] = r
            acc += td.sum(r * r, axis=1)
        inv = td.rsqrt(acc / n + EPS)
        for tn in td.tile(n):
            out[tm, tn] = residual[tm, tn] * inv[:, None] * weight[tn]
    return out


@td.tile_kernel
def scale_rows(x):
    """x /= the sum of its row, in place: the first loop reads x, the second writes it (a
    thread may overwrite what another has yet to read)."""
    m, n = x.shape
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.float32)
        for tn in td.tile(n):
            acc += td.sum(x[tm, tn], axis=1)
        for tn in td.tile(n):
            x[tm, tn] = x[tm, tn] / acc[:, None]


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.standard_normal((7, 37)).astype(np.float32),
            rng.standard_normal((7, 37)).astype(np.float32),
            (1.0 + 0.1 * rng.standard_normal(37)).astype(np.float32))


def _lines(text: str, what: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines()) if what in line]


def test_barrier_between_a_loop_that_stores_and_one_that_reloads() -> None:
    x, res, w = _inputs()
    big = fused_add_rms_norm.source(x, res, w, target="triton", config=td.Config((8, 64, 32), 4))
    (barrier,) = _lines(big, "tl.debug_barrier()")  # once, between the loops: not per trip
    loops = _lines(big, "for tn_iter")
    stores, loads = _lines(big, "tl.store(residual_ptr"), _lines(big, "tl.load(residual_ptrs")
    assert loops[0] < stores[0] < barrier < loops[1] < loads[1]
    # 2 x 16 lanes for 128 threads: several threads load one element of the in-place update,
    # and the sum of a late one could see the new value (triton-lang/triton#1615)
    small = fused_add_rms_norm.source(x, res, w, target="triton", config=td.Config((2, 16, 16), 4))
    assert len(_lines(small, "tl.debug_barrier()")) == 2
    war = scale_rows.source(x, target="triton", config=td.Config((8, 64, 32), 4))
    (barrier,) = _lines(war, "tl.debug_barrier()")
    assert _lines(war, "for tn_iter")[1] > barrier > _lines(war, "tl.load(x_ptrs")[0]
    assert "tl.store(" in war


def test_barriers_keep_numpy_semantics_on_triton_interpret() -> None:
    x, res, w = _inputs()
    expect_res = res.astype(np.float64) + x
    expect = expect_res / np.sqrt((expect_res ** 2).mean(axis=1, keepdims=True) + EPS) * w
    space = fused_add_rms_norm.config_space(x, res, w, backend="triton-interpret")
    for config in (space.default(), *space.sample(2, seed=0)):
        r = res.copy()
        out = fused_add_rms_norm.run(x, r, w, backend="triton-interpret", config=config)
        np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(r, expect_res, rtol=1e-6)
    y = np.abs(x) + 0.5
    scale_rows.run(y, backend="triton-interpret", config=td.Config((2, 16, 16), 4))
    np.testing.assert_allclose(y, (np.abs(x) + 0.5) / (np.abs(x) + 0.5).sum(1, keepdims=True),
                               rtol=1e-5)


def test_barrier_compiles_for_sm_90() -> None:
    x, res, w = _inputs()
    ptx = fused_add_rms_norm.source(x, res, w, target="ptx", config=td.Config((8, 64, 32), 4),
                                    arch="sm_90")
    assert "bar.sync" in ptx or "barrier.sync" in ptx


@td.tile_kernel
def column_chunks(x, block: td.constexpr, step: td.constexpr):
    """Triton's layer-norm column loop, unrolled: `off + td.arange(0, block)` chunks."""
    m, n = x.shape
    y = td.zeros_like(x)
    for row in td.grid(m):
        for off in range(0, n, step):
            cols = off + td.arange(0, block)
            td.store(y, [row, cols], td.load(x, [row, cols], mask=cols < n) * 2, mask=cols < n)
    return y


def test_no_barrier_between_disjoint_static_chunks() -> None:
    """Chunks `step` apart with `block` lanes: disjoint when step >= block (no barrier),
    overlapping otherwise (a barrier orders the later chunk's store after the earlier's)."""
    x = np.random.default_rng(0).standard_normal((3, 40)).astype(np.float32)
    assert not _lines(column_chunks.source(x, 16, 16, target="triton"), "tl.debug_barrier()")
    assert _lines(column_chunks.source(x, 16, 8, target="triton"), "tl.debug_barrier()")
    np.testing.assert_array_equal(column_chunks.run(x, 16, 16, backend="triton-interpret"), 2 * x)


@td.tile_kernel
def two_parts(x, split: td.constexpr, overlap: td.constexpr):
    """Each program writes its row through two parts of `out` made in host code: apart, or
    sharing `overlap` columns (the second store lands last)."""
    out = td.zeros_like(x)
    left, right = out[:, :split + overlap], out[:, split:]
    for r in td.grid(x.shape[0]):
        left[r, :] = x[r, :split + overlap]
        right[r, :] = x[r, split:] * 2
    return out


def test_parts_of_one_tensor_are_compared_in_its_coordinates() -> None:
    x = np.random.default_rng(0).standard_normal((3, 20)).astype(np.float32)
    assert not _lines(two_parts.source(x, 8, 0, target="triton"), "tl.debug_barrier()")
    assert _lines(two_parts.source(x, 8, 4, target="triton"), "tl.debug_barrier()")
    want = np.concatenate([x[:, :8], 2 * x[:, 8:]], axis=1)
    np.testing.assert_array_equal(two_parts.run(x, 8, 4, backend="triton-interpret"), want)
