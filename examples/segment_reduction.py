"""Segmented reduction: output[n, :] = the sum of input_data[e, :] over the elements e with
indices[e] == n, for sorted `indices` (PyTorch's scatter_add along rows), written as Helion's
`segmented_reduction_helion` example.

The grid runs over (element, feature) tiles. Each tile is scanned along the elements with a
segmented combine function (`td.associative_scan(combine_fn, (vals, idxs), dim=0)`: a running
sum that restarts where the index changes), so the scan's value at a segment's last element in
the tile is the tile's part of that segment. Those lanes (where `idxs != idxs_next`, the next
index a masked load `td.load(indices, [tile_e.index + 1], extra_mask=...)`, and the tile's last
lane) add their part into `output[idxs, tile_f]` with `td.atomic_add`: a segment that spans
tiles is summed by several programs, so float32 results depend on the order of the atomics (the
NumPy backend's order is defined; a GPU's is not). `num_nodes` sizes the output, so it is a
compile-time int (one trace per value), as Helion specializes it.

Where this differs from Helion's text, and why: Helion's output has the input's dtype; atomics take 32- and 64-bit tensors only, so here it is float32 (float64 for
float64 data), as `examples/matmul_split_k.py` accumulates.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


def combine_fn(left_values, left_indices, right_values, right_indices):
    """Adds values of one segment (equal indices); a new segment starts from the right value."""
    combined_values = td.where(left_indices == right_indices, left_values + right_values,
                               right_values)
    return combined_values, right_indices


def _segmented_scan(vals, idxs):
    """The inclusive scan of `vals` (tile_e, tile_f) along the elements, restarting where
    `idxs` (tile_e,) changes; returns the scanned values and the indices."""
    tuple_in = (vals, idxs.unsqueeze(1).expand_as(vals))
    return td.associative_scan(combine_fn, tuple_in, dim=0)


@td.tile_kernel
def segment_reduction(indices, input_data, num_nodes: int):
    num_elements, num_features = input_data.shape
    acc_dtype = td.float64 if input_data.dtype == td.float64 else td.float32
    output = td.zeros((num_nodes, num_features), dtype=acc_dtype)
    for tile_e, tile_f in td.tile([num_elements, num_features]):
        vals = input_data[tile_e, tile_f]
        idxs = indices[tile_e]
        idxs_next = td.load(indices, [tile_e.index + 1],
                            extra_mask=tile_e.index < num_elements - 1)
        out_vals, _ = _segmented_scan(vals, idxs)
        mask = (
            (idxs != idxs_next)
            | (tile_e.index % tile_e.block_size == tile_e.block_size - 1)
            | (tile_e.index == num_elements - 1)
        )
        segment_vals = td.where(mask.unsqueeze(1), out_vals, 0.0)
        td.atomic_add(output, [idxs, tile_f], segment_vals)
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
