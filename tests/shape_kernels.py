"""Kernels whose output shapes are functions of their argument sizes in ways a shape function
must follow or refuse (tiledsl/frontend/symdims.py): shared by tests/frontend/test_symdims.py
and tests/interop/test_torch_op.py (torch.compile with dynamic shapes)."""

from __future__ import annotations

import tiledsl as td


@td.tile_kernel
def first_rows(x):
    m, n = x.shape
    rows = min(m, 64)
    out = td.empty((rows, n), dtype=x.dtype)
    for i in td.grid(rows):
        for tn in td.tile(n):
            out[i, tn] = x[i, tn] * 2
    return out


@td.tile_kernel
def pair_sums(x):
    m, n = x.shape
    out = td.empty((m // 2, -(-n // 1)), dtype=x.dtype)
    for i in td.grid(m // 2):
        for tn in td.tile(n):
            out[i, tn] = x[2 * i, tn] + x[2 * i + 1, tn]
    return out


@td.tile_kernel
def through_int(x):
    m, n = x.shape
    rows = int(m)  # the size leaves the arithmetic here
    out = td.empty((rows, n), dtype=x.dtype)
    for tm, tn in td.tile(rows, n):
        out[tm, tn] = x[tm, tn]
    return out
