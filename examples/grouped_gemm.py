"""Grouped GEMM, as Triton's tutorial 08 passes it: a list of A matrices and a list of B
matrices, c[g] = a[g] @ b[g] for each group g, every group with its own sizes.

A list (or tuple) of arrays is an argument like any tensor: the body receives a Python list of
tensors, and the kernel is specialized on the list's length and each array's shape and dtype.
A Python loop over the groups traces one grid per group (one launch each); each grid runs over
(tile_m, tile_n) tiles of that group's output and loops over its shared dimension.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def grouped_gemm(group_a, group_b):
    outs = []
    for a, b in zip(group_a, group_b):
        m, k = a.shape
        _, n = b.shape
        acc_dtype = td.float64 if a.dtype == td.float64 else td.float32
        c = td.empty((m, n), dtype=a.dtype)
        for tile_m, tile_n in td.tile(m, n):
            acc = td.zeros((tile_m, tile_n), dtype=acc_dtype)
            for tile_k in td.tile(k):
                acc += a[tile_m, tile_k] @ b[tile_k, tile_n]
            c[tile_m, tile_n] = acc
        outs.append(c)
    return tuple(outs)


DIMS = {"groups": 3, "m": 150, "k": 100, "n": 90}


def group_sizes(dims: dict[str, int]) -> list[tuple[int, int, int]]:
    """(m, k, n) of each group: the dims for the first, smaller (ragged) ones after it."""
    return [(max(1, dims["m"] - 41 * g), max(1, dims["k"] - 23 * g), max(1, dims["n"] - 29 * g))
            for g in range(dims["groups"])]


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """A list of random (m_g, k_g) matrices and a list of random (k_g, n_g) matrices."""
    sizes = group_sizes(dims)
    group_a = [rng.standard_normal((m, k)).astype(dtype) for m, k, _ in sizes]
    group_b = [rng.standard_normal((k, n)).astype(dtype) for _, k, n in sizes]
    return group_a, group_b


def reference(group_a, group_b) -> tuple:
    """Each group's product in float64."""
    return tuple(a.astype(np.float64) @ b.astype(np.float64) for a, b in zip(group_a, group_b))


def baseline(xp, group_a, group_b):
    """What a user of the array library writes (one matmul call per group)."""
    return tuple(a @ b for a, b in zip(group_a, group_b))


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    errs = [td.testing.relative_error(o, r) for o, r in zip(grouped_gemm(*args), reference(*args))]
    print(f"grouped_gemm: relative error {max(errs):.2e} over {len(errs)} groups")


if __name__ == "__main__":
    main()
