"""`while` on a runtime scalar (the `while` op): each program runs its own trips, carrying the
names bound before the loop that its body rebinds; on Python values it stays Python's loop."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import gpu_backend, run_on, under_configs

BACKENDS = ["numpy", "triton-interpret", gpu_backend()]


@td.tile_kernel
def segment_of(offsets, rows):
    """A binary search per program (which jagged segment holds each row): `lo`, `hi` and the
    probe are carried; the condition of every trip is computed from them."""
    (n,) = rows.shape
    out = td.empty((n,), dtype=td.int32)
    for r in td.grid(n):
        row = rows[r]
        lo = td.zeros((), dtype=td.int32)
        hi = td.full((), offsets.shape[0] - 1, dtype=td.int32)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if offsets[mid] <= row:
                lo = mid
            else:
                hi = mid
        out[r] = lo
    return out


@td.tile_kernel
def halvings(x):
    """A tile carried through a loop whose condition is a reduction of it; `continue` skips the
    rest of a trip, and a Python `while` in the body is unrolled."""
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    steps = td.empty((m,), dtype=td.int32)
    for r in td.grid(m):
        v = x[r, :].astype(td.float32)
        count = 0
        while td.max(td.abs(v)) >= 1.0:
            count += 1
            if td.max(td.abs(v)) >= 4.0:
                v = v * 0.25
                continue
            k = 0
            while k < 2:  # Python values: unrolled
                k += 1
            v = v / k
        out[r, :] = v.astype(x.dtype)
        steps[r] = count
    return out, steps


def _halvings(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    outs, counts = [], []
    for row in x.astype(np.float64):
        count = 0
        while np.abs(row).max() >= 1.0:
            count += 1
            row = row * 0.25 if np.abs(row).max() >= 4.0 else row / 2
        outs.append(row)
        counts.append(count)
    return np.array(outs), np.array(counts)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_binary_search_per_program(backend: str) -> None:
    rng = np.random.default_rng(0)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 5, size=9))]).astype(np.int32)
    rows = rng.integers(0, offsets[-1], size=23).astype(np.int32)
    expected = np.searchsorted(offsets, rows, side="right") - 1
    np.testing.assert_array_equal(run_on(segment_of, (offsets, rows), backend), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tile_carried_until_a_reduction_fails(backend: str) -> None:
    scales = np.repeat([0.1, 3.0, 40.0], 3)[:, None]
    x = (np.random.default_rng(1).standard_normal((9, 13)) * scales).astype(np.float32)
    expected, counts = _halvings(x)
    assert len(set(counts)) > 2  # programs run different numbers of trips
    for config, (out, steps) in under_configs(halvings, (x,), backend):
        np.testing.assert_allclose(out, expected, rtol=1e-6, err_msg=str(config))
        np.testing.assert_array_equal(steps, counts)


def test_while_errors() -> None:
    @td.tile_kernel
    def on_a_tile(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            v = x[t]
            while v > 0:
                v = v - 1
            out[t] = v
        return out

    @td.tile_kernel
    def wait_for_first(x, flag):  # a flag another program sets, not a lock (test_locks.py)
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            if t.id > 0:
                while td.atomic_add(flag, [0], 0) == 0:  # the others wait for program 0
                    pass
            out[t] = x[t]
            td.atomic_xchg(flag, [0], 1)
        return out

    x = np.ones(8, np.float32)
    with pytest.raises(td.ControlFlowError, match="`while` loop on a tile of shape"):
        on_a_tile(x)
    with pytest.raises(td.BackendError, match="cannot map a `while` loop"):
        segment_of.run(np.array([0, 2, 5], np.int32), np.array([1, 3], np.int32),
                       backend="spatial")
    from lowering.backends.numpy import whiles
    trips, whiles.TRIPS = whiles.TRIPS, 50
    try:
        with pytest.raises(td.BackendError, match="programs run in lockstep"):
            wait_for_first.run(x, np.zeros(1, np.int32), backend="numpy",
                          config=td.Config(block_sizes=(2,)))
    finally:
        whiles.TRIPS = trips
