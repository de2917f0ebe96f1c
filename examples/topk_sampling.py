"""Top-k sampling's deterministic part: the k largest logits of each row, their token ids, and
the softmax over them (the distribution a sampler draws the next token from).

Each program takes a block of rows whole (`logits[tm, :]`), as a Triton kernel holds a row of
the vocabulary in registers, and `td.topk` picks the best k lanes per row: largest first, ties
to the lower token id, and lanes past the vocabulary's end never picked. On Triton that is
`tl.topk` on keys that pack each logit with its position.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td

K = 8  # candidates kept per row (all of them in a vocabulary of fewer)


@td.tile_kernel
def topk_sampling(logits):
    m, vocab = logits.shape
    k = min(K, vocab)
    values = td.empty((m, k), dtype=logits.dtype)
    tokens = td.empty((m, k), dtype=td.int32)
    probs = td.empty((m, k), dtype=logits.dtype)
    for tm in td.tile(m):
        row = logits[tm, :]
        top, pos = td.topk(row, k, axis=1)
        values[tm, :] = top
        tokens[tm, :] = pos  # the row starts at lane 0: positions are token ids
        e = td.exp(top - td.max(top, axis=1, keepdims=True))
        probs[tm, :] = e / td.sum(e, axis=1, keepdims=True)
    return values, tokens, probs


DIMS = {"m": 64, "vocab": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """(m, vocab) logits."""
    return (3.0 * rng.standard_normal((dims["m"], dims["vocab"]))).astype(dtype),


def reference(logits) -> tuple:
    """Values, token ids and probabilities in float64 (ties to the lower id)."""
    x = logits.astype(np.float64)
    tokens = np.argsort(-x, axis=1, kind="stable")[:, :K]
    top = np.take_along_axis(x, tokens, axis=1)
    e = np.exp(top - top[:, :1])
    return top, tokens, e / e.sum(axis=1, keepdims=True)


def baseline(xp, logits):
    """argsort the rows, keep the first K, softmax them."""
    tokens = xp.argsort(-logits, axis=1, kind="stable")[:, :K]
    top = xp.take_along_axis(logits, tokens, axis=1)
    e = xp.exp(top - top[:, :1])
    return top, tokens.astype(xp.int32), (e / e.sum(axis=1, keepdims=True)).astype(logits.dtype)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the error of the probabilities."""
    rng = np.random.default_rng(0)
    (logits,) = make_inputs(rng)
    _, tokens, probs = topk_sampling(logits)
    ref = reference(logits)
    assert np.array_equal(tokens, ref[1])
    print(f"topk_sampling: relative error {td.testing.relative_error(probs, ref[2]):.2e}")


if __name__ == "__main__":
    main()
