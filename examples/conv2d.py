"""A 2-D convolution as an implicit GEMM: NHWC input, (kh, kw, c_in, c_out) filter, stride 1,
'same' padding (odd filter sizes), out[b, y, x, :] = sum over taps (r, s) and input channels of
x[b, y + r - kh // 2, x + s - kw // 2, :] @ w[r, s].

Each program computes one output row segment: a tile of `tw` pixels of row `th` (a tile of one
row) for a tile of `tn` output channels. Its loop over input-channel tiles `tk` accumulates, for
every filter tap, the shifted input tile `x[b, th + (r - ph), tw + (s - pw), tk]` times the tap's
weights. The taps are a Python loop (unrolled when tracing). The shifted tiles do the padding:
lanes that fall outside the image (row or column below 0 or past the edge) load 0, exactly as
'same' zero padding reads. `th` holds one row, so `patch.squeeze(0)` drops its axis (a view, on
Triton a `tl.reshape`) and the product is a plain 2-D `@`; `acc.unsqueeze(0)` puts it back for
the store. This kernel is not a port of a Helion example (issue 27 asks for a convolution as an
implicit GEMM), so there is no Helion text to differ from.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def conv2d(x, w):
    batch, h, wd, cin = x.shape
    kh, kw, _, cout = w.shape
    ph, pw = kh // 2, kw // 2  # 'same' padding
    acc_dtype = td.float64 if x.dtype == td.float64 else td.float32
    out = td.empty((batch, h, wd, cout), dtype=x.dtype)
    for tb, th, tw, tn in td.tile(batch, h, wd, cout, block_size=(1, 1, None, None)):
        b = tb.begin
        acc = td.zeros((tw, tn), dtype=acc_dtype)
        for tk in td.tile(cin):
            for r in range(kh):  # the filter taps, unrolled
                for s in range(kw):
                    patch = x[b, th + (r - ph), tw + (s - pw), tk]  # (1, tw, tk), zero padded
                    acc += patch.squeeze(0) @ w[r, s, tk, tn]  # th's one row: (tw, tk)
        out[b, th, tw, tn] = acc.unsqueeze(0)
    return out


DIMS = {"batch": 2, "h": 13, "w": 21, "cin": 24, "cout": 20, "kh": 3, "kw": 3}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """A random NHWC image batch and a random (kh, kw, c_in, c_out) filter bank."""
    b, h, w, cin, cout = dims["batch"], dims["h"], dims["w"], dims["cin"], dims["cout"]
    scale = 1.0 / np.sqrt(dims["kh"] * dims["kw"] * cin)
    return (rng.standard_normal((b, h, w, cin)).astype(dtype),
            (rng.standard_normal((dims["kh"], dims["kw"], cin, cout)) * scale).astype(dtype))


def _conv(xp, x, w):
    kh, kw = w.shape[:2]
    ph, pw = kh // 2, kw // 2
    h, wd = x.shape[1:3]
    padded = xp.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    out = xp.zeros(x.shape[:3] + w.shape[3:], dtype=x.dtype)
    for r in range(kh):
        for s in range(kw):
            out += padded[:, r:r + h, s:s + wd, :] @ w[r, s]
    return out


def reference(x, w) -> np.ndarray:
    """The convolution in float64: zero padding, then one matrix product per tap."""
    return _conv(np, x.astype(np.float64), w.astype(np.float64))


def baseline(xp, x, w):
    """What an array-library user writes: pad, then a matrix product per tap."""
    return _conv(xp, x, w)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = conv2d(*args)
    print(f"conv2d: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
