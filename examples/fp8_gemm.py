"""FP8 GEMM: out = x @ y on float8_e4m3fn inputs, accumulated in float32 (Helion's `fp8_gemm`).

The tiles are loaded as fp8 and multiplied directly: on an sm_90 GPU `@` on fp8 tiles is an fp8
`wgmma` (`wgmma.mma_async....f32.e4m3.e4m3`), with the float32 accumulator in registers. Helion
writes its output in float16; here `out_dtype` (a compile-time string) chooses it, so the tests
can check each output dtype against its own tolerance.

The inputs are small integers (exact in e4m3fn), so the float32 accumulation is exact and the
float64 reference is the true product.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

import tiledsl as td


@td.tile_kernel
def fp8_gemm(x, y, out_dtype="float16"):
    m, k = x.shape
    k2, n = y.shape
    assert k == k2, f"size mismatch {k} != {k2}"
    out = td.empty((m, n), dtype=out_dtype)
    for tile_m, tile_n in td.tile(m, n):
        acc = td.zeros((tile_m, tile_n), dtype=td.float32)  # accumulate in FP32 for accuracy
        for tile_k in td.tile(k):
            x_tile = x[tile_m, tile_k]  # fp8 tiles, no conversion
            y_tile = y[tile_k, tile_n]
            acc += x_tile @ y_tile
        out[tile_m, tile_n] = acc.astype(out_dtype)
    return out


DIMS = {"m": 150, "k": 100, "n": 90}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """(m, k) and (k, n) float8_e4m3fn matrices of integers in [-16, 16], and the output dtype's
    name (`dtype`)."""
    m, k, n = dims["m"], dims["k"], dims["n"]
    x = rng.integers(-16, 17, (m, k)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    y = rng.integers(-16, 17, (k, n)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    return x, y, np.dtype(dtype).name


def reference(x, y, out_dtype="float16") -> np.ndarray:
    """x @ y in float64."""
    return x.astype(np.float64) @ y.astype(np.float64)


def baseline(xp, x, y, out_dtype="float16"):
    """What a NumPy user writes: upcast, multiply, cast (torch._scaled_mm on a GPU)."""
    return xp.matmul(x.astype(xp.float32), y.astype(xp.float32)).astype(out_dtype)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = fp8_gemm(*args)
    print(f"fp8_gemm: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
