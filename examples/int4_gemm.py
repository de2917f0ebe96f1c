"""int4 GEMM: out = a @ w, the int4 weights w packed two to a byte (Helion's `int4_gemm`).

`b` holds w's rows in pairs: byte `b[i, j]` is `w[2i, j]` in its low nibble and `w[2i + 1, j]`
in its high one, each a signed 4-bit value in [-8, 7]. Each program unpacks a tile of bytes
with shifts (`(b << 4) >> 4` sign-extends the low nibble, `b >> 4` is the high one: `>>` of a
signed int is arithmetic) and multiplies them with the activations, accumulating in float32.

Helion interleaves the two nibble planes into a `(2 * block_k, block_n)` tile of w with
`torch.stack(...).reshape(...)`; a tile's block-size axis keeps its own axis through a
reshape here, so the activations are viewed in pairs instead (`a.reshape(m, k // 2, 2)`, a
view sharing a's memory) and `td.split` gives the columns that meet each plane: two products
of the same size as Helion's one.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def int4_gemm(a, b):
    m, k = a.shape
    _, n = b.shape
    pairs = a.reshape(m, k // 2, 2)  # pairs[:, i, 0] meets the low nibbles of b[i, :]
    acc_dtype = td.float64 if a.dtype == td.float64 else td.float32
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=acc_dtype)
        for tk in td.tile(k // 2):
            packed = b[tk, tn]
            lo = (packed << 4) >> 4  # the low nibble, sign-extended
            hi = packed >> 4  # the high nibble
            a_lo, a_hi = td.split(pairs[tm, tk, :])
            acc += a_lo @ lo.to(a.dtype)
            acc += a_hi @ hi.to(a.dtype)
        out[tm, tn] = acc
    return out


DIMS = {"m": 150, "kp": 50, "n": 90}  # kp: the packed rows, k = 2 * kp (two to a byte)


def pack_int4(w: np.ndarray) -> np.ndarray:
    """(k, n) values in [-8, 7] as (k // 2, n) bytes, row 2i in the low nibbles."""
    pairs = w.astype(np.int8).reshape(w.shape[0] // 2, 2, w.shape[1])
    return (pairs[:, 0] & 0xF) | (pairs[:, 1] << 4)


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random (m, 2 kp) activations and a (2 kp, n) int4 matrix packed into (kp, n) int8."""
    m, k, n = dims["m"], 2 * dims["kp"], dims["n"]
    return (rng.standard_normal((m, k)).astype(dtype),
            pack_int4(rng.integers(-8, 8, (k, n))))


def unpack_int4(xp, b):
    """(k // 2, n) packed bytes as the (k, n) int8 matrix, as a NumPy (CuPy) user unpacks it."""
    lo, hi = (b << 4) >> 4, b >> 4
    return xp.stack([lo, hi], axis=1).reshape(2 * b.shape[0], b.shape[1])


def reference(a, b) -> np.ndarray:
    """a @ w in float64."""
    return a.astype(np.float64) @ unpack_int4(np, b).astype(np.float64)


def baseline(xp, a, b):
    """Unpack the whole matrix, then one matmul in a's dtype."""
    return xp.matmul(a, unpack_int4(xp, b).astype(a.dtype))


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = int4_gemm(*args)
    print(f"int4_gemm: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
