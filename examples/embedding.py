"""Embedding lookup: out[..., :] = weight[x[...], :] (torch.nn.functional.embedding), as Helion's
`embedding` example writes it.

`x` holds indices of any shape. The kernel flattens it with a view (`x.reshape(-1)`, no copy),
gathers rows of the table with `weight[x_flat[tile_b], tile_e]` (a tile of loaded indices, an
index tile, whose shape takes the place of the dimension it indexes: the result is
`(tile_b, tile_e)`), and returns the output as a view of shape `(*x.shape, embedding_dim)`. On
Triton the gather is pointer arithmetic with the loaded indices
(`weight_ptr + idx[:, None] * stride + offs_e[None, :]`); the lanes of a partial last `tile_b`
are masked, and so are indices outside the table.

Where this differs from Helion's text: `hl.tile([a, b])` is `td.tile(a, b)` (td.tile takes the
sizes as arguments, not a list), and sizes are `.shape[...]` rather than `.size(...)`. A view
never copies: a non-contiguous `x` (a transposed array) is an ArgumentError naming the
`x.reshape(-1)` line, where torch's reshape would copy it.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def embedding(x, weight):
    x_flat = x.reshape(-1)  # collapse x into a single dimension
    _, embedding_dim = weight.shape
    out = td.empty((x_flat.shape[0], embedding_dim), dtype=weight.dtype)
    for tile_b, tile_e in td.tile(x_flat.shape[0], embedding_dim):
        out[tile_b, tile_e] = weight[x_flat[tile_b], tile_e]
    # restore the original shape
    return out.view(*x.shape, embedding_dim)


DIMS = {"batch": 3, "n": 100, "vocab": 97, "dim": 64}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """(batch, n) int32 indices into a random (vocab, dim) table."""
    x = rng.integers(0, dims["vocab"], (dims["batch"], dims["n"])).astype(np.int32)
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
