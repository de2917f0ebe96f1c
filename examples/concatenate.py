"""Concatenation along columns: out = [x | y] for x of shape (m, n1) and y of shape (m, n2).

Helion's `concat2d_dim1` cuts the output into tiles and masks each tile's two halves by hand.
Here each row tile writes two ranges of one output with bounded slices: `out[tm, :n1]` and
`out[tm, n1:]` are constant-size dimensions (as `:` is) that start at 0 and at n1. The two
stores write disjoint columns, which the store-overlap check sees from the slices' bounds
(overlapping ranges, `out[tm, :n1 + 1]`, are refused when tracing).
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def concatenate(x, y):
    m, n1 = x.shape
    _, n2 = y.shape
    out = td.empty((m, n1 + n2), dtype=x.dtype)
    for tm in td.tile(m):
        out[tm, :n1] = x[tm, :]
        out[tm, n1:] = y[tm, :]
    return out


DIMS = {"m": 150, "n1": 40, "n2": 60}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random (m, n1) and (m, n2) matrices."""
    m, n1, n2 = dims["m"], dims["n1"], dims["n2"]
    return (rng.standard_normal((m, n1)).astype(dtype), rng.standard_normal((m, n2)).astype(dtype))


def reference(x, y) -> np.ndarray:
    """np.concatenate in float64."""
    return np.concatenate([x.astype(np.float64), y.astype(np.float64)], axis=1)


def baseline(xp, x, y):
    """xp.concatenate along columns."""
    return xp.concatenate([x, y], axis=1)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = concatenate(*args)
    print(f"concatenate: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
