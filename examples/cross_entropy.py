"""Cross entropy per row: loss[i] = logsumexp(logits[i, :]) - logits[i, labels[i]], as Helion's
`cross_entropy` example writes it (torch.nn.functional.cross_entropy, reduction="none").

Each program takes a tile of rows: the whole rows for the log-sum-exp, and one logit per row at
its label, gathered from a flat view of the logits (`logits.view(-1)`, no copy) at
`tile_n.index * v + labels_tile` with `td.load(logits_flat, [flat_indices])`. On Triton the
gather is `tl.load(logits_ptr + offs_tile_n * v + labels_tile, mask=...)`, masked where a label
falls outside the logits.

Where this differs from Helion's text: `torch.amax(..., dim=-1, keepdim=True)` and `torch.sum`
are `td.max(..., axis=-1, keepdims=True)` and `td.sum` (NumPy's names), and `torch.zeros([n])`
is `td.zeros((n,))`. Nothing else.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def cross_entropy(logits, labels):
    n, v = logits.shape
    losses = td.zeros((n,), dtype=logits.dtype)

    # Flatten logits once at the beginning
    logits_flat = logits.view(-1)

    for tile_n in td.tile(n):
        # Get data for this tile
        labels_tile = labels[tile_n]  # [tile_size]
        base_indices_tile = tile_n.index * v  # [tile_size]

        # Compute the actual flat indices by adding the label offset
        flat_indices = base_indices_tile + labels_tile

        # Load the logits at the target indices
        logits_at_target = td.load(logits_flat, [flat_indices])

        # Compute log_softmax for numerical stability
        # Load the full rows for this tile
        logits_rows = logits[tile_n, :]  # [tile_size, V]

        # Compute log-sum-exp
        max_logits = td.max(logits_rows, axis=-1, keepdims=True)
        shifted = logits_rows - max_logits
        exp_shifted = td.exp(shifted)
        sum_exp = td.sum(exp_shifted, axis=-1, keepdims=True)
        log_sum_exp = max_logits.squeeze(-1) + td.log(sum_exp.squeeze(-1))

        # Cross entropy loss: log_sum_exp - logit_at_target
        losses[tile_n] = log_sum_exp - logits_at_target

    return losses


DIMS = {"n": 128, "v": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random (n, v) logits and n int64 labels in [0, v)."""
    logits = rng.standard_normal((dims["n"], dims["v"])).astype(dtype)
    labels = rng.integers(0, dims["v"], dims["n"]).astype(np.int64)
    return logits, labels


def reference(logits, labels) -> np.ndarray:
    """The losses in float64."""
    x = logits.astype(np.float64)
    top = x.max(axis=1)
    lse = top + np.log(np.exp(x - top[:, None]).sum(axis=1))
    return lse - x[np.arange(x.shape[0]), labels]


def baseline(xp, logits, labels):
    """Log-sum-exp minus the logit at the label, in the input dtype."""
    top = logits.max(axis=1)
    lse = top + xp.log(xp.exp(logits - top[:, None]).sum(axis=1))
    return (lse - logits[xp.arange(logits.shape[0]), labels]).astype(logits.dtype)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = cross_entropy(*args)
    print(f"cross_entropy: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
