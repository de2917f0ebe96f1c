"""RMS normalization over the last axis: out = x / sqrt(mean(x**2) + EPS) * weight.

The grid runs over tiles of rows; each program loads whole rows, takes the mean of squares as a
row reduction in float32 (float64 for float64 inputs) and scales by its reciprocal square root and
the per-column weight. `EPS` is a Python constant captured at trace time.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td

EPS = 1e-6


@td.tile_kernel
def rms_norm(x, weight):
    m, n = x.shape
    cdt = td.float64 if x.dtype == td.float64 else td.float32
    out = td.empty((m, n), dtype=x.dtype)
    for tm in td.tile(m):  # the parallel grid over row tiles
        row = x[tm, :].astype(cdt)  # whole rows
        inv_rms = td.rsqrt(td.mean(row * row, axis=1, keepdims=True) + EPS)
        out[tm, :] = row * inv_rms * weight[:].astype(cdt)[None, :]
    return out


DIMS = {"m": 150, "n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """A random (m, n) matrix and a weight of length n."""
    m, n = dims["m"], dims["n"]
    x = rng.standard_normal((m, n)).astype(dtype)
    weight = (1.0 + 0.1 * rng.standard_normal(n)).astype(dtype)
    return x, weight


def reference(x, weight) -> np.ndarray:
    """RMS norm over the last axis in float64."""
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + EPS) * weight.astype(np.float64)


def baseline(xp, x, weight):
    """What a user of the array library writes, in the input dtype."""
    return x / xp.sqrt((x * x).mean(axis=1, keepdims=True) + EPS) * weight


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = rms_norm(*args)
    print(f"rms_norm: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
