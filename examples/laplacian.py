"""The 5-point Laplacian stencil on a 2-D grid with zero boundary values:
out[i, j] = 4 x[i, j] - x[i-1, j] - x[i+1, j] - x[i, j-1] - x[i, j+1], where the neighbours
outside the grid are 0.

Each neighbour is the same tile shifted by one row or column (`x[tm - 1, tn]`): its lanes that
fall outside the grid load 0, so the boundary needs no code of its own.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def laplacian(x):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = 4.0 * x[tm, tn] - x[tm - 1, tn] - x[tm + 1, tn] \
            - x[tm, tn - 1] - x[tm, tn + 1]
    return out


DIMS = {"m": 150, "n": 90}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """A random (m, n) grid."""
    return (rng.standard_normal((dims["m"], dims["n"])).astype(dtype),)


def _laplacian(xp, x):
    p = xp.pad(x, 1)
    return 4 * x - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]


def reference(x) -> np.ndarray:
    """The stencil in float64 on the zero-padded grid."""
    return _laplacian(np, x.astype(np.float64))


def baseline(xp, x):
    """Pad with zeros, then four shifted slices."""
    return _laplacian(xp, x)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = laplacian(*args)
    print(f"laplacian: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
