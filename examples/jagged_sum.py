"""Sums over the rows of a jagged tensor: out[b, :] = x_data[x_offsets[b]:x_offsets[b + 1], :]
.sum(axis=0), as Helion's `jagged_sum` example computes it.

The rows are ragged: row b holds `x_offsets[b + 1] - x_offsets[b]` entries (possibly none) of
`x_data`, and the offsets tensor has num_rows + 1 entries. A tile over the rows indexes it twice:
`x_offsets[tile_b]` (a tile over n may index a dimension of n + 1) and
`x_offsets[tile_b.index + 1]` (an index tile). The inner loop runs to the longest row of the
tile (`td.tile(n, stop=max_nnz)`, a runtime stop) and gathers the entries with an index tile of
shape (tile_b, tile_k): `td.load(x_data, [base_indices, tile_m], extra_mask=...)` masks the
entries past each row's end, which read 0. Helion gathers from a flat view of `x_data`
(`hl.load(x_flat, [base_indices[:, :, None] * M + tile_m.index[None, None, :]])`); 2-D indexing
needs no view.
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
    for tile_b in td.tile(num_rows):
        starts = x_offsets[tile_b]
        ends = x_offsets[tile_b.index + 1]
        nnz = ends - starts
        max_nnz = nnz.max()
        for tile_m in td.tile(M):
            row_sums = td.zeros((tile_b, tile_m), dtype=acc_dtype)
            for tile_k in td.tile(x_data.shape[0], stop=max_nnz):
                base_indices = starts[:, None] + tile_k.index[None, :]
                row_mask = tile_k.index[None, :] < nnz[:, None]
                x_slice = td.load(x_data, [base_indices, tile_m], extra_mask=row_mask[:, :, None])
                row_sums = row_sums + x_slice.sum(axis=1)
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
