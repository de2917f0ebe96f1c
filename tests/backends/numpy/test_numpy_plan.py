"""The NumPy backend's per-function plan (lowering/backends/numpy/plan.py): made once per traced
function, never served to other shapes, strides or values; and a reduction of a ragged load reads
a view of the tensor, not a padded copy (issue 32: the per-call cost of small kernels)."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.numpy import executor, memory, plan, prepared
from support import example


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


@td.tile_kernel
def row_sum_squares(x):
    m, n = x.shape
    out = td.empty((m,), dtype=x.dtype)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=x.dtype)
        for tn in td.tile(n):
            v = x[tm, tn]
            acc += td.sum(v * v, axis=1)  # (a mask op: the product's lanes past n are not 0)
        out[tm] = acc
    return out


def test_second_call_redoes_no_per_op_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second call checks no td.empty's room again (its shape is static), makes no loop tile's
    range again, and builds no lane indices to mask tiles that lie in range (64 x 48 in tiles
    of 16: none is partial)."""
    x = np.random.default_rng(3).standard_normal((64, 48))
    config = td.Config(block_sizes=(16, 16))
    row_sum_squares.run(x, config=config)
    for owner, name in ((executor, "check_room"), (executor, "_loop_range"),
                        (memory.RangeRT, "index")):
        monkeypatch.setattr(owner, name, lambda *a, name=name: pytest.fail(name))
    np.testing.assert_allclose(row_sum_squares.run(x, config=config), (x * x).sum(axis=1),
                               rtol=1e-12)


def test_changed_shape_stride_or_value_gets_its_own_plan() -> None:
    """A plan is keyed on the traced function: other shapes (ragged or not), a strided view
    and new values each get the right answer, and a new shape or layout makes a new plan (the
    trace is for the layout: arg_specs.layout)."""
    rng = np.random.default_rng(1)
    for shape in ((129, 333), (5, 1), (64, 1024)):
        x = rng.standard_normal(shape).astype(np.float32)
        made = plan.made
        np.testing.assert_array_equal(row_max(x), x.max(axis=1))
        np.testing.assert_array_equal(row_max(-x), (-x).max(axis=1))  # other values
        assert plan.made == made + 1, shape
        np.testing.assert_array_equal(row_max(x.T.copy().T), x.max(axis=1))  # other strides
        assert plan.made == made + (1 if 1 in shape else 2), shape  # ((5, 1) is row-major)
    x = rng.standard_normal((333, 257)).astype(np.float32)
    np.testing.assert_array_equal(row_max(x[:, ::2]), x[:, ::2].max(axis=1))  # a strided view


def test_loads_and_stores_prepared_once_per_layout_and_config() -> None:
    """Loads' and stores' recipes (prepared.py) are made on the first call of a layout: a
    second call makes none, while other strides and other block sizes get their own, and
    right answers."""
    x = np.random.default_rng(2).standard_normal((37, 70)).astype(np.float32)
    np.testing.assert_array_equal(row_max(x), x.max(axis=1))
    made = prepared.made
    np.testing.assert_array_equal(row_max(x), x.max(axis=1))
    assert prepared.made == made  # the same layout: nothing prepared again
    np.testing.assert_array_equal(row_max(np.asfortranarray(x)), x.max(axis=1))
    assert prepared.made > made  # other strides: prepared anew
    for config in row_max.config_space(x, backend="numpy").sample(2, seed=0):
        made = prepared.made
        np.testing.assert_array_equal(row_max.run(x, config=config), x.max(axis=1))
        assert prepared.made > made, config  # other block sizes: prepared anew


matmul = example("matmul").matmul  # the README's kernel, as users write it


def test_ragged_matmul_copies_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ragged matmul under the default config reads views of its operands, trimmed along
    the shared dimension (no padded copy, no gather), and multiplies them in one product."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((37, 41), (41, 29)))
    monkeypatch.setattr(memory, "pad", lambda *a, **k: pytest.fail("padded copy"))
    monkeypatch.setattr(memory, "gather", lambda *a, **k: pytest.fail("gather"))
    np.testing.assert_allclose(matmul(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
