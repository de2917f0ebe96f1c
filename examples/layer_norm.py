"""Layer normalization over the last axis: out = (x - mean) / sqrt(var + eps) * weight + bias.

The grid runs over tiles of rows; each program loads whole rows, computes the mean and the (biased)
variance as row reductions in float32 (float64 for float64 inputs), normalizes, and applies the
per-column weight and bias. `eps` is a runtime scalar argument.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def layer_norm(x, weight, bias, eps: float):
    m, n = x.shape
    cdt = td.float64 if x.dtype == td.float64 else td.float32
    out = td.empty((m, n), dtype=x.dtype)
    for tm in td.tile(m):  # the parallel grid over row tiles
        row = x[tm, :].astype(cdt)  # whole rows
        centered = row - td.mean(row, axis=1, keepdims=True)
        var = td.mean(centered * centered, axis=1, keepdims=True)
        normed = centered * td.rsqrt(var + eps)
        out[tm, :] = normed * weight[:].astype(cdt)[None, :] + bias[:].astype(cdt)[None, :]
    return out


DIMS = {"m": 150, "n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """A random (m, n) matrix (offset, so the mean matters), weight and bias of length n, eps."""
    m, n = dims["m"], dims["n"]
    x = (rng.standard_normal((m, n)) * 2.0 + 0.5).astype(dtype)
    weight = (1.0 + 0.1 * rng.standard_normal(n)).astype(dtype)
    bias = (0.1 * rng.standard_normal(n)).astype(dtype)
    return x, weight, bias, 1e-5


def reference(x, weight, bias, eps) -> np.ndarray:
    """Layer norm over the last axis in float64."""
    x = x.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight.astype(np.float64) + bias.astype(np.float64)


def baseline(xp, x, weight, bias, eps):
    """What a user of the array library writes, in the input dtype."""
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / xp.sqrt(var + eps) * weight + bias


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = layer_norm(*args)
    print(f"layer_norm: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
