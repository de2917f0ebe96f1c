"""Layer norm forward, one row per program with the whole row in registers (the single-block
case of Triton's 05-layer-norm tutorial, as Liger writes it): the mean, then the biased variance
of the centered row (zeroed past a ragged edge), `rsqrt` once per row, then a fused multiply-add
with weight and bias. `eps` is a runtime argument, as in examples/layer_norm.py.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from reference_kernels import Launch


@triton.jit
def _load_row(ptr, cols, n_cols, EVEN_N: tl.constexpr):
    """A row (or the weight) in float32; lanes past a ragged edge read 0."""
    if EVEN_N:
        return tl.load(ptr + cols).to(tl.float32)
    else:
        return tl.load(ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)


@triton.jit
def _store_row(ptr, cols, n_cols, y, EVEN_N: tl.constexpr):
    if EVEN_N:
        tl.store(ptr + cols, y.to(ptr.dtype.element_ty))
    else:
        tl.store(ptr + cols, y.to(ptr.dtype.element_ty), mask=cols < n_cols)


@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, stride_x, stride_out, eps,
                      BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    x = _load_row(x_ptr + row * stride_x, cols, n_cols, EVEN_N)
    xc = x - tl.sum(x, axis=0) / n_cols
    if not EVEN_N:
        xc = tl.where(cols < n_cols, xc, 0.0)
    rstd = tl.math.rsqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
    w = _load_row(w_ptr, cols, n_cols, EVEN_N)
    b = _load_row(b_ptr, cols, n_cols, EVEN_N)
    _store_row(out_ptr + row * stride_out, cols, n_cols, xc * rstd * w + b, EVEN_N)


def bind(x: Any, weight: Any, bias: Any, eps: float, config: Any) -> Launch:
    """(x - mean) / sqrt(var + eps) * weight + bias over rows; `config` gives num_warps."""
    import torch
    m, n = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n)
    args = {"x_ptr": x, "w_ptr": weight, "b_ptr": bias, "out_ptr": out, "n_cols": n,
            "stride_x": x.stride(0), "stride_out": out.stride(0), "eps": float(eps),
            "BLOCK_N": block, "EVEN_N": block == n}
    return Launch(layer_norm_kernel, (m,), args, config.get("num_warps", 4),
                  config.get("num_stages", 1), out)
