"""A dot of every program's tiles at once, as few and as large matrix products as the grid allows.

Inside a grid a dot's operands are `prefix + tile`: `a` is (P..., M, K), `b` is (P..., K, N),
their prefixes broadcast. np.matmul would run one small product per program. But a prefix axis
along which only `a` varies (the grid's row tiles of a matmul) just stacks more rows of `a`,
and one along which only `b` varies more columns of `b`: those axes join M and N, and one
product per program of the axes along which both vary (a batch, as attention's heads) computes
every program's tile. With a grid tile of 1 along both (a ragged extent's default) that is the
single product plain NumPy computes, over the tensors themselves.
"""

from __future__ import annotations

import numpy as np


def grid_dot(a: np.ndarray, b: np.ndarray, rank: int) -> np.ndarray:
    """np.matmul(a, b) for operands with `rank` prefix axes (see the module docstring)."""
    pa, pb = a.shape[:rank], b.shape[:rank]
    rows = [i for i in range(rank) if pa[i] > 1 and pb[i] == 1]
    cols = [i for i in range(rank) if pb[i] > 1 and pa[i] == 1]
    if not rows and not cols:
        return np.matmul(a, b)
    batch = [i for i in range(rank) if pa[i] > 1 and pb[i] > 1]
    ones = [i for i in range(rank) if pa[i] == 1 and pb[i] == 1]
    order = [*batch, *rows, *cols, *ones]  # prefix axes regrouped; then the tile's two
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    nb = tuple(pa[i] for i in batch)
    nr, nc = tuple(pa[i] for i in rows), tuple(pb[i] for i in cols)
    r, c = int(np.prod(nr)), int(np.prod(nc))
    a2 = a.transpose(*order, rank, rank + 1).reshape((*nb, r * m, k))  # rows stacked over M
    b2 = b.transpose(*order, rank, rank + 1).reshape((*nb, c, k, n))
    b2 = np.moveaxis(b2, -3, -2).reshape((*nb, k, c * n))  # columns side by side along N
    out = np.matmul(a2, b2).reshape((*nb, *nr, m, *nc, n))
    out = np.moveaxis(out, len(nb) + len(nr), -2)  # (batch, rows, cols, M, N)
    out = out.reshape(out.shape[:-2] + (1,) * len(ones) + (m, n))
    return out.transpose(*np.argsort(order), rank, rank + 1)
