"""Helion's `low_mem_dropout`: dropout of a tensor of any shape, its mask drawn from a seed.

The kernel flattens `x` to one dimension (a view, no copy), draws one uniform per element with
`td.rand(seed, index)` (Helion writes `hl.rand([tidx], seed=seed)`), scales the kept elements
by 1 / (1 - p) in float32 (float64 for float64 inputs), and stores them in x's dtype, viewed
back in x's shape. The backward pass is the same kernel applied to the gradient with the same
seed: it draws the same mask, so no mask is kept between the passes (see `main`).
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def low_mem_dropout(p: float, x, seed: int):
    scale = 1.0 / (1.0 - p)
    cdt = td.float64 if x.dtype == td.float64 else td.float32
    x_flat = x.view(-1)  # flatten to 1-D so one tile loop covers any shape
    (n,) = x_flat.shape
    out_flat = td.empty_like(x_flat)
    for tidx in td.tile(n):
        xi = x_flat[tidx].to(cdt)
        r = td.rand(seed, tidx.index)
        keep = r > p
        yscaled = xi * scale
        yi = td.where(keep, yscaled, 0.0)
        out_flat[tidx] = yi.to(x.dtype)
    return out_flat.view(*x.shape)


DIMS = {"m": 150, "n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """p, a random (m, n) matrix with no zeros (so a dropped element shows), and a seed."""
    x = (rng.standard_normal((dims["m"], dims["n"])) + 3.0).astype(dtype)
    return 0.25, x, int(rng.integers(0, 2**31))


def keep_mask(shape: tuple[int, ...], p: float, seed: int) -> np.ndarray:
    """The elements the kernel keeps, drawn on the host: the draws of the flat indices."""
    return (td.philox.rand(seed, np.arange(int(np.prod(shape)))) > np.float32(p)).reshape(shape)


def reference(p, x, seed) -> np.ndarray:
    """Dropout in float64 with the kernel's mask."""
    return np.where(keep_mask(x.shape, p, seed), x.astype(np.float64) / (1.0 - p), 0.0)


def baseline(xp, p, x, seed):
    """What a NumPy/CuPy user writes to get these draws: the mask made on the host, applied
    with the array library in the input dtype."""
    return xp.where(xp.asarray(keep_mask(x.shape, p, seed)), x * (1.0 / (1.0 - p)), 0)


def main() -> None:
    """Forward on the NumPy backend, then the backward pass (the same kernel on a gradient of
    ones) drops the same elements, as Helion's check does."""
    rng = np.random.default_rng(0)
    p, x, seed = make_inputs(rng)
    out = low_mem_dropout(p, x, seed)
    error = td.testing.relative_error(out, reference(p, x, seed))
    print(f"low_mem_dropout: relative error {error:.2e}")
    grad_x = low_mem_dropout(p, np.ones_like(x), seed)
    print("the backward pass drops the same elements:", np.array_equal(out != 0, grad_x != 0))


if __name__ == "__main__":
    main()
