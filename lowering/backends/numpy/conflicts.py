"""A scatter whose equal indices write different values: a race the NumPy backend refuses.

Two lanes of one index tile (or two programs' index tiles) that name the same element store
to it in an order no GPU defines: Triton keeps one of the writes, and which one may change from
run to run. Where the values agree (`seen[idx] = 1`) any order gives the same result, so only
differing values are an error (the executor names the tensor and the line). Helion's
moe_matmul_ogs writes back `where(valid, acc, existing)` through rows that repeat for the
invalid lanes: this is how such a kernel is caught on the CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Conflict(Exception):
    """Equal indices that write different values (the first such element, and two of them)."""

    def __init__(self, index: tuple[int, ...], first: Any, second: Any) -> None:
        super().__init__(index, first, second)
        self.index, self.first, self.second = index, first, second


def check(shape: tuple[int, ...], indices: list[np.ndarray], values: np.ndarray) -> None:
    """Raise Conflict if two entries of `indices` (equal-length 1-D arrays, one per dimension
    of a tensor of `shape`, all in range) name one element with different `values`."""
    if values.size < 2:
        return
    flat = np.ravel_multi_index(tuple(indices), shape)
    order = np.argsort(flat, kind="stable")
    flat, values = flat[order], values[order]
    same = flat[1:] == flat[:-1]
    if not same.any():
        return
    a, b = values[:-1][same], values[1:][same]
    differ = a != b
    if values.dtype.kind in "fc":
        differ &= ~(np.isnan(a) & np.isnan(b))
    if differ.any():
        at = int(np.flatnonzero(same)[np.argmax(differ)])
        index = tuple(int(i) for i in np.unravel_index(flat[at], shape))
        raise Conflict(index, values[at].item(), values[at + 1].item())
