"""td.empty's poison fill (lowering/backends/numpy/coverage.py): skipped where a store surely
writes the whole tensor and nothing reads it (a memory pass saved, issue 32), kept where a store
may leave elements unwritten, so that the missing store is still caught."""

from __future__ import annotations

from pathlib import Path

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


@td.tile_kernel
def summed_slots(x, slots: int):
    """Triton's layer-norm backward shape: partial rows in a scratch of `slots` rows, summed;
    with fewer rows than slots the sum reads rows no store wrote."""
    m, n = x.shape
    partial = td.empty((slots, n), dtype=x.dtype)
    out = td.empty((n,), dtype=x.dtype)
    rows = partial[:m]
    for tm, tn in td.tile(m, n):
        rows[tm, tn] = x[tm, tn]
    for tn in td.tile(n):
        out[tn] = td.sum(partial[:, tn], axis=0)
    return out


def test_a_sum_of_unwritten_scratch_names_the_scratch() -> None:
    """The output is written whole (no poison fill), and its values come from scratch rows
    no store wrote: the check still reads it and says so."""
    x = np.random.default_rng(1).standard_normal((4, 12)).astype(np.float32)
    np.testing.assert_allclose(summed_slots(x, 4), x.sum(0), rtol=1e-5)
    with pytest.raises(td.ShapeError, match="12 of its 12 elements") as err:
        summed_slots(x, 6)
    line = 1 + Path(__file__).read_text().splitlines().index(
        "    partial = td.empty((slots, n), dtype=x.dtype)")
    assert f"hold values computed from the td.empty tensor made at line {line}, read where " \
        "no store wrote it" in str(err.value)


@td.tile_kernel
def count_into(x, acc, k):
    """An int output a runtime condition may leave unwritten, and an argument written in
    place (the second run starts from the caller's values, not the first run's)."""
    (n,) = x.shape
    out = td.empty((n,), dtype=td.int32)
    flags = td.empty((n,), dtype=td.bool_)
    for tn in td.tile(n):
        acc[tn] = acc[tn] + 1
        if k > 0:
            out[tn] = (x[tn] > 0).astype(td.int32) + k
            flags[tn] = x[tn] > 0
    return out, flags


def test_unwritten_integer_and_bool_outputs_are_caught() -> None:
    """No integer marks an element unwritten: the backend runs such a kernel again with
    td.empty filled otherwise, and elements that differ were not written."""
    x = np.random.default_rng(2).standard_normal(21).astype(np.float32)
    acc = np.zeros(21, np.int64)
    out, flags = count_into(x, acc, 3)
    np.testing.assert_array_equal(out, (x > 0) + 3)
    np.testing.assert_array_equal(flags, x > 0)
    np.testing.assert_array_equal(acc, np.ones(21))  # written once, as the caller sees it
    with pytest.raises(td.ShapeError, match=r"output 0 \(int32\[21\]\): no store writes 21"):
        count_into(x, acc, 0)
