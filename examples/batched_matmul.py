"""Batched matrix multiplication: out[i] = a[i] @ b[i] for each batch index i.

The parallel grid runs over the batch and the output tiles together: `bi` is a tile of block
size 1 over the batch (`bi.begin` is its index), so every (batch entry, output tile) pair is its
own program, and a small batch of large matrices still fills a GPU. Each program loops over the
shared dimension. (A `td.grid(batch)` with a sequential loop over the output tiles inside is also
correct, but it runs only `batch` programs.)
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def batched_matmul(a, b):
    batch, m, k = a.shape
    _, _, n = b.shape
    acc_dtype = td.float64 if a.dtype == td.float64 else td.float32
    out = td.empty((batch, m, n), dtype=a.dtype)
    # The parallel grid: one program per (batch entry, output tile).
    for bi, tm, tn in td.tile(batch, m, n, block_size=(1, None, None)):
        i = bi.begin  # the batch index (a scalar)
        acc = td.zeros((tm, tn), dtype=acc_dtype)
        for tk in td.tile(k):  # a sequential loop over the shared dimension
            acc += a[i, tm, tk] @ b[i, tk, tn]
        out[i, tm, tn] = acc
    return out


DIMS = {"batch": 3, "m": 60, "k": 50, "n": 44}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random (batch, m, k) and (batch, k, n) arrays."""
    batch, m, k, n = dims["batch"], dims["m"], dims["k"], dims["n"]
    return (
        rng.standard_normal((batch, m, k)).astype(dtype),
        rng.standard_normal((batch, k, n)).astype(dtype),
    )


def reference(a, b) -> np.ndarray:
    """np.matmul over the batch in float64."""
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def baseline(xp, a, b):
    """xp.matmul (CuPy: cuBLAS batched GEMM), in the input dtype."""
    return xp.matmul(a, b)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = batched_matmul(*args)
    err = td.testing.relative_error(out, reference(*args))
    print(f"batched_matmul: relative error {err:.2e}")


if __name__ == "__main__":
    main()
