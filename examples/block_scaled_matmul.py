"""Block-scaled FP8 matmul: out = (a * sa) @ (b * sb), with float8_e4m3fn operands and float32
scales per block of 32 along k (the idea of Triton's tutorial 10, in its simplest form): row i of
`a` has one scale `a_scale[i, kb]` per block kb of k, and column j of `b` one scale
`b_scale[kb, j]`.

The k loop steps one scale block at a time (`block_size=SCALE_BLOCK`), so each k tile meets one
column of `a_scale` and one row of `b_scale`: the fp8 tiles are multiplied as they are (an fp8
`wgmma` on sm_90, accumulating in float32), and the block's product is scaled per row and per
column before it is added, `acc += (a[tm, tk] @ b[tk, tn]) * sa[:, None] * sb[None, :]`. The
scales are powers of two, as MX formats' E8M0 scales are; the tutorial's scaled `tl.dot_scaled`
(the scales applied inside the tensor-core instruction, sm_100) is not used.

The operands are small integers (exact in e4m3fn) and the scales powers of two in [1/4, 4], so
every sum is exact in float32 and the float64 reference is the true product.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

import tiledsl as td

SCALE_BLOCK = 32  # elements of k that share one scale


@td.tile_kernel
def block_scaled_matmul(a, b, a_scale, b_scale, out_dtype="float16"):
    m, k = a.shape
    k2, n = b.shape
    assert k == k2, f"size mismatch {k} != {k2}"
    out = td.empty((m, n), dtype=out_dtype)
    for tile_m, tile_n in td.tile(m, n):
        acc = td.zeros((tile_m, tile_n), dtype=td.float32)
        for tile_k in td.tile(k, block_size=SCALE_BLOCK):
            kb = tile_k.begin // SCALE_BLOCK  # the scale block of this k tile
            sa = a_scale[tile_m, kb]
            sb = b_scale[kb, tile_n]
            acc += (a[tile_m, tile_k] @ b[tile_k, tile_n]) * sa[:, None] * sb[None, :]
        out[tile_m, tile_n] = acc.astype(out_dtype)
    return out


DIMS = {"m": 150, "k": 100, "n": 90}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """(m, k) and (k, n) float8_e4m3fn matrices of integers in [-8, 8], their float32 scales
    ((m, kb) and (kb, n) powers of two in [1/4, 4], kb = ceil(k / 32)), and the output dtype's
    name (`dtype`)."""
    m, k, n = dims["m"], dims["k"], dims["n"]
    kb = -(-k // SCALE_BLOCK)
    a = rng.integers(-8, 9, (m, k)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    b = rng.integers(-8, 9, (k, n)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    a_scale = np.exp2(rng.integers(-2, 3, (m, kb))).astype(np.float32)
    b_scale = np.exp2(rng.integers(-2, 3, (kb, n))).astype(np.float32)
    return a, b, a_scale, b_scale, np.dtype(dtype).name


def _expand(scale: np.ndarray, k: int, axis: int) -> np.ndarray:
    """Each scale repeated over its block of k (cut to k at the ragged end)."""
    return np.repeat(scale, SCALE_BLOCK, axis=axis).take(np.arange(k), axis=axis)


def reference(a, b, a_scale, b_scale, out_dtype="float16") -> np.ndarray:
    """The dequantized operands' product in float64."""
    k = a.shape[1]
    a64 = a.astype(np.float64) * _expand(a_scale.astype(np.float64), k, 1)
    b64 = b.astype(np.float64) * _expand(b_scale.astype(np.float64), k, 0)
    return a64 @ b64


def baseline(xp, a, b, a_scale, b_scale, out_dtype="float16"):
    """What a NumPy user writes: dequantize each operand in float32, multiply, cast."""
    k = a.shape[1]
    a32 = a.astype(xp.float32) * xp.repeat(a_scale, SCALE_BLOCK, axis=1)[:, :k]
    b32 = b.astype(xp.float32) * xp.repeat(b_scale, SCALE_BLOCK, axis=0)[:k]
    return xp.matmul(a32, b32).astype(out_dtype)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = block_scaled_matmul(*args)
    print(f"block_scaled_matmul: relative error "
          f"{td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
