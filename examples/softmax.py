"""Row softmax: out[i, :] = exp(x[i, :] - max_i) / sum(exp(x[i, :] - max_i)).

The grid runs over tiles of rows; each program loads whole rows (`x[tm, :]`), so the max and the
sum are plain row reductions. Subtracting the row max keeps exp from overflowing. The arithmetic
runs in float32 (float64 for float64 inputs) and the store casts back to the input dtype.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def softmax(x):
    m, n = x.shape
    cdt = td.float64 if x.dtype == td.float64 else td.float32
    out = td.empty((m, n), dtype=x.dtype)
    for tm in td.tile(m):  # the parallel grid over row tiles
        row = x[tm, :].astype(cdt)  # whole rows
        e = td.exp(row - td.max(row, axis=1, keepdims=True))
        out[tm, :] = e / td.sum(e, axis=1, keepdims=True)
    return out


DIMS = {"m": 150, "n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """One random (m, n) matrix of logits."""
    return ((3.0 * rng.standard_normal((dims["m"], dims["n"]))).astype(dtype),)


def reference(x) -> np.ndarray:
    """The numerically stable softmax over the last axis in float64."""
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def baseline(xp, x):
    """What a user of the array library writes, in the input dtype."""
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = softmax(*args)
    print(f"softmax: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
