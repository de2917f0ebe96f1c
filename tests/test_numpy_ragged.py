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
