"""Row sums of a matrix: out[i] = sum_j x[i, j].

The grid runs over tiles of rows; each program walks the columns with a sequential tile loop,
carrying a per-row accumulator (float32, or float64 for float64 inputs) across iterations. The
partial last column tile is masked, so it adds nothing spurious.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def row_sum(x):
    m, n = x.shape
    acc_dtype = td.float64 if x.dtype == td.float64 else td.float32
    out = td.empty((m,), dtype=x.dtype)
    for tm in td.tile(m):  # the parallel grid over row tiles
        acc = td.zeros((tm,), dtype=acc_dtype)
        for tn in td.tile(n):  # a sequential loop over column tiles; `acc` is carried
            acc += td.sum(x[tm, tn].astype(acc_dtype), axis=1)
        out[tm] = acc
    return out


DIMS = {"m": 150, "n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """One random (m, n) matrix."""
    return (rng.standard_normal((dims["m"], dims["n"])).astype(dtype),)


def reference(x) -> np.ndarray:
    """The sum over columns in float64."""
    return x.astype(np.float64).sum(axis=1)


def baseline(xp, x):
    """xp.sum over rows, in the input dtype."""
    return x.sum(axis=1)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = row_sum(*args)
    print(f"row_sum: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
