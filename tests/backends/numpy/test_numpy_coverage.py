"""td.empty's poison fill (lowering/backends/numpy/coverage.py): skipped where a store surely
writes the whole tensor and nothing reads it (a memory pass saved, issue 32), kept where a store
may leave elements unwritten, so that the missing store is still caught."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.numpy import memory


@td.tile_kernel
def add(x, y):
    (n,) = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for tn in td.tile(n):
        out[tn] = x[tn] + y[tn]
    return out


@td.tile_kernel
def add_if(x, y, k):
    (n,) = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for tn in td.tile(n):
        if k > 0:  # a runtime condition: the store may not run
            out[tn] = x[tn] + y[tn]
    return out


def test_poison_fill_only_where_stores_may_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    fills: list[tuple] = []
    empty = memory.empty
    monkeypatch.setattr(memory, "empty", lambda shape, *a: fills.append(shape) or empty(shape, *a))
    x, y = np.random.default_rng(0).standard_normal((2, 101)).astype(np.float32)
    for config in (None, td.Config(block_sizes=(16,))):  # ragged tiles cover it too
        np.testing.assert_array_equal(add.run(x, y, config=config), x + y)
    assert fills == []
    np.testing.assert_array_equal(add_if(x, y, 1), x + y)
    with pytest.raises(td.ShapeError, match="no store writes 101 of its 101"):
        add_if(x, y, 0)
    assert fills == [(101,), (101,)]
