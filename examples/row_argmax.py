"""Greedy decoding's argmax: the position of each row's largest value (a row of logits gives the
next token's id), out[i] = argmax_j x[i, j].

The grid runs over tiles of rows; each program walks the columns with a sequential tile loop,
carrying the best value so far and its position. `x[tm, tn].argmax(axis=1)` is a position
inside the tile, so `tn.begin` is added to make it global. A later tile takes over only with a
strictly larger value, so ties go to the first position; a NaN wins, as in NumPy's argmax. The
partial last column tile is masked with -inf, which can only tie, and ties go to the first lane.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def row_argmax(x):
    m, n = x.shape
    acc_dtype = td.float64 if x.dtype == td.float64 else td.float32
    out = td.empty((m,), dtype=td.int32)
    for tm in td.tile(m):  # the parallel grid over row tiles
        best = td.full((tm,), -float("inf"), dtype=acc_dtype)
        at = td.zeros((tm,), dtype=td.int32)
        for tn in td.tile(n):  # a sequential loop over column tiles; `best`, `at` are carried
            tile = x[tm, tn].astype(acc_dtype)
            top = tile.max(axis=1)
            wins = (top > best) | ((top != top) & (best == best))  # larger, or the first NaN
            at = td.where(wins, tn.begin + tile.argmax(axis=1), at)
            best = td.where(wins, top, best)
        out[tm] = at
    return out


DIMS = {"m": 150, "n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """One random (m, n) matrix of logits."""
    return (rng.standard_normal((dims["m"], dims["n"])).astype(dtype),)


def reference(x) -> np.ndarray:
    """NumPy's argmax over columns (in float64: the same positions)."""
    return x.astype(np.float64).argmax(axis=1)


def baseline(xp, x):
    """xp.argmax over rows."""
    return xp.argmax(x, axis=1)


def main() -> None:
    """Run on the NumPy backend with the default dims and count the rows that differ."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = row_argmax(*args)
    print(f"row_argmax: {int((out != reference(*args)).sum())} of {len(out)} rows differ")


if __name__ == "__main__":
    main()
