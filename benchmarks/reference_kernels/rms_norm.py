"""RMS norm forward, one row per program as Liger's kernel does it: the whole row in registers,
the mean of squares as a row reduction in float32, `rsqrt` once per row, then x * rstd * weight.
EPS is a compile-time constant, as examples/rms_norm.py captures it.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from reference_kernels import Launch

EPS = 1e-6  # examples/rms_norm.py's


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
def rms_norm_kernel(x_ptr, w_ptr, out_ptr, n_cols, stride_x, stride_out,
                    BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr, EPS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    x = _load_row(x_ptr + row * stride_x, cols, n_cols, EVEN_N)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + EPS)
    y = x * rstd * _load_row(w_ptr, cols, n_cols, EVEN_N)
    _store_row(out_ptr + row * stride_out, cols, n_cols, y, EVEN_N)


def bind(x: Any, weight: Any, config: Any) -> Launch:
    """x / sqrt(mean(x**2) + EPS) * weight over rows; `config` gives num_warps."""
    import torch
    m, n = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n)
    args = {"x_ptr": x, "w_ptr": weight, "out_ptr": out, "n_cols": n, "stride_x": x.stride(0),
            "stride_out": out.stride(0), "BLOCK_N": block, "EVEN_N": block == n, "EPS": EPS}
    return Launch(rms_norm_kernel, (m,), args, config.get("num_warps", 4),
                  config.get("num_stages", 1), out)
