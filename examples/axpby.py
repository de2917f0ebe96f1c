"""Scaled matrix sum with runtime scalars: out = alpha * x + beta * y.

`alpha` and `beta` are runtime scalar arguments (not compile-time constants), so one compiled
kernel serves every value. The grid is 2-D over row and column tiles of the matrices.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def axpby(x, y, alpha: float, beta: float):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm, tn in td.tile(m, n):  # the parallel grid over 2-D tiles
        out[tm, tn] = alpha * x[tm, tn] + beta * y[tm, tn]
    return out


DIMS = {"m": 150, "n": 260}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Two random (m, n) matrices and two scalars."""
    m, n = dims["m"], dims["n"]
    x = rng.standard_normal((m, n)).astype(dtype)
    y = rng.standard_normal((m, n)).astype(dtype)
    return x, y, 1.5, -0.75


def reference(x, y, alpha, beta) -> np.ndarray:
    """alpha * x + beta * y in float64."""
    return alpha * x.astype(np.float64) + beta * y.astype(np.float64)


def baseline(xp, x, y, alpha, beta):
    """What a user of the array library writes, in the input dtype."""
    return alpha * x + beta * y


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = axpby(*args)
    print(f"axpby: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
