"""Elementwise vector addition: out = x + y.

The simplest tile kernel: one parallel grid over 1-D tiles of the vectors. Each program loads one
tile of `x` and one of `y`, adds them and stores the tile; the ragged last tile is masked.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def vector_add(x, y):
    (n,) = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for tn in td.tile(n):  # the parallel grid: one program per tile
        out[tn] = x[tn] + y[tn]
    return out


DIMS = {"n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Two random vectors of length n."""
    n = dims["n"]
    return (
        rng.standard_normal(n).astype(dtype),
        rng.standard_normal(n).astype(dtype),
    )


def reference(x, y) -> np.ndarray:
    """x + y in float64."""
    return x.astype(np.float64) + y.astype(np.float64)


def baseline(xp, x, y):
    """x + y in the input dtype."""
    return x + y


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = vector_add(*args)
    print(f"vector_add: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
