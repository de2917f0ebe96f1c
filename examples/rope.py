"""Rotary position embeddings (LLaMA style) on queries and keys, as Helion's `rope_fwd` writes
them: each head dimension is viewed as two halves (`reshape` to (..., 2, d/2), `permute` the
pair last, `td.split`), rotated with cos/sin, and put back with `td.join`, `permute` and
`reshape`.

q is (batch, q_heads, seq, d), k is (batch, k_heads, seq, d), cos and sin are (batch, seq, d).
The grid runs over tiles of batch and sequence positions; every head is taken whole. On the
Triton backend the head dimension must be a power of two (tl.reshape sees padded lanes).
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def rope(q, k, cos, sin):
    batch, q_heads, seq_len, head_dim = q.shape
    _, k_heads, _, _ = k.shape
    half_dim = head_dim // 2
    cdt = td.float64 if q.dtype == td.float64 else td.float32  # Helion's float32, or wider
    q_out = td.empty_like(q)
    k_out = td.empty_like(k)
    for tile_b, tile_t in td.tile(batch, seq_len):
        cos_pair = cos[tile_b, tile_t, :].to(cdt) \
            .reshape(tile_b, tile_t, 2, half_dim).permute(0, 1, 3, 2)
        sin_pair = sin[tile_b, tile_t, :].to(cdt) \
            .reshape(tile_b, tile_t, 2, half_dim).permute(0, 1, 3, 2)
        cos_first, cos_second = td.split(cos_pair)
        sin_first, sin_second = td.split(sin_pair)

        q_pair = q[tile_b, :, tile_t, :].to(cdt) \
            .reshape(tile_b, q_heads, tile_t, 2, half_dim).permute(0, 1, 2, 4, 3)
        q_first, q_second = td.split(q_pair)
        q_first_out = q_first * cos_first[:, None, :, :] - q_second * sin_first[:, None, :, :]
        q_second_out = q_second * cos_second[:, None, :, :] + q_first * sin_second[:, None, :, :]
        q_out[tile_b, :, tile_t, :] = td.join(q_first_out, q_second_out) \
            .permute(0, 1, 2, 4, 3).reshape(tile_b, q_heads, tile_t, head_dim)

        k_pair = k[tile_b, :, tile_t, :].to(cdt) \
            .reshape(tile_b, k_heads, tile_t, 2, half_dim).permute(0, 1, 2, 4, 3)
        k_first, k_second = td.split(k_pair)
        k_first_out = k_first * cos_first[:, None, :, :] - k_second * sin_first[:, None, :, :]
        k_second_out = k_second * cos_second[:, None, :, :] + k_first * sin_second[:, None, :, :]
        k_out[tile_b, :, tile_t, :] = td.join(k_first_out, k_second_out) \
            .permute(0, 1, 2, 4, 3).reshape(tile_b, k_heads, tile_t, head_dim)
    return q_out, k_out


DIMS = {"batch": 2, "q_heads": 4, "k_heads": 2, "seq": 100, "d": 32}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random q and k, and the cos and sin of random angles. The head dimension is rounded up
    to a power of two (2 at least), as real heads are: pairs need an even one, and Triton's
    tl.reshape a power of two."""
    b, s = dims["batch"], dims["seq"]
    d = 1 << max(1, (dims["d"] - 1).bit_length())
    q = rng.standard_normal((b, dims["q_heads"], s, d)).astype(dtype)
    k = rng.standard_normal((b, dims["k_heads"], s, d)).astype(dtype)
    angles = rng.standard_normal((b, s, d))
    return q, k, np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def _rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def reference(q, k, cos, sin) -> tuple[np.ndarray, np.ndarray]:
    """q * cos + rotate_half(q) * sin (and the same for k) in float64."""
    q, k = q.astype(np.float64), k.astype(np.float64)
    cos, sin = cos.astype(np.float64)[:, None], sin.astype(np.float64)[:, None]
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def baseline(xp, q, k, cos, sin):
    """What a user of the array library writes, in the input dtype."""
    def rotate_half(x):
        half = x.shape[-1] // 2
        return xp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    cos, sin = cos[:, None], sin[:, None]
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    q_out, k_out = rope(*args)
    q_ref, k_ref = reference(*args)
    print(f"rope: relative error q {td.testing.relative_error(q_out, q_ref):.2e}, "
          f"k {td.testing.relative_error(k_out, k_ref):.2e}")


if __name__ == "__main__":
    main()
