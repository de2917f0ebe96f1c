"""Seeded dropout (Triton's tutorial 04, "Low-Memory Dropout"): out = x / (1 - p) where a
uniform draw is above p, else 0.

The mask is never stored: each element's draw is `td.rand(seed, offset)` (Philox, bit for bit
Triton's `tl.rand`), a function of the seed and the element's index only. So the same seed gives
the same mask under every block size and on every backend, and a backward pass draws it again.
`td.philox.rand` computes the same draws on the host, which is how `reference` finds the mask.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def seeded_dropout(x, p: float, seed: int):
    (n,) = x.shape
    output = td.empty_like(x)
    for t in td.tile(n):
        random = td.rand(seed, t.index)  # the element's index is its Philox counter
        x_keep = random > p
        output[t] = td.where(x_keep, x[t] / (1 - p), 0.0)
    return output


DIMS = {"n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """A random vector of n elements (no zeros, so a dropped element shows), p and a 64-bit
    seed (its high word feeds Philox's key too)."""
    x = (rng.standard_normal(dims["n"]) + 3.0).astype(dtype)
    return x, 0.3, int(rng.integers(0, 2**63))


def keep_mask(n: int, p: float, seed: int) -> np.ndarray:
    """Which of n elements the kernel keeps: the same draws, on the host."""
    return td.philox.rand(seed, np.arange(n)) > np.float32(p)  # compared in float32, as there


def reference(x, p, seed) -> np.ndarray:
    """Dropout in float64 with the kernel's mask."""
    return np.where(keep_mask(x.size, p, seed), x.astype(np.float64) / (1 - p), 0.0)


def baseline(xp, x, p, seed):
    """What a NumPy/CuPy user writes to get these draws: the mask made on the host, applied
    with the array library in the input dtype."""
    return xp.where(xp.asarray(keep_mask(x.size, p, seed)), x / (1 - p), 0)


def main() -> None:
    """Run on the NumPy backend and on the generated Triton code (interpreted on the CPU): the
    same seed drops the same elements; another seed drops others."""
    rng = np.random.default_rng(0)
    x, p, seed = make_inputs(rng)
    out = seeded_dropout(x, p, seed)
    error = td.testing.relative_error(out, reference(x, p, seed))
    print(f"seeded_dropout: relative error {error:.2e}, kept {np.count_nonzero(out)} of {x.size} "
          f"at p={p}")
    try:
        triton_out = seeded_dropout.run(x, p, seed, backend="triton-interpret")
        print("the generated Triton code drops the same elements:",
              np.array_equal(out != 0, triton_out != 0))
    except (ImportError, td.BackendError) as e:  # no triton or torch installed
        print(f"(triton-interpret not available: {e})")
    other = seeded_dropout(x, p, seed ^ 1)
    print("another seed keeps other elements:", not np.array_equal(out != 0, other != 0))


if __name__ == "__main__":
    main()
