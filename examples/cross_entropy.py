"""Cross entropy per row: loss[i] = logsumexp(logits[i, :]) - logits[i, labels[i]], as Helion's
`cross_entropy` example computes it (torch.nn.functional.cross_entropy, reduction="none").

Each program takes a tile of rows: the whole rows for the log-sum-exp, and one logit per row at
its label, a gather: `logits[tile_n.index, labels_tile]` indexes both dimensions with index tiles
of shape `(tile_n,)`, which broadcast together (NumPy's rule), so the result is one element per
row. Helion writes the same gather through a flat view of the logits
(`hl.load(logits_flat, [tile_n.index * v + labels_tile])`); with 2-D indexing no view is needed.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def cross_entropy(logits, labels):
    n, v = logits.shape
    losses = td.zeros((n,), dtype=logits.dtype)
    for tile_n in td.tile(n):
        labels_tile = labels[tile_n]
        logits_at_target = logits[tile_n.index, labels_tile]  # one logit per row
        logits_rows = logits[tile_n, :]
        max_logits = td.max(logits_rows, axis=-1)
        exp_shifted = td.exp(logits_rows - max_logits[:, None])
        log_sum_exp = max_logits + td.log(td.sum(exp_shifted, axis=-1))
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
