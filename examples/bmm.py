"""Batched matrix multiplication as Helion's `bmm` writes it: the grid tiles the batch too, and
`@` on 3-D tiles is a batch of matrix products (torch.baddbmm in Helion; `tl.dot` on 3-D blocks
in the generated Triton).

Compare batched_matmul.py, which takes one batch entry per program with a scalar index.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def bmm(a, b):
    # a: (batch, m, k), b: (batch, k, n), out: (batch, m, n)
    batch, m, k = a.shape
    _, _, n = b.shape
    acc_dtype = td.float64 if a.dtype == td.float64 else td.float32
    out = td.empty((batch, m, n), dtype=a.dtype)
    for tile_b, tile_m, tile_n in td.tile(batch, m, n):
        acc = td.zeros((tile_b, tile_m, tile_n), dtype=acc_dtype)
        for tile_k in td.tile(k):
            acc += a[tile_b, tile_m, tile_k] @ b[tile_b, tile_k, tile_n]
        out[tile_b, tile_m, tile_n] = acc
    return out


DIMS = {"batch": 5, "m": 60, "k": 50, "n": 44}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random (batch, m, k) and (batch, k, n) arrays."""
    batch, m, k, n = dims["batch"], dims["m"], dims["k"], dims["n"]
    return (rng.standard_normal((batch, m, k)).astype(dtype),
            rng.standard_normal((batch, k, n)).astype(dtype))


def reference(a, b) -> np.ndarray:
    """a @ b per batch entry in float64."""
    return a.astype(np.float64) @ b.astype(np.float64)


def baseline(xp, a, b):
    """What a user of the array library writes (a batched matmul, cuBLAS on CuPy)."""
    return xp.matmul(a, b)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = bmm(*args)
    print(f"bmm: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
