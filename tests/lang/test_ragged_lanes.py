"""Out-of-range lanes of partial tiles never change a result (DESIGN.md section 2), also where a
block size is a constant that does not divide the extent (`td.tile(n, block_size=64)`, n = 150)
and where a loop carries one value per lane of its tile (a lane accumulator, as in Triton's
layer-norm tutorial). On every CPU backend, default and sampled configs, against NumPy in
float64, with negative data so that a zero or poison fill would show."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support import under_configs

import tiledsl as td

BACKENDS = ["numpy", "triton-interpret", "spatial"]


@td.tile_kernel
def lane_sum(x):
    """Row sums through a (tm, 64) lane accumulator over 64-wide column tiles."""
    m, n = x.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        acc = td.zeros((tm, 64), dtype=td.float32)
        for tn in td.tile(n, block_size=64):
            acc += x[tm, tn]
        out[tm] = td.sum(acc, axis=1)
    return out


@td.tile_kernel
def lane_max(x):
    """Row maxima through a transposed (64, tm) lane accumulator."""
    m, n = x.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        best = td.full((64, tm), -float("inf"), dtype=td.float32)
        for tn in td.tile(n, block_size=64):
            best = td.maximum(best, x[tm, tn].T)
        out[tm] = td.max(best, axis=0)
    return out


@td.tile_kernel
def tile_reductions(x):
    """Per 64-wide tile: sum, max, min and mean reduced at once (constant blocks, ragged)."""
    m, n = x.shape
    out = td.empty((m, 4), dtype=td.float32)
    for tm in td.tile(m):
        s = td.zeros((tm,), dtype=td.float32)
        hi = td.full((tm,), -float("inf"), dtype=td.float32)
        lo = td.full((tm,), float("inf"), dtype=td.float32)
        last_mean = td.zeros((tm,), dtype=td.float32)
        for tn in td.tile(n, block_size=64):
            v = x[tm, tn]
            s += td.sum(v, axis=1)
            hi = td.maximum(hi, td.max(v, axis=1))
            lo = td.minimum(lo, td.min(v, axis=1))
            last_mean = td.mean(v, axis=1)  # the last tile's: 22 elements, not 64
        out[tm, 0] = s
        out[tm, 1] = hi
        out[tm, 2] = lo
        out[tm, 3] = last_mean
    return out


@td.tile_kernel
def matmul_k32(a, b):
    """A GEMM whose K loop has a constant block of 32 that does not divide K."""
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=td.float32)
        for tk in td.tile(k, block_size=32):
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc
    return out


rng = np.random.default_rng(11)
X = (rng.standard_normal((19, 150)) - 3.0).astype(np.float32)  # mostly negative
A = rng.standard_normal((21, 45)).astype(np.float32)
B = rng.standard_normal((45, 19)).astype(np.float32)
CASES: dict[str, tuple[Any, tuple, Callable[..., np.ndarray]]] = {
    "lane sum": (lane_sum, (X,), lambda x: x.sum(1)),
    "lane max": (lane_max, (X,), lambda x: x.max(1)),
    "tile reductions": (tile_reductions, (X,), lambda x: np.stack(
        [x.sum(1), x.max(1), x.min(1), x[:, 128:].mean(1)], axis=1)),
    "dot over a ragged constant block": (matmul_k32, (A, B), lambda a, b: a @ b),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_partial_tiles_do_not_change_results(case: str, backend: str) -> None:
    kernel, args, reference = CASES[case]
    ref = reference(*(a.astype(np.float64) for a in args))
    for config, out in under_configs(kernel, args, backend, seed=1):
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-4, err_msg=f"{config}")


def test_only_values_with_lanes_of_the_loop_are_selected() -> None:
    """A GEMM's accumulator and a running max over reduced tiles carry no lanes of the loop:
    their loops yield them as they are, with no select."""
    ir = matmul_k32.source(A, B, target="ir")
    assert "where" not in ir and "other = 0.0" in ir
    ir = tile_reductions.source(X, target="ir")
    loop = ir[ir.index("= for"):ir.index("yield")]
    # The max and min operands (the sum and the mean read the load's other = 0.0); no select of
    # a carried value.
    wheres = [line for line in loop.splitlines() if "= where" in line]
    assert len(wheres) == 2
    assert not any(c in line for line in wheres for c in ("%s_1", "%hi_1", "%lo_1", "%last_mean"))
    assert "where" in lane_sum.source(X, target="ir")


def test_lane_selects_compile_for_hopper() -> None:
    pytest.importorskip("triton")
    for kernel, args in ((lane_sum, (X,)), (lane_max, (X,)), (tile_reductions, (X,))):
        (report,) = kernel.compile(*args, arch="sm_90")
        assert report.problem is None
