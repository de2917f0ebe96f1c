"""Matrix multiplication with a fused bias + GELU epilogue: out = gelu(a @ b + bias).

A tiled matmul (grid over output tiles, sequential loop over the shared dimension) whose epilogue
adds the bias row and applies the exact GELU, 0.5 * x * (1 + erf(x / sqrt(2))), to the float32
accumulator before the single store, so the pre-activation never goes to memory.
"""

from __future__ import annotations

import math

import numpy as np

import tiledsl as td


@td.tile_kernel
def gemm_bias_gelu(a, b, bias):
    m, k = a.shape
    _, n = b.shape
    acc_dtype = td.float64 if a.dtype == td.float64 else td.float32
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):  # the parallel grid over output tiles
        acc = td.zeros((tm, tn), dtype=acc_dtype)
        for tk in td.tile(k):  # a sequential loop over the shared dimension
            acc += a[tm, tk] @ b[tk, tn]
        z = acc + bias[tn].astype(acc_dtype)[None, :]
        out[tm, tn] = 0.5 * z * (1.0 + td.erf(z * (1.0 / math.sqrt(2.0))))
    return out


DIMS = {"m": 130, "k": 100, "n": 90}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random (m, k) and (k, n) matrices and a bias of length n."""
    m, k, n = dims["m"], dims["k"], dims["n"]
    return (
        rng.standard_normal((m, k)).astype(dtype),
        rng.standard_normal((k, n)).astype(dtype),
        rng.standard_normal(n).astype(dtype),
    )


def reference(a, b, bias) -> np.ndarray:
    """gelu(a @ b + bias) with the exact erf GELU, in float64."""
    z = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * z * (1.0 + erf(z / math.sqrt(2.0)))


def baseline(xp, a, b, bias):
    """cuBLAS (CuPy) or NumPy GEMM, then the bias and erf GELU as separate elementwise ops."""
    if xp.__name__ == "cupy":
        from cupyx.scipy.special import erf
    else:
        from scipy.special import erf
    z = xp.matmul(a, b) + bias
    return (0.5 * z * (1.0 + erf(z / math.sqrt(2.0)))).astype(z.dtype)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = gemm_bias_gelu(*args)
    err = td.testing.relative_error(out, reference(*args))
    print(f"gemm_bias_gelu: relative error {err:.2e}")


if __name__ == "__main__":
    main()
