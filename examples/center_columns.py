"""Center the columns of a matrix: out[i, j] = x[i, j] - mean_i x[i, j].

A kernel with two grids, one after the other. The first grid runs over tiles of columns and
walks the rows to compute each column's mean. The second grid runs over 2-D output tiles and
reads those means. The second grid starts only after the first has finished and its stores
are visible:
- on the NumPy backend, the grids run in program order;
- on Triton, each grid is its own launch, on one stream;
- on the spatial backend, each grid is a phase of the dataflow config.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def center_columns(x):
    m, n = x.shape
    acc_dtype = td.float64 if x.dtype == td.float64 else td.float32
    means = td.empty((n,), dtype=acc_dtype)
    for tn in td.tile(n):  # grid 1: the mean of each column
        acc = td.zeros((tn,), dtype=acc_dtype)
        for tm in td.tile(m):  # a sequential loop down the rows
            acc += td.sum(x[tm, tn].astype(acc_dtype), axis=0)
        means[tn] = acc / m
    out = td.empty((m, n), dtype=x.dtype)
    for tm, tn in td.tile(m, n):  # grid 2: runs after grid 1 has stored every mean
        out[tm, tn] = x[tm, tn].astype(acc_dtype) - means[tn][None, :]
    return out


DIMS = {"m": 130, "n": 75}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """One random (m, n) matrix with a different offset in each column."""
    m, n = dims["m"], dims["n"]
    x = rng.standard_normal((m, n)) + rng.uniform(-3, 3, size=n)
    return (x.astype(dtype),)


def reference(x) -> np.ndarray:
    """x minus its column means, in float64."""
    x = x.astype(np.float64)
    return x - x.mean(axis=0)


def baseline(xp, x):
    """The same in the array library, in the input dtype."""
    return x - x.mean(axis=0)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = center_columns(*args)
    print(f"center_columns: relative error "
          f"{td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
