"""Persistent matrix multiplication: out = a @ b, as Triton's tutorial 09 writes it.

A fixed number of programs (`NUM_PROGRAMS`; Triton launches one per SM) each walk the output tiles
with a stride: program p computes tiles p, p + P, p + 2P, ... of the (tm, tn) tiles numbered
row-major, `for tm, tn in td.tile(m, n)[p::P]`, where Triton's kernel writes
`for tile_id in tl.range(start_pid, num_tiles, NUM_SMS)`. The number of tiles follows from the
block sizes, so a program stops where the tiles run out (some run none when there are fewer
tiles than programs). Inside, each tile is an ordinary GEMM tile: a sequential loop over the
shared dimension accumulating in float32 (float64 for float64 inputs).
"""

from __future__ import annotations

import numpy as np

import tiledsl as td

# Programs that stay resident. Triton's tutorial launches one per SM (132 on an H100); 16 keeps
# the NumPy backend, which runs every program's tile at once, quick on small inputs.
NUM_PROGRAMS = 16


@td.tile_kernel
def persistent_matmul(a, b):
    m, k = a.shape
    _, n = b.shape
    acc_dtype = td.float64 if a.dtype == td.float64 else td.float32
    out = td.empty((m, n), dtype=a.dtype)
    for p in td.grid(NUM_PROGRAMS):  # the programs that stay resident
        for tm, tn in td.tile(m, n)[p::NUM_PROGRAMS]:  # every NUM_PROGRAMS-th output tile
            acc = td.zeros((tm, tn), dtype=acc_dtype)
            for tk in td.tile(k):
                acc += a[tm, tk] @ b[tk, tn]
            out[tm, tn] = acc
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
    out = persistent_matmul(*args)
    err = td.testing.relative_error(out, reference(*args))
    print(f"persistent_matmul: relative error {err:.2e}")


if __name__ == "__main__":
    main()
