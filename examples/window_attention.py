"""Sliding-window attention (Mistral's local attention): each query attends to itself and the
WINDOW - 1 keys before it, out = softmax(q k^T / sqrt(d) + mask) v.

As in examples/attention.py, the grid runs over (batch-head, query tile) pairs and each program
keeps an online softmax over key tiles. Here the key loop has a runtime start as well as a
stop, `td.tile(tq.end, start=tq.begin - WINDOW + 1)`: it visits only the key tiles that meet
the query tile's window, so the work per query tile is bounded by the window, not by the
sequence. Inside those tiles `td.where` masks the keys outside each query's own window. A
query row can meet a whole key tile of masked keys before it meets one of its own, so the
running max is guarded (`m_safe`) to keep exp(-inf - -inf) out of the sums.
"""

from __future__ import annotations

import math

import numpy as np

import tiledsl as td

WINDOW = 48  # keys per query, itself included (a constant of the model, as in Mistral)


@td.tile_kernel
def window_attention(q, k, v):
    batch, seq, d = q.shape
    scale = 1.0 / math.sqrt(d)
    cdt = td.float64 if q.dtype == td.float64 else td.float32
    out = td.empty((batch, seq, d), dtype=q.dtype)
    for bh, tq in td.tile(batch, seq, block_size=(1, None)):
        b = bh.begin
        qt = q[b, tq, :]
        m_i = td.full((tq,), -float("inf"), dtype=cdt)
        l_i = td.zeros((tq,), dtype=cdt)
        acc = td.zeros((tq, d), dtype=cdt)
        # The key tiles that meet [tq.begin - WINDOW + 1, tq.end): a loop with a runtime start.
        for tk in td.tile(tq.end, start=tq.begin - WINDOW + 1):
            s = (qt @ k[b, tk, :].T) * scale
            dist = tq.index[:, None] - tk.index[None, :]
            s = td.where((dist >= 0) & (dist < WINDOW), s, -float("inf"))
            m_new = td.maximum(m_i, td.max(s, axis=1))
            m_safe = td.where(m_new == -float("inf"), 0.0, m_new)  # rows with no key yet
            alpha = td.exp(m_i - m_safe)
            p = td.exp(s - m_safe[:, None])
            l_i = l_i * alpha + td.sum(p, axis=1)
            acc = acc * alpha[:, None] + p.astype(v.dtype) @ v[b, tk, :]
            m_i = m_new
        out[b, tq, :] = acc / l_i[:, None]
    return out


DIMS = {"batch": 2, "seq": 130, "d": 24}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random q, k, v of shape (batch, seq, d)."""
    shape = (dims["batch"], dims["seq"], dims["d"])
    return tuple(rng.standard_normal(shape).astype(dtype) for _ in range(3))


def _window(seq: int) -> np.ndarray:
    dist = np.arange(seq)[:, None] - np.arange(seq)[None, :]
    return (dist >= 0) & (dist < WINDOW)


def reference(q, k, v) -> np.ndarray:
    """Sliding-window softmax attention in float64, with the stable softmax."""
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    s = np.matmul(q, np.swapaxes(k, 1, 2)) / math.sqrt(q.shape[2])
    s = np.where(_window(q.shape[1]), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.matmul(p / p.sum(axis=-1, keepdims=True), v)


def baseline(xp, q, k, v):
    """What a user of the array library writes (the whole score matrix, masked), in the input
    dtype."""
    s = xp.matmul(q, xp.swapaxes(k, 1, 2)) / math.sqrt(q.shape[2])
    s = xp.where(xp.asarray(_window(q.shape[1])), s, -xp.inf)
    p = xp.exp(s - s.max(axis=-1, keepdims=True))
    return xp.matmul(p / p.sum(axis=-1, keepdims=True), v)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = window_attention(*args)
    print(f"window_attention: relative error "
          f"{td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
