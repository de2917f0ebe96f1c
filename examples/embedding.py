"""Embedding lookup: out[i, :] = weight[x[i], :] (torch.nn.functional.embedding), as Helion's
`embedding` example writes it.

A gather: `weight[x[tile_b], tile_e]` indexes the table's rows with a tile of loaded indices (an
index tile), and its columns with a tile. The index tile's shape takes the place of the
dimension it indexes, so the result is `(tile_b, tile_e)`. On Triton this is pointer arithmetic
with the loaded indices (`weight_ptr + idx[:, None] * stride + offs_e[None, :]`); the lanes of a
partial last `tile_b` are masked, and so are indices outside the table. Helion flattens `x` of
any shape first (`x.reshape(-1)`); here `x` is 1-D.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def embedding(x, weight):
    _, embedding_dim = weight.shape
    out = td.empty((x.shape[0], embedding_dim), dtype=weight.dtype)
    for tile_b, tile_e in td.tile(x.shape[0], embedding_dim):
        out[tile_b, tile_e] = weight[x[tile_b], tile_e]
    return out


DIMS = {"n": 300, "vocab": 97, "dim": 64}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """n int32 indices into a random (vocab, dim) table."""
    x = rng.integers(0, dims["vocab"], dims["n"]).astype(np.int32)
    weight = rng.standard_normal((dims["vocab"], dims["dim"])).astype(dtype)
    return x, weight


def reference(x, weight) -> np.ndarray:
    """The rows of the table, in float64."""
    return weight.astype(np.float64)[x]


def baseline(xp, x, weight):
    """xp.take along the rows (what `weight[x]` does)."""
    return xp.take(weight, x, axis=0)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = embedding(*args)
    print(f"embedding: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
