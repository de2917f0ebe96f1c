"""Row sums of a long matrix with a lane accumulator, Helion's `long_sum` (examples/long_sum.py).

`td.register_block_size(n)` makes the block size of the loop over columns before the loop, so
the accumulator can be a tile of that width: lane j of `acc` sums column j of every column
tile, and one reduction over the lanes after the loop gives the row sums (one `tl.sum` per
row tile instead of one per iteration). The block size stays tunable: the config space has a
`block_sizes[i]` for it, as for any `td.tile` call. Past the last partial column tile the
lanes keep what they held, so they add nothing spurious.

It differs from Helion's text in one place: the accumulator is float32 (float64 for float64
inputs), not the input dtype, so half-precision sums stay accurate.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def long_sum(x):
    m, n = x.shape
    acc_dtype = td.float64 if x.dtype == td.float64 else td.float32
    out = td.empty((m,), dtype=x.dtype)

    # The block size of the reduction loop over n, known outside it.
    block_size_n = td.register_block_size(n)

    for tile_m in td.tile(m):
        acc = td.zeros((tile_m, block_size_n), dtype=acc_dtype)
        for tile_n in td.tile(n, block_size=block_size_n):  # the reduction loop over n
            acc += x[tile_m, tile_n].astype(acc_dtype)
        out[tile_m] = acc.sum(-1)
    return out


DIMS = {"m": 4, "n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """One random (m, n) matrix, long along n."""
    return (rng.standard_normal((dims["m"], dims["n"])).astype(dtype),)


def reference(x) -> np.ndarray:
    """The sum over columns in float64."""
    return x.astype(np.float64).sum(axis=-1)


def baseline(xp, x):
    """xp.sum over the last axis, in the input dtype."""
    return x.sum(axis=-1)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = long_sum(*args)
    print(f"long_sum: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
