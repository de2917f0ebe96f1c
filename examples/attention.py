"""Causal attention forward with online softmax (FlashAttention): out = softmax(q k^T / sqrt(d)) v.

q, k, v have shape (batch * heads, seq, d). The grid runs over (batch-head, query tile) pairs, as
in Triton's fused-attention tutorial, so there are enough programs to fill a GPU: `bh` is a tile
of block size 1, and `bh.begin` its index. Each program loops over the key tiles up to its query
tile's end (`td.tile(tq.end)`: each program has its own trip count, so the tiles after the
diagonal, about half of the work, are skipped), carrying the running row max `m_i`, the running
softmax denominator `l_i` and the unnormalized output `acc`, rescaling them whenever the max
grows. Inside the last tiles, keys after the query are masked to -inf; the diagonal is always
kept, so no valid row is empty.
"""

from __future__ import annotations

import math

import numpy as np

import tiledsl as td


@td.tile_kernel
def attention(q, k, v):
    batch, seq, d = q.shape
    scale = 1.0 / math.sqrt(d)
    cdt = td.float64 if q.dtype == td.float64 else td.float32
    out = td.empty((batch, seq, d), dtype=q.dtype)
    # The parallel grid: one program per (batch-head, query tile).
    for bh, tq in td.tile(batch, seq, block_size=(1, None)):
        b = bh.begin  # the batch-head's index (a scalar)
        qt = q[b, tq, :]
        m_i = td.full((tq,), -float("inf"), dtype=cdt)
        l_i = td.zeros((tq,), dtype=cdt)
        acc = td.zeros((tq, d), dtype=cdt)
        for tk in td.tile(tq.end):  # a sequential loop over the key tiles up to the query's end
            s = (qt @ k[b, tk, :].T) * scale
            s = td.where(tq.index[:, None] >= tk.index[None, :], s, -float("inf"))
            m_new = td.maximum(m_i, td.max(s, axis=1))
            alpha = td.exp(m_i - m_new)
            p = td.exp(s - m_new[:, None])
            l_i = l_i * alpha + td.sum(p, axis=1)
            acc = acc * alpha[:, None] + p.astype(v.dtype) @ v[b, tk, :]
            m_i = m_new
        out[b, tq, :] = acc / l_i[:, None]
    return out


DIMS = {"batch": 3, "seq": 77, "d": 36}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random q, k, v of shape (batch, seq, d)."""
    shape = (dims["batch"], dims["seq"], dims["d"])
    return tuple(rng.standard_normal(shape).astype(dtype) for _ in range(3))


def reference(q, k, v) -> np.ndarray:
    """Causal softmax attention in float64, with the stable (max-subtracted) softmax."""
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    seq, d = q.shape[1], q.shape[2]
    s = np.matmul(q, np.swapaxes(k, 1, 2)) / math.sqrt(d)
    causal = np.tril(np.ones((seq, seq), dtype=bool))
    s = np.where(causal, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.matmul(p, v)


def baseline(xp, q, k, v):
    """What a user of the array library writes (CuPy: cuBLAS batched GEMMs), in the input dtype."""
    d = q.shape[2]
    s = xp.matmul(q, xp.swapaxes(k, 1, 2)) / math.sqrt(d)
    seq = q.shape[1]
    s = xp.where(xp.tril(xp.ones((seq, seq), dtype=bool)), s, -xp.inf)
    p = xp.exp(s - s.max(axis=-1, keepdims=True))
    return xp.matmul(p / p.sum(axis=-1, keepdims=True), v)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = attention(*args)
    print(f"attention: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
