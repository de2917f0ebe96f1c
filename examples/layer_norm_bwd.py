"""Layer-norm backward with per-program partial sums, Helion's `layer_norm_bwd`
(examples/layer_norm.py).

Given the forward pass's per-row `mean` and `rstd`, it returns `grad_x`, `grad_weight` and
`grad_bias`. Each program of the grid owns a block of `m_block` rows (a block size the kernel
registers, so it is tunable and the host code can read it): it walks its rows a tile at a time
(`td.tile(mb_cta.end, start=mb_cta.begin)`, Helion's `hl.tile(mb_cta.begin, mb_cta.end)`),
writes their `grad_x`, and sums `dy * x_hat` and `dy` over them into one row of the partial
buffers, indexed by `mb_cta.id`. The buffers have `td.cdiv(m, m_block)` rows: the kernel is
traced once per value of `m_block` a config gives.

It differs from Helion's text in two places: the partial rows are summed by a second grid
loop of the kernel (Helion's host code runs `grad_weight_blocks.sum(0)` in torch), and
`weight[:].astype(cdt)[None, :]` stands for `weight[None, :]` (a tensor takes one index
per dimension). It computes in float64 for float64 inputs (`cdt`), where Helion's is float32.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def layer_norm_bwd(grad_out, x, mean, rstd, weight):
    m, n = x.shape
    cdt = td.float64 if x.dtype == td.float64 else td.float32
    m_block = td.register_block_size(m)
    grad_x = td.empty((m, n), dtype=x.dtype)
    num_blocks = (m + m_block - 1) // m_block
    grad_weight_blocks = td.empty((num_blocks, n), dtype=cdt)
    grad_bias_blocks = td.empty((num_blocks, n), dtype=cdt)

    for mb_cta in td.tile(m, block_size=m_block):
        grad_w_acc = td.zeros((n,), dtype=cdt)
        grad_b_acc = td.zeros((n,), dtype=cdt)
        weight_cta = weight[:].astype(cdt)[None, :]
        for mb in td.tile(mb_cta.end, start=mb_cta.begin):
            x_mb = x[mb, :].astype(cdt)
            dy_mb = grad_out[mb, :].astype(cdt)
            mean_mb = mean[mb].astype(cdt)
            rstd_mb = rstd[mb].astype(cdt)
            x_hat = (x_mb - mean_mb[:, None]) * rstd_mb[:, None]
            grad_w_acc += td.sum(dy_mb * x_hat, axis=0)
            grad_b_acc += td.sum(dy_mb, axis=0)
            wdy = weight_cta * dy_mb
            c1 = td.sum(x_hat * wdy, axis=-1) / n
            c2 = td.sum(wdy, axis=-1) / n
            dx = (wdy - (x_hat * c1[:, None] + c2[:, None])) * rstd_mb[:, None]
            grad_x[mb, :] = dx.astype(x.dtype)
        grad_weight_blocks[mb_cta.id, :] = grad_w_acc
        grad_bias_blocks[mb_cta.id, :] = grad_b_acc

    grad_weight = td.empty((n,), dtype=weight.dtype)
    grad_bias = td.empty((n,), dtype=weight.dtype)
    for tn in td.tile(n):  # the partial rows' sums (Helion: grad_weight_blocks.sum(0) on the host)
        dw = td.zeros((tn,), dtype=cdt)
        db = td.zeros((tn,), dtype=cdt)
        for tb in td.tile(num_blocks):
            dw += td.sum(grad_weight_blocks[tb, tn], axis=0)
            db += td.sum(grad_bias_blocks[tb, tn], axis=0)
        grad_weight[tn] = dw.astype(weight.dtype)
        grad_bias[tn] = db.astype(weight.dtype)
    return grad_x, grad_weight, grad_bias


DIMS = {"m": 150, "n": 300}


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """grad_out, x (offset, so the mean matters), the forward pass's mean and rstd (float32, or
    float64 for float64 inputs), and weight."""
    m, n = dims["m"], dims["n"]
    x = (rng.standard_normal((m, n)) * 2.0 + 0.5).astype(dtype)
    grad_out = rng.standard_normal((m, n)).astype(dtype)
    weight = (1.0 + 0.1 * rng.standard_normal(n)).astype(dtype)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1)
    rstd = 1.0 / np.sqrt(x64.var(axis=1) + 1e-5)
    stats = np.float64 if dtype == np.float64 else np.float32
    return grad_out, x, mean.astype(stats), rstd.astype(stats), weight


def reference(grad_out, x, mean, rstd, weight) -> tuple:
    """The three gradients in float64, from the given mean and rstd."""
    dy, x, w = (a.astype(np.float64) for a in (grad_out, x, weight))
    rstd = rstd.astype(np.float64)[:, None]
    x_hat = (x - mean.astype(np.float64)[:, None]) * rstd
    wdy = w[None, :] * dy
    c1 = (x_hat * wdy).mean(axis=1, keepdims=True)
    c2 = wdy.mean(axis=1, keepdims=True)
    return (wdy - (x_hat * c1 + c2)) * rstd, (dy * x_hat).sum(axis=0), dy.sum(axis=0)


def baseline(xp, grad_out, x, mean, rstd, weight):
    """What a user of the array library writes, in the input dtype."""
    mean, rstd = mean.astype(x.dtype), rstd.astype(x.dtype)
    x_hat = (x - mean[:, None]) * rstd[:, None]
    wdy = weight[None, :] * grad_out
    c1 = (x_hat * wdy).mean(axis=1, keepdims=True)
    c2 = wdy.mean(axis=1, keepdims=True)
    return ((wdy - (x_hat * c1 + c2)) * rstd[:, None], (grad_out * x_hat).sum(axis=0),
            grad_out.sum(axis=0))


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative errors."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    for name, o, r in zip(("grad_x", "grad_weight", "grad_bias"), layer_norm_bwd(*args),
                          reference(*args)):
        print(f"layer_norm_bwd {name}: relative error {td.testing.relative_error(o, r):.2e}")


if __name__ == "__main__":
    main()
