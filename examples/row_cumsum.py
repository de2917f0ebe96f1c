"""Prefix sums along rows: out[i, j] = sum_{j' <= j} x[i, j'] (as in top-p sampling, over sorted
probabilities, or in computing offsets from counts).

The grid runs over tiles of rows; each program walks the columns with a sequential tile loop.
`td.cumsum(tile, axis=1)` sums within a tile, from its first lane; the carried `carry` holds the
total of the tiles before it (float32, or float64 for float64 inputs) and is added on store. The
partial last column tile is masked with 0, so the totals stay exact.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def row_cumsum(x):
    m, n = x.shape
    acc_dtype = td.float64 if x.dtype == td.float64 else td.float32
    out = td.empty((m, n), dtype=x.dtype)
    for tm in td.tile(m):  # the parallel grid over row tiles
        carry = td.zeros((tm,), dtype=acc_dtype)
        for tn in td.tile(n):  # a sequential loop over column tiles; `carry` is carried
            tile = x[tm, tn].astype(acc_dtype)
            out[tm, tn] = carry[:, None] + td.cumsum(tile, axis=1)  # cast to out's dtype
            carry += tile.sum(axis=1)
    return out


DIMS = {"m": 150, "n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """One random (m, n) matrix."""
    return (rng.standard_normal((dims["m"], dims["n"])).astype(dtype),)


def reference(x) -> np.ndarray:
    """Prefix sums over columns in float64."""
    return np.cumsum(x.astype(np.float64), axis=1)


def baseline(xp, x):
    """xp.cumsum over rows, in the input dtype."""
    return xp.cumsum(x, axis=1)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = row_cumsum(*args)
    print(f"row_cumsum: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
