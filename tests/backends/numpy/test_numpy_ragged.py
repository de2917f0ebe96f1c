"""The NumPy backend on ragged shapes (issue 32): accesses whose tiles are partial only at a
tensor's end read views or one padded window, never the general gather, and the default config
makes a ragged grid's accesses views. benchmarks/numpy_backend.py measures the speed."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.numpy import memory
from support import example

ROW_SUM = example("row_sum").row_sum
MATMUL = example("matmul").matmul


@td.tile_kernel
def swiglu(a, b):
    m, n = a.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        x = a[tm, tn]
        out[tm, tn] = x * td.sigmoid(x) * b[tm, tn]
    return out


def test_ragged_accesses_take_no_gather(monkeypatch: pytest.MonkeyPatch) -> None:
    """257x333 (prime and odd) under the default config and under big blocks, whose grid tiles
    and loop tiles end past the tensors: right against float64, with no gather or scatter."""
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a whole-tensor access with ragged edges took the gather path")
    monkeypatch.setattr(memory, "gather", refuse)
    monkeypatch.setattr(memory, "scatter", refuse)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 257, 333)).astype(np.float32)
    w = rng.standard_normal((333, 19)).astype(np.float32)
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    assert swiglu.config_space(a, b, backend="numpy").default() == td.Config((1, 1))
    for config in (None, td.Config((512, 512)), td.Config((64, 128))):
        np.testing.assert_allclose(swiglu.run(a, b, config=config),
                                   a64 / (1 + np.exp(-a64)) * b, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ROW_SUM.run(a, config=config), a64.sum(axis=1),
                                   rtol=1e-4, atol=1e-4)
    for config in (None, td.Config((128, 32, 256))):
        np.testing.assert_allclose(MATMUL.run(a, w, config=config), a64 @ w64,
                                   rtol=1e-4, atol=1e-4)


@td.tile_kernel
def reload_and_keep(x, y, z):
    """`a` keeps x's old values after x is stored; the second `x[tn]` reads the new ones."""
    (n,) = x.shape
    for tn in td.tile(n):
        a = x[tn]
        x[tn] = a * 2
        y[tn] = y[tn] - x[tn]
        z[tn] = a


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_load_reads_memory_as_it_is_when_it_runs(backend: str) -> None:
    """CSE once merged the two loads of x across the store, and the NumPy backend's loads were
    views that a later store changed: each backend gave another answer, by block size."""
    rng = np.random.default_rng(5)
    for block in (4, 64):  # a view of 300 elements, and a padded copy
        x, y = rng.standard_normal((2, 300)).astype(np.float32)
        x0, y0, z = x.copy(), y.copy(), np.zeros(300, np.float32)
        reload_and_keep.run(x, y, z, backend=backend, config=td.Config((block,)))
        np.testing.assert_array_equal(x, 2 * x0)
        np.testing.assert_allclose(y, y0 - 2 * x0, rtol=1e-6)
        np.testing.assert_array_equal(z, x0)
