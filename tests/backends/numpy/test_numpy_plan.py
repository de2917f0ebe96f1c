"""The NumPy backend's per-function plan (lowering/backends/numpy/plan.py): made once per traced
function, never served to other shapes, strides or values; and a reduction of a ragged load reads
a view of the tensor, not a padded copy (issue 32: the per-call cost of small kernels)."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.numpy import memory, plan


@td.tile_kernel
def row_max(x):
    m, n = x.shape
    out = td.empty((m,), dtype=x.dtype)
    for tm in td.tile(m):
        acc = td.full((tm,), float("-inf"), dtype=x.dtype)
        for tn in td.tile(n):
            acc = td.maximum(acc, td.max(x[tm, tn], axis=1))
        out[tm] = acc
    return out


def test_second_call_makes_no_plan_and_pads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan (last uses, rules, trimmed loads) is made on the first call only, and the
    ragged row reduction reads the tensor itself: `_padded` (a copy per call) is never run."""
    x = np.random.default_rng(0).standard_normal((257, 333)).astype(np.float32)
    row_max(x)
    before = plan.made
    monkeypatch.setattr(memory, "_padded", lambda *a, **k: pytest.fail("padded copy"))
    np.testing.assert_array_equal(row_max(x), x.max(axis=1))
    assert plan.made == before


def test_changed_shape_stride_or_value_gets_its_own_plan() -> None:
    """A plan is keyed on the traced function: other shapes (ragged or not), a strided view
    and new values each get the right answer, and a new shape makes a new plan."""
    rng = np.random.default_rng(1)
    for shape in ((129, 333), (5, 1), (64, 1024)):
        x = rng.standard_normal(shape).astype(np.float32)
        made = plan.made
        np.testing.assert_array_equal(row_max(x), x.max(axis=1))
        np.testing.assert_array_equal(row_max(x.T.copy().T), x.max(axis=1))  # other strides
        np.testing.assert_array_equal(row_max(-x), (-x).max(axis=1))  # other values
        assert plan.made == made + 1, shape
    x = rng.standard_normal((333, 257)).astype(np.float32)
    np.testing.assert_array_equal(row_max(x[:, ::2]), x[:, ::2].max(axis=1))  # a strided view
