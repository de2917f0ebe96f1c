"""Split-K matrix multiplication: out = x @ y, the shared dimension cut into `split_k` parts.

Helion's `matmul_split_k`: a registered knob, `split_k`, decides how many programs share each
output tile; each sums its part of the shared dimension and adds it into the zeroed output with
`td.atomic_add`. A GEMM with a small output and a long shared dimension gets parallelism from
k this way; the tuner searches `split_k` as any other knob. The result is float32 (float64 for
float64 inputs), as atomics take 32- and 64-bit values. Floating-point atomics add in an order
that depends on the schedule, so results match the reference within rounding, not bit for bit.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def matmul_split_k(x, y):
    m, k = x.shape
    _, n = y.shape
    acc_dtype = td.float64 if x.dtype == td.float64 else td.float32
    out = td.zeros((m, n), dtype=acc_dtype)
    split_k = td.register_tunable("split_k", td.PowerOfTwo(1, 32))
    k_block = td.next_power_of_2(td.cdiv(k, split_k))
    for tile_m, tile_n, outer_k in td.tile(m, n, k, block_size=(None, None, k_block)):
        acc = td.zeros((tile_m, tile_n), dtype=acc_dtype)
        for inner_k in td.tile(outer_k.end, start=outer_k.begin):
            acc += x[tile_m, inner_k] @ y[inner_k, tile_n]
        td.atomic_add(out, [tile_m, tile_n], acc)
    return out


DIMS = {"m": 40, "k": 300, "n": 24}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random (m, k) and (k, n) matrices."""
    m, k, n = dims["m"], dims["k"], dims["n"]
    return (rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype))


def reference(x, y) -> np.ndarray:
    """x @ y in float64."""
    return x.astype(np.float64) @ y.astype(np.float64)


def baseline(xp, x, y):
    """xp.matmul: cuBLAS through CuPy on a GPU, NumPy's BLAS on the CPU."""
    return xp.matmul(x, y)


def main() -> None:
    """Run on the NumPy backend with split_k = 4 and print the relative error."""
    args = make_inputs(np.random.default_rng(0))
    space = matmul_split_k.config_space(*args)
    config = space.default().replace(split_k=4)
    out = matmul_split_k.run(*args, config=config)
    print(f"matmul_split_k (split_k=4): relative error "
          f"{td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
