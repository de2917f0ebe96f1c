"""Indices other than a tile over a whole dimension: grids over part of a dimension, offset grid
indices (stencils), scalar arguments as indices; on every CPU backend under the default and
sampled configs, against NumPy, and compiled for sm_90. A scalar index out of its dimension is
an OutOfBoundsError on the backends that check it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support import under_configs

import tiledsl as td

BACKENDS = ["numpy", "triton-interpret", "spatial"]


@td.tile_kernel
def scale_rows(x, w):
    """out[j] = sum over the g rows of w of w[i] * x[i, j]; x has more rows than w."""
    (g,) = w.shape
    _, n = x.shape
    out = td.zeros((n,), dtype=td.float32)
    for tn in td.tile(n):
        acc = td.zeros((tn,), dtype=td.float32)
        for i in td.grid(g):
            acc += x[i, tn] * w[i]
        out[tn] = acc
    return out


@td.tile_kernel
def pick_rows(x, w):
    """out[i, :] = w[i] * x[i, :] for the first g rows (a grid shorter than x's rows)."""
    (g,) = w.shape
    _, n = x.shape
    out = td.empty((g, n), dtype=x.dtype)
    for i in td.grid(g):
        for tn in td.tile(n):
            out[i, tn] = x[i, tn] * w[i]
    return out


@td.tile_kernel
def stencil(x):
    """out = x[:-2] + x[2:] (an offset grid index)."""
    m, n = x.shape
    out = td.empty((m - 2, n), dtype=x.dtype)
    for i in td.grid(m - 2):
        for tn in td.tile(n):
            out[i, tn] = x[i, tn] + x[i + 2, tn]
    return out


@td.tile_kernel
def row_at(x, r: int):
    """out = x[r] (a runtime scalar index)."""
    _, n = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for tn in td.tile(n):
        out[tn] = x[r, tn]
    return out


@td.tile_kernel
def put_row(x, v, r: int):
    """x[r] = v, in place."""
    (n,) = v.shape
    for tn in td.tile(n):
        x[r, tn] = v[tn]


rng = np.random.default_rng(5)
X = rng.standard_normal((66, 45)).astype(np.float32)
CASES: dict[str, tuple[Any, tuple, Callable[..., np.ndarray]]] = {
    "grid of one": (scale_rows, (X, np.array([1.5], np.float32)), lambda x, w: w[0] * x[0]),
    "grid of three": (scale_rows, (X, np.array([1.5, -2.0, 0.5], np.float32)),
                      lambda x, w: w @ x[:3]),
    "pick rows": (pick_rows, (X, rng.standard_normal(7).astype(np.float32)),
                  lambda x, w: w[:, None] * x[:7]),
    "stencil": (stencil, (X,), lambda x: x[:-2] + x[2:]),
    "runtime index": (row_at, (X, 37), lambda x, r: x[r]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_partial_and_offset_indices_match_numpy(case: str, backend: str) -> None:
    kernel, args, reference = CASES[case]
    ref = reference(*(a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in args))
    for config, out in under_configs(kernel, args, backend, seed=3):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5, err_msg=f"{config}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_runtime_index_writes_in_place(backend: str) -> None:
    if backend == "triton-interpret":
        pytest.importorskip("torch")
        pytest.importorskip("triton")
    x, v = X.copy(), rng.standard_normal(45).astype(np.float32)
    put_row.run(x, v, 9, backend=backend)
    ref = X.copy()
    ref[9] = v
    np.testing.assert_array_equal(x, ref)


@pytest.mark.parametrize("backend", ["numpy", "spatial"])
@pytest.mark.parametrize("r", [-1, 66, 1000])
def test_a_scalar_index_out_of_bounds_is_an_error(backend: str, r: int) -> None:
    with pytest.raises(td.OutOfBoundsError, match=rf"row_at.*load from 'x': index {r} is out of "
                       r"bounds for dimension 0 \(size 66\)(.|\n)*x\[r, tn\]"):
        row_at.run(X, r, backend=backend)
    x = X.copy()
    with pytest.raises(td.OutOfBoundsError, match=rf"store to 'x': index {r} is out"):
        put_row.run(x, X[0], r, backend=backend)
    np.testing.assert_array_equal(x, X)  # nothing was written


def test_an_offset_past_the_end_is_an_error() -> None:
    @td.tile_kernel
    def shifted(x):
        m, n = x.shape
        out = td.empty((m, n), dtype=x.dtype)
        for i in td.grid(m):
            for tn in td.tile(n):
                out[i, tn] = x[i + 1, tn]
        return out

    with pytest.raises(td.OutOfBoundsError, match="index 66 is out of bounds for dimension 0"):
        shifted(X)


@pytest.mark.parametrize("case", ["stencil", "runtime index", "grid of one"])
def test_scalar_bounds_masks_compile_for_hopper(case: str) -> None:
    pytest.importorskip("triton")
    kernel, args, _ = CASES[case]
    (report,) = kernel.compile(*args, arch="sm_90")
    assert report.problem is None


@td.tile_kernel
def weighted_rows(x, w):
    """Helion's rms_norm_bwd: `weight[None, :]` on a tensor (a load, then an axis of 1)."""
    out = td.empty_like(x)
    for tm in td.tile(x.shape[0]):
        out[tm, :] = x[tm, :] * w[None, :] + w[..., None].T + x[tm, None, 0].reshape(tm, 1)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_none_in_a_tensor_index_adds_an_axis(backend: str) -> None:
    x = np.random.default_rng(10).standard_normal((5, 3)).astype(np.float32)
    w = np.random.default_rng(11).standard_normal(3).astype(np.float32)
    want = x * w[None, :] + w[None, :] + x[:, None, 0]
    td.testing.assert_close(weighted_rows.run(x, w, backend=backend), want, np.float32)


@td.tile_kernel
def batched_rows(x, idx, B: td.constexpr):
    """FlagGems' kron: `tl.load(map_ptr + offset, mask=is_valid)` reads a scalar only where
    the program is valid (its index may lie past the tensor elsewhere), and a tile's mask is
    and-ed with a scalar comparison of the program's batch."""
    m, n = x.shape
    out = td.zeros_like(x)
    for pid in td.grid(2 * td.cdiv(m, B)):
        batch = pid // td.cdiv(m, B)
        rows = (pid % td.cdiv(m, B)) * B + td.arange(0, B)
        cols = td.arange(0, 64)
        shift = td.load(idx, [pid], mask=pid < idx.shape[0])
        mask = (rows[:, None] < m) & (cols[None, :] < n) & (batch < 1)
        td.store(out, [rows[:, None], cols[None, :]],
                 td.load(x, [rows[:, None], cols[None, :]], mask=mask) + shift, mask=mask)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial"])
def test_a_masked_scalar_load_and_a_scalar_in_a_tile_mask(backend: str) -> None:
    x = np.random.default_rng(28).standard_normal((37, 45)).astype(np.float32)
    idx = np.array([1.0, 2.0, 3.0], np.float32)  # programs 3.. read nothing (masked off)
    want = x.astype(np.float64) + np.repeat([1.0, 2.0, 3.0], 16)[:37, None]
    td.testing.assert_close(batched_rows.run(x, idx, 16, backend=backend), want, np.float32)


@td.tile_kernel
def concat_masked(x, y):
    """Helion's concat2d_dim1: x and y loaded with a tile over the output's n1 + n2 columns
    under `extra_mask` (a masked access's tile may run past the dimension it indexes)."""
    m, n1 = x.shape
    out = td.empty((m, n1 + y.shape[1]), dtype=x.dtype)
    for t0, t1 in td.tile(out.shape):
        x_part = td.load(x, [t0, t1], extra_mask=(t1.index < n1)[None, :])
        y_part = td.load(y, [t0, t1.index - n1], extra_mask=(t1.index >= n1)[None, :])
        out[t0, t1] = td.where((t1.index < n1)[None, :], x_part, y_part)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_masked_access_s_tile_may_run_past_the_dimension(backend: str) -> None:
    rng = np.random.default_rng(5)
    x, y = (rng.standard_normal((5, n)).astype(np.float32) for n in (29, 19))
    for _, out in under_configs(concat_masked, (x, y), backend):
        np.testing.assert_array_equal(out, np.concatenate([x, y], axis=1))
