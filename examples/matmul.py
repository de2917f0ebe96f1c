"""Matrix multiplication: out = a @ b.

The grid runs over (tm, tn) tiles of the output; each program walks the shared dimension with a
sequential tile loop, accumulating `a[tm, tk] @ b[tk, tn]` in a carried float32 accumulator
(float64 for float64 inputs), and casts to the output dtype on the final store.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def matmul(a, b):
    m, k = a.shape
    _, n = b.shape
    acc_dtype = td.float64 if a.dtype == td.float64 else td.float32
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):  # the parallel grid over output tiles
        acc = td.zeros((tm, tn), dtype=acc_dtype)
        for tk in td.tile(k):  # a sequential loop over the shared dimension
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc  # cast to out's dtype on store
    return out


DIMS = {"m": 150, "k": 100, "n": 90}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random (m, k) and (k, n) matrices."""
    m, k, n = dims["m"], dims["k"], dims["n"]
    return (
        rng.standard_normal((m, k)).astype(dtype),
        rng.standard_normal((k, n)).astype(dtype),
    )


def reference(a, b) -> np.ndarray:
    """a @ b in float64."""
    return a.astype(np.float64) @ b.astype(np.float64)


def baseline(xp, a, b):
    """xp.matmul: cuBLAS through CuPy on a GPU, NumPy's BLAS on the CPU."""
    return xp.matmul(a, b)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = matmul(*args)
    print(f"matmul: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
