"""Compiled blocks (lowering/backends/numpy/compiled.py): the NumPy backend runs each block of a
function as one generated Python function, made once, and its results are the step-by-step
interpreter's, bit for bit (issue 32: the per-call cost of small kernels)."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.numpy import compiled, executor
from support import example


@td.tile_kernel
def clipped_cumsum(x, limit: float):
    """A grid, a plain loop carrying a tile, a runtime `if` and a prefix sum."""
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.float32)
        for tn in td.tile(n):
            part = td.cumsum(x[tm, tn], axis=1) + acc[:, None]
            if limit > 0:
                part = td.minimum(part, limit)
            out[tm, tn] = part
            acc = acc + td.sum(x[tm, tn], axis=1)
    return out


def test_compiled_blocks_run_and_equal_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Causal attention (a runtime-stop loop on a box of active programs, dots, masks) and a
    loop with an `if` and a scan, under sampled configs: the compiled path runs (the
    interpreter is never entered), compiles once, and gives the interpreter's bits."""
    rng = np.random.default_rng(0)
    attention = example("attention").attention
    cases = [(attention, tuple(rng.standard_normal((2, 37, 8)).astype(np.float32)
                               for _ in range(3))),
             (clipped_cumsum, (rng.standard_normal((13, 70)).astype(np.float32), 2.5))]
    for kernel, args in cases:
        space = kernel.config_space(*args, backend="numpy")
        for config in (space.default(), *space.sample(2, seed=1)):
            monkeypatch.setattr(executor, "COMPILED", False)
            expected = kernel.run(*args, config=config)
            monkeypatch.setattr(executor, "COMPILED", True)
            with monkeypatch.context() as m:
                m.setattr(executor.Executor, "interpret",
                          lambda *a, **k: pytest.fail("interpreted a block"))
                got = kernel.run(*args, config=config)
                made = compiled.made
                again = kernel.run(*args, config=config)
            assert compiled.made == made, "a second run compiled again"
            np.testing.assert_array_equal(got, expected, err_msg=f"{kernel.name} {config}")
            np.testing.assert_array_equal(again, expected)
