"""Segmented reduction: output[n, :] = the sum of input_data[e, :] over the elements e with
indices[e] == n, for sorted `indices` (PyTorch's scatter_add along rows), as Helion's
`segmented_reduction_helion` example computes it.

As in Helion, each tile of elements is scanned per segment (`_segmented_scan`: an inclusive
scan that restarts where the index changes) and the scan's value is written at each segment's
end, where `idxs != idxs_next` (the next index is a masked load,
`td.load(indices, [tile_e.index + 1], extra_mask=...)`), through the indices: a scatter,
`output[idxs, tile_f]`. `num_nodes` sizes the output, so it is a compile-time int (one trace
per value), as Helion specializes it.

Where this differs from Helion's text, and why: tiledsl has neither `hl.associative_scan` (a scan
with a user combine function) nor `hl.atomic_add`.
- The segmented scan is a matrix product instead: lane i sums the lanes j <= i of its segment,
  `same_segment_before @ vals` with a (tile_e, tile_e) 0/1 matrix, which a GPU runs on its
  tensor cores (exact in float32, float64 for float64 data).
- Helion flushes each tile's last segment with an atomic add, so a segment that spans tiles is
  summed by several programs at once. Without atomics, the element tiles are a sequential loop
  inside each program (the grid runs over feature tiles only) and the tile's last segment is
  carried into the next tile (`carry`, `carry_idx`), so each segment is stored once, by one
  program, at its end. The tile-end term of Helion's mask
  (`tile_e.index % tile_e.block_size == tile_e.block_size - 1`) is then not needed.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


def _segmented_scan(vals, idxs, tile_e):
    """The inclusive scan of `vals` (tile_e, tile_f) along the elements, restarting where `idxs`
    changes (Helion: hl.associative_scan(combine_fn, (vals, idxs), dim=0))."""
    same_before = (idxs[:, None] == idxs[None, :]) & (tile_e.index[None, :] <= tile_e.index[:, None])
    return same_before.astype(vals.dtype) @ vals


@td.tile_kernel
def segment_reduction(indices, input_data, num_nodes: int):
    num_elements, num_features = input_data.shape
    acc_dtype = td.float64 if input_data.dtype == td.float64 else td.float32
    output = td.zeros((num_nodes, num_features), dtype=input_data.dtype)
    for tile_f in td.tile(num_features):
        carry = td.zeros((tile_f,), dtype=acc_dtype)  # the sum so far of the segment left open
        carry_idx = td.full((), -1, dtype=indices.dtype)  # ... and its index
        for tile_e in td.tile(num_elements):
            vals = input_data[tile_e, tile_f]
            idxs = indices[tile_e]
            idxs_next = td.load(indices, [tile_e.index + 1],
                                extra_mask=tile_e.index < num_elements - 1)
            out_vals = _segmented_scan(vals, idxs, tile_e)
            out_vals = td.where((idxs == carry_idx)[:, None], out_vals + carry[None, :], out_vals)
            mask = (idxs != idxs_next) | (tile_e.index == num_elements - 1)
            td.store(output, [idxs, tile_f], out_vals, extra_mask=mask[:, None])
            last = tile_e.index == tile_e.end - 1  # the tile's last segment goes on
            carry = td.sum(td.where(last[:, None], out_vals, 0.0), axis=0)
            carry_idx = td.max(td.where(last, idxs, -1))
    return output


DIMS = {"nodes": 60, "elements": 300, "features": 128}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Sorted int64 segment indices in [0, nodes) (some segments empty), random (elements,
    features) data, and the number of segments."""
    indices = np.sort(rng.integers(0, dims["nodes"], dims["elements"])).astype(np.int64)
    input_data = rng.standard_normal((dims["elements"], dims["features"])).astype(dtype)
    return indices, input_data, dims["nodes"]


def reference(indices, input_data, num_nodes) -> np.ndarray:
    """The sums per segment in float64 (0 for an empty segment)."""
    out = np.zeros((num_nodes, input_data.shape[1]))
    np.add.at(out, indices, input_data.astype(np.float64))
    return out


def baseline(xp, indices, input_data, num_nodes):
    """A scatter-add of the rows (torch's scatter_add_), in the input dtype."""
    out = xp.zeros((num_nodes, input_data.shape[1]), dtype=input_data.dtype)
    xp.add.at(out, indices, input_data)
    return out


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = segment_reduction(*args)
    print(f"segment_reduction: relative error "
          f"{td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
