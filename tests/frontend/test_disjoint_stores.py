"""`td.store(..., disjoint=True)`: the author's word that no other program touches what a store
writes, where the race check cannot see it (a persistent loop over loaded counts, a slot mapping
the caller passes); the NumPy backend checks the word on the data it runs
(lowering/backends/numpy/disjoint.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import gpu_backend, run_on
from tiledsl.testing import assert_close


@td.tile_kernel
def persistent_rows(x, total, order, P: td.constexpr, disjoint: bool, peek: bool = False):
    """Unsloth's MoE grouped GEMM loop: program pid takes tiles pid, pid + P, ... below a loaded
    count, and tile t writes row order[t] (with `peek`, after reading the next row of out)."""
    n, d = x.shape
    out = td.zeros_like(x)
    for pid in td.grid(P):
        cols = td.arange(0, 16)
        stop = td.load(total)
        t = pid
        while t < stop:
            row = td.load(order + t)
            v = td.load(x + row * d + cols) * (pid + 1.0)
            if peek:
                v += td.load(out + (row + 1) % n * d + cols)
            td.store(out + row * d + cols, v, disjoint=disjoint)
            t += P
    return out


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return (rng.standard_normal((7, 16)).astype(np.float32), np.array([7], np.int32),
            rng.permutation(7).astype(np.int32))


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_a_disjoint_store_runs_where_the_race_check_cannot_see_why(backend: str) -> None:
    x, total, order = _inputs()
    with pytest.raises(td.TraceError, match="a loop carries") as err:
        persistent_rows(x, total, order, 3, False)
    assert "disjoint=True" in err.value.hint
    program = np.empty(7)
    program[order] = np.arange(7) % 3  # row order[t] is tile t's, program t % 3's
    got = run_on(persistent_rows, (x, total, order, 3, True), backend)
    assert_close(got, x.astype(np.float64) * (program + 1)[:, None], np.float32)


def test_the_numpy_backend_checks_the_word() -> None:
    """Row 0 written by programs 0 and 1 (tiles 0 and 4); a row one program reads and another
    then writes; two programs writing one row in one store (their first tiles); and rows
    shared with equal values, which other data would make differ."""
    x, total, order = _inputs()
    with pytest.raises(td.RaceError, match=r"store to a tensor the kernel allocates: program "
                       r"\(1,\) writes an element program \(0,\) wrote in this grid, at index "
                       r"\(0,\) of its view of shape \(112,\)"):
        persistent_rows(x, total, np.array([0, 1, 2, 3, 0, 5, 6], np.int32), 3, True)
    with pytest.raises(td.RaceError, match=r"program \(\d,\) writes an element program \(\d,\) "
                                           r"read in this grid"):
        persistent_rows(x, total, order, 3, True, True)
    with pytest.raises(td.RaceError, match=r"program \(0,\) and program \(2,\) write one "
                                           "element"):
        persistent_rows(x, total, np.array([5, 1, 5, 3, 4, 0, 6], np.int32), 3, True)
    same = np.zeros((3, 16), np.float32)
    with pytest.raises(td.RaceError, match="write one element"):
        persistent_rows(same, np.array([3], np.int32), np.zeros(3, np.int32), 3, True)


@td.tile_kernel
def slot_rows(x, slots):
    """vLLM's slot mapping: program i writes row slots[i] % 8, which the caller keeps apart."""
    n, d = x.shape
    out = td.zeros((8, d), dtype=x.dtype)
    for i in td.grid(n):
        cols = td.arange(0, 16)
        td.store(out + td.load(slots + i) % 8 * d + cols, td.load(x + i * d + cols),
                 disjoint=True)
    return out


@pytest.mark.parametrize("backend", ["numpy", "spatial"])
def test_the_word_is_checked_across_a_spatial_backend_s_pes(backend: str) -> None:
    """The spatial backend runs each PE's programs apart, on one record per grid."""
    x = np.random.default_rng(8).standard_normal((5, 16)).astype(np.float32)
    slots = np.array([4, 0, 7, 2, 1], np.int32)
    np.testing.assert_array_equal(slot_rows.run(x, slots, backend=backend)[slots], x)
    with pytest.raises(td.RaceError, match=r"program \(\d,\) (and program \(\d,\) write|"
                                           r"writes an element program)"):
        slot_rows.run(x, np.array([4, 0, 12, 2, 1], np.int32), backend=backend)


def test_the_keyword_takes_a_bool_and_changes_no_generated_store() -> None:
    x, total, order = _inputs()
    source = persistent_rows.source(x, total, order, 3, True, target="triton")
    assert "tl.store(" in source and "disjoint" not in source

    @td.tile_kernel
    def said_twice(x):
        for i in td.grid(x.shape[0]):
            td.store(x + i, 1.0, disjoint="yes")

    with pytest.raises(td.TraceError, match="disjoint= must be True or False"):
        said_twice(x[0])
