"""Sums over the rows of a jagged tensor: out[b, :] = x_data[x_offsets[b]:x_offsets[b + 1], :]
.sum(axis=0), as Helion's `jagged_sum` example writes it.

The rows are ragged: row b holds `x_offsets[b + 1] - x_offsets[b]` entries (possibly none) of
`x_data`, and the offsets tensor has num_rows + 1 entries. A tile over the rows indexes it twice:
`x_offsets[tile_b]` (a tile over n may index a dimension of n + 1) and
`x_offsets[tile_b.index + 1]` (an index tile). The inner loop runs to the longest row of the
tile and gathers the entries from a flat view of `x_data` (`x_data.view(-1)`, no copy) at
`base_indices[:, :, None] * M + tile_m.index[None, None, :]`, with `extra_mask=` cutting each
row at its end (masked entries read 0).

Where this differs from Helion's text, and why:
- Helion's inner loop is `hl.tile(0, max_nnz)`, a loop to a loaded maximum. td.tile's
  positional arguments are the sizes of a multi-dimensional tile, and a loaded value cannot be
  bounded while tracing, so the loop names its static bound: `td.tile(x_data.shape[0],
  stop=max_nnz)` (`td.tile(max_nnz)` is a TraceError that says so).
- The row sums accumulate in float32 (float64 for float64 entries), where Helion uses the
  entries' dtype: a sum of 16-bit floats is float32 here, and a loop-carried value keeps its
  dtype (`row_sums` in float16 is a TraceError naming it).
- `nnz.amax()` and `x_slice.sum(dim=1)` are `nnz.max()` and `x_slice.sum(axis=1)`.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def jagged_sum(x_data, x_offsets):
    M = x_data.shape[1]
    num_rows = x_offsets.shape[0] - 1
    acc_dtype = td.float64 if x_data.dtype == td.float64 else td.float32

    out = td.zeros((num_rows, M), dtype=x_data.dtype)

    # Flatten x_data for easier indexing
    x_flat = x_data.view(-1)

    # Process rows in tiles
    for tile_b in td.tile(num_rows):
        starts = x_offsets[tile_b]
        ends = x_offsets[tile_b.index + 1]
        nnz = ends - starts
        max_nnz = nnz.max()

        # Process features in tiles
        for tile_m in td.tile(M):
            # Initialize accumulator
            row_sums = td.zeros((tile_b, tile_m), dtype=acc_dtype)

            # Process elements within each row
            for tile_k in td.tile(x_data.shape[0], stop=max_nnz):
                # Compute flattened indices
                base_indices = starts[:, None] + tile_k.index[None, :]
                flat_indices = base_indices[:, :, None] * M + tile_m.index[None, None, :]

                # Combined mask: valid row element AND valid feature
                row_mask = tile_k.index[None, :] < nnz[:, None]
                combined_mask = row_mask[:, :, None]

                x_slice = td.load(x_flat, [flat_indices], extra_mask=combined_mask)
                # Accumulate - sum across the k dimension (axis=1)
                row_sums = row_sums + x_slice.sum(axis=1)

            # Apply feature mask to output
            out[tile_b, tile_m] = row_sums

    return out


DIMS = {"rows": 37, "m": 64, "max_len": 29}


def make_offsets(rng: np.random.Generator, rows: int, max_len: int) -> np.ndarray:
    """rows + 1 int64 offsets of rows of 0 to max_len entries (the first has at least one)."""
    lengths = rng.integers(0, max_len + 1, rows)
    lengths[0] = max(lengths[0], 1)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random entries (total, m) and the offsets of `rows` jagged rows."""
    offsets = make_offsets(rng, dims["rows"], dims["max_len"])
    x_data = rng.standard_normal((int(offsets[-1]), dims["m"])).astype(dtype)
    return x_data, offsets


def reference(x_data, x_offsets) -> np.ndarray:
    """Each row's sum in float64 (0 for an empty row)."""
    x = x_data.astype(np.float64)
    return np.stack([x[s:e].sum(axis=0) for s, e in zip(x_offsets[:-1], x_offsets[1:])])


def baseline(xp, x_data, x_offsets):
    """A sum per row, in the input dtype."""
    return xp.stack([x_data[s:e].sum(axis=0) for s, e in zip(x_offsets[:-1].tolist(),
                                                             x_offsets[1:].tolist())])


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = jagged_sum(*args)
    print(f"jagged_sum: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
