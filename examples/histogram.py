"""Histogram: counts[b] = how many elements of x fall in bin b of `bins` equal bins over [0, 1).

Each program bins its tile of x and adds ones at the gathered bins with `td.atomic_add`: many
lanes of many programs meet the same count, and each addition counts (the atomic is a
read-modify-write of each element). Integer atomics are exact in any order, so the counts
match the reference exactly on every backend.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def histogram(x, bins: td.constexpr):
    n = x.shape[0]
    counts = td.zeros((bins,), dtype=td.int32)
    for t in td.tile(n):
        b = td.minimum((x[t].astype(td.float32) * bins).astype(td.int32), bins - 1)
        td.atomic_add(counts, [b], 1)
    return counts


DIMS = {"n": 300, "bins": 16}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Uniform samples in [0, 1) and the number of bins (a compile-time int)."""
    return (rng.random(dims["n"]).astype(dtype), dims["bins"])


def reference(x, bins) -> np.ndarray:
    """The counts of the bins of the same float32 products (bins are exact: no rounding)."""
    b = np.minimum((x.astype(np.float32) * np.float32(bins)).astype(np.int64), bins - 1)
    return np.bincount(b, minlength=bins).astype(np.int32)


def baseline(xp, x, bins):
    """xp.bincount of the bins."""
    b = xp.minimum((x.astype(xp.float32) * xp.float32(bins)).astype(xp.int32), bins - 1)
    return xp.bincount(b, minlength=bins).astype(xp.int32)


def main() -> None:
    """Run on the NumPy backend and check the counts."""
    args = make_inputs(np.random.default_rng(0))
    counts = histogram(*args)
    print(f"histogram: {counts.sum()} elements in {len(counts)} bins, "
          f"exact: {bool((counts == reference(*args)).all())}")


if __name__ == "__main__":
    main()
