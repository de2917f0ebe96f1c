"""Row softmax, one row per program as Liger's and unsloth's kernels do it: the whole row in
registers (BLOCK_N columns, the row length rounded up to a power of two), masked only when the
row is shorter than the block, the max and sum as row reductions in float32, and the exponential
as one `exp2` of `x * log2(e) - max * log2(e)` (a fused multiply-add and one MUFU.EX2).
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from reference_kernels import Launch

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride_x, stride_out,
                   BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    if EVEN_N:
        x = tl.load(x_ptr + row * stride_x + cols).to(tl.float32)
    else:
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols,
                    other=-float("inf")).to(tl.float32)
    e = tl.math.exp2(x * LOG2E - tl.max(x, axis=0) * LOG2E)
    y = (e * (1.0 / tl.sum(e, axis=0))).to(out_ptr.dtype.element_ty)
    if EVEN_N:
        tl.store(out_ptr + row * stride_out + cols, y)
    else:
        tl.store(out_ptr + row * stride_out + cols, y, mask=cols < n_cols)


def bind(x: Any, config: Any) -> Launch:
    """softmax(x) over rows; `config` gives num_warps (one row per program: block size 1)."""
    import torch
    m, n = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n)
    args = {"x_ptr": x, "out_ptr": out, "n_cols": n, "stride_x": x.stride(0),
            "stride_out": out.stride(0), "BLOCK_N": block, "EVEN_N": block == n}
    return Launch(softmax_kernel, (m,), args, config.get("num_warps", 4),
                  config.get("num_stages", 1), out)
