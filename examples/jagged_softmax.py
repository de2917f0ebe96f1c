"""Softmax over each row of a jagged tensor, along its entries: for row b, the entries
x_data[x_offsets[b]:x_offsets[b + 1], :] are softmaxed along axis 0 (per feature), as Helion's
`jagged_softmax` example writes it.

A tile over the rows reads the row bounds from the offsets tensor of num_rows + 1 entries
(`x_offsets[tile_b]`, `x_offsets[tile_b.index + 1]`). Two passes over the entries of the tile's
rows, each to the longest row: the first keeps an online maximum and sum of exponentials, the
second writes the normalized values. Both index flat views (`x_data.view(-1)`, and a flat
output of N * M entries, returned as `out.reshape((N, M))`, a view) at
`base_indices[:, :, None] * M + tile_m.index[None, None, :]`, with `extra_mask=` cutting each
row at its end (`td.load` / `td.store`).

Where this differs from Helion's text, and why:
- Helion reads N on the host (`N = x_offsets[-1].item()`); a kernel cannot read a tensor on
  the host, so N is `x_data.shape[0]` (the same value for well-formed offsets).
- Helion's loops are `hl.tile(max_seqlen)`, to a loaded maximum. A loaded value cannot be
  bounded while tracing, so each names its static bound: `td.tile(N, stop=max_seqlen)`
  (`td.tile(max_seqlen)` is a TraceError that says so).
- The running maximum and sum are float32 (float64 for float64 entries) rather than the
  entries' dtype, since a sum of 16-bit floats is float32 here and a loop-carried value keeps
  its dtype.
- `.amax(dim=1)`, `.sum(dim=1)`, `torch.where` and `torch.maximum` are `.max(axis=1)`,
  `.sum(axis=1)`, `td.where` and `td.maximum`.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def jagged_softmax(x_data, x_offsets):
    N = x_data.shape[0]
    num_rows, M = x_offsets.shape[0] - 1, x_data.shape[1]
    acc_dtype = td.float64 if x_data.dtype == td.float64 else td.float32
    out = td.zeros((N * M,), dtype=x_data.dtype)

    # flatten
    x_flat = x_data.view(-1)

    for tile_b in td.tile(num_rows):
        starts = x_offsets[tile_b]
        ends = x_offsets[tile_b.index + 1]
        seqlens = ends - starts
        max_seqlen = seqlens.max()

        for tile_m in td.tile(M):

            block_max = td.full((tile_b, tile_m), 0.0, dtype=acc_dtype)
            block_new_max = td.full((tile_b, tile_m), 0.0, dtype=acc_dtype)
            block_L = td.full((tile_b, tile_m), 0.0, dtype=acc_dtype)

            for tile_k in td.tile(N, stop=max_seqlen):
                base_indices = starts[:, None] + tile_k.index[None, :]
                flat_indices = base_indices[:, :, None] * M + tile_m.index[None, None, :]
                row_mask = tile_k.index[None, :] < seqlens[:, None]
                combined_mask = row_mask[:, :, None] & (tile_m.index < M)[None, None, :]
                x_slice = td.load(x_flat, [flat_indices], extra_mask=combined_mask)
                slice_max = td.where(combined_mask, x_slice, float("-inf")).max(axis=1)
                block_new_max = td.maximum(block_max, slice_max)
                block_L = block_L * td.exp(block_max - block_new_max) + td.exp(
                    td.where(combined_mask, x_slice - block_new_max[:, None, :], float("-inf"))
                ).sum(axis=1)
                block_max = block_new_max

            for tile_k in td.tile(N, stop=max_seqlen):
                base_indices = starts[:, None] + tile_k.index[None, :]
                flat_indices = base_indices[:, :, None] * M + tile_m.index[None, None, :]
                row_mask = tile_k.index[None, :] < seqlens[:, None]
                combined_mask = row_mask[:, :, None] & (tile_m.index < M)[None, None, :]
                x_slice = td.load(x_flat, [flat_indices], extra_mask=combined_mask)
                block_out = td.exp(x_slice - block_max[:, None, :]) / block_L[:, None, :]
                td.store(out, [flat_indices], block_out, extra_mask=combined_mask)

    out = out.reshape((N, M))
    return out


DIMS = {"rows": 37, "m": 64, "max_len": 29}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random entries (total, m) and the int64 offsets of `rows` rows of 0 to max_len entries
    (the first has at least one)."""
    lengths = rng.integers(0, dims["max_len"] + 1, dims["rows"])
    lengths[0] = max(lengths[0], 1)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    x_data = rng.standard_normal((int(offsets[-1]), dims["m"])).astype(dtype)
    return x_data, offsets


def reference(x_data, x_offsets) -> np.ndarray:
    """Each row's softmax along its entries, in float64."""
    x = x_data.astype(np.float64)
    out = np.zeros_like(x)
    for s, e in zip(x_offsets[:-1], x_offsets[1:]):
        if e > s:
            z = np.exp(x[s:e] - x[s:e].max(axis=0))
            out[s:e] = z / z.sum(axis=0)
    return out


def baseline(xp, x_data, x_offsets):
    """A softmax per row, in the input dtype, concatenated."""
    parts = []
    for s, e in zip(x_offsets[:-1].tolist(), x_offsets[1:].tolist()):
        z = xp.exp(x_data[s:e] - x_data[s:e].max(axis=0, initial=-xp.inf))
        parts.append(z / z.sum(axis=0))
    return xp.concatenate(parts).astype(x_data.dtype)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = jagged_softmax(*args)
    print(f"jagged_softmax: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
