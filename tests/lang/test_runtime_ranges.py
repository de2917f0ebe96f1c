"""Loops to a runtime bound inside the grid: `td.grid(s)` (Helion's `hl.grid(n)` in device
code) and `range(lo, hi, step)` (Triton's `for i in range(lo, hi)`), each program to its own
bound, with no static bound needed: they run as `while` loops."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td

BACKENDS = ["numpy", "triton-interpret"]


@td.tile_kernel
def jagged_horner(lens, x):
    """Per row, Horner's rule from the row's last valid element down (a negative step), and
    the count of its nonzero elements through `td.grid` over a loaded length."""
    m, _ = x.shape
    value = td.empty((m,), dtype=td.float32)
    count = td.empty((m,), dtype=td.int32)
    for r in td.grid(m):
        acc = 0.0
        for i in range(lens[r] - 1, -1, -1):
            acc = acc * 0.5 + x[r, i]
        nonzero = td.zeros((), dtype=td.int32)
        for j in td.grid(lens[r]):
            if x[r, j] != 0:
                nonzero += 1
        value[r] = acc
        count[r] = nonzero
    return value, count


def _horner(lens: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, counts = [], []
    for n, row in zip(lens, x.astype(np.float64)):
        acc = 0.0
        for v in row[:n][::-1]:
            acc = acc * 0.5 + v
        values.append(acc)
        counts.append(np.count_nonzero(row[:n]))
    return np.array(values), np.array(counts)


@pytest.mark.parametrize("backend", BACKENDS)
def test_loops_to_loaded_bounds(backend: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 11)).astype(np.float32)
    x[x < -0.5] = 0
    lens = np.array([0, 1, 11, 4, 7, 2], np.int32)  # an empty row, a full one
    value, count = jagged_horner.run(lens, x, backend=backend)
    expected_value, expected_count = _horner(lens, x)
    np.testing.assert_allclose(value, expected_value, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(count, expected_count)


@td.tile_kernel
def group_sums(w, G: td.constexpr):
    """Triton's `for c in range(g * C, (g + 1) * C)`: bounds computed from the grid index."""
    C = w.shape[0] // G
    out = td.empty((G,), dtype=w.dtype)
    for g in td.grid(G):
        acc = 0.0
        for c in range(g * C, (g + 1) * C):
            acc += w[c]
        out[g] = acc
    return out


def test_bounds_from_the_grid_index() -> None:
    w = np.random.default_rng(2).standard_normal(12).astype(np.float32)
    np.testing.assert_allclose(group_sums(w, 3), w.astype(np.float64).reshape(3, 4).sum(1),
                               rtol=1e-6)


def test_the_counter_has_the_bounds_dtype() -> None:
    """The counter is a typed int32 (not a weak number): its test needs no int64 casts."""
    ir = jagged_horner.source(np.ones(2, np.int32), np.ones((2, 3), np.float32),
                              target="ir-traced")
    assert ": i64" not in ir


def test_errors() -> None:
    @td.tile_kernel
    def breaks(lens, x):
        out = td.zeros_like(x)
        for r in td.grid(x.shape[0]):
            for i in range(lens[r]):
                if x[r, i] < 0:
                    break
                out[r, i] = x[r, i]
        return out

    @td.tile_kernel
    def runtime_step(lens, x):
        out = td.zeros_like(x)
        for r in td.grid(x.shape[0]):
            for i in range(0, x.shape[1], lens[r]):
                out[r, i] = x[r, i]
        return out

    lens, x = np.array([2, 3], np.int32), np.ones((2, 3), np.float32)
    with pytest.raises(td.TraceError, match="runtime bound cannot have 'break'") as e:
        breaks(lens, x)
    assert str(e.value).splitlines()[1].strip() == "break"  # the user's line
    with pytest.raises(td.TraceError, match="the step must be a nonzero int"):
        runtime_step(lens, x)
    with pytest.raises(td.BackendError, match="cannot map a `while` loop"):
        jagged_horner.run(lens, x, backend="spatial")
