"""Causal attention forward (FlashAttention-2 with an online softmax) as Triton's 06-fused-attention
tutorial writes it: q, k, v of shape (batch*heads, seq, d), one program per (query tile,
batch-head); the softmax scale folded with log2(e) into one constant `qk_scale` so that each
score costs one fused multiply-add and one `exp2` (MUFU.EX2); the row max taken on unscaled
scores and scaled once per row; the key loop split into the tiles before the diagonal (no mask)
and the tiles on it (masked). K and V come through tensor descriptors (TMA) over a flattened
(batch*heads*seq, d) view, or through plain pointers.
"""

from __future__ import annotations

import math
from typing import Any

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from reference_kernels import Launch

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _tile_update(acc, l_i, m_i, q, k, v, qk_scale, offs_m, offs_n, DIAGONAL: tl.constexpr):
    """One key/value tile of the online softmax: the new (acc, l_i, m_i), in base 2."""
    qk = tl.dot(q, k.T)
    if DIAGONAL:
        qk = qk * qk_scale + tl.where(offs_m[:, None] >= offs_n[None, :], 0.0, -1.0e6)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        qk -= m_new[:, None]
    else:
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_new[:, None]
    p = tl.math.exp2(qk)
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.jit
def _key_range(start_m, BLOCK_M: tl.constexpr, DIAGONAL: tl.constexpr):
    """The keys [lo, hi) of a stage: those before query tile `start_m`, or those along it."""
    if DIAGONAL:
        lo = start_m * BLOCK_M
        hi = lo + BLOCK_M
    else:
        lo = 0
        hi = start_m * BLOCK_M
    return lo, hi


@triton.jit
def _stage(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_n, qk_scale, offs_m, start_m,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    """The key tiles before the query tile (DIAGONAL False) or along it, through pointers."""
    lo, hi = _key_range(start_m, BLOCK_M, DIAGONAL)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = tl.load(k_ptrs + start_n * stride_n)
        v = tl.load(v_ptrs + start_n * stride_n)
        acc, l_i, m_i = _tile_update(acc, l_i, m_i, q, k, v, qk_scale, offs_m,
                                     start_n + tl.arange(0, BLOCK_N), DIAGONAL)
    return acc, l_i, m_i


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, out_ptr, sm_scale, stride_bh, stride_n,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * stride_bh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + base + offs_m[:, None] * stride_n + offs_d[None, :])
    kv = base + tl.arange(0, BLOCK_N)[:, None] * stride_n + offs_d[None, :]
    qk_scale = sm_scale * LOG2E
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    acc, l_i, m_i = _stage(acc, l_i, m_i, q, k_ptr + kv, v_ptr + kv, stride_n, qk_scale,
                           offs_m, start_m, BLOCK_M, BLOCK_N, False)
    acc, l_i, m_i = _stage(acc, l_i, m_i, q, k_ptr + kv, v_ptr + kv, stride_n, qk_scale,
                           offs_m, start_m, BLOCK_M, BLOCK_N, True)
    out = (acc / l_i[:, None]).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + base + offs_m[:, None] * stride_n + offs_d[None, :], out)


@triton.jit
def _stage_tma(acc, l_i, m_i, q, k_desc, v_desc, row0, qk_scale, offs_m, start_m,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    """As `_stage`, with K and V tiles loaded by TMA from rows `row0 + start_n`."""
    lo, hi = _key_range(start_m, BLOCK_M, DIAGONAL)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = k_desc.load([row0 + start_n, 0])
        v = v_desc.load([row0 + start_n, 0])
        acc, l_i, m_i = _tile_update(acc, l_i, m_i, q, k, v, qk_scale, offs_m,
                                     start_n + tl.arange(0, BLOCK_N), DIAGONAL)
    return acc, l_i, m_i


@triton.jit
def attention_tma_kernel(q_desc, k_desc, v_desc, o_desc, sm_scale, seq,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    row0 = tl.program_id(1) * seq  # the batch-head's first row of the (bh*seq, d) view
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    qk_scale = sm_scale * LOG2E
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    q = q_desc.load([row0 + start_m * BLOCK_M, 0])
    acc, l_i, m_i = _stage_tma(acc, l_i, m_i, q, k_desc, v_desc, row0, qk_scale, offs_m,
                               start_m, BLOCK_M, BLOCK_N, False)
    acc, l_i, m_i = _stage_tma(acc, l_i, m_i, q, k_desc, v_desc, row0, qk_scale, offs_m,
                               start_m, BLOCK_M, BLOCK_N, True)
    o_desc.store([row0 + start_m * BLOCK_M, 0], (acc / l_i[:, None]).to(o_desc.dtype))


def bind(q: Any, k: Any, v: Any, config: Any, *, tma: bool = False) -> Launch:
    """Causal softmax(q k^T / sqrt(d)) v; `config` gives (BLOCK_M, BLOCK_N), num_warps and
    num_stages, as tiledsl's attention config (query tile, key tile). seq must be a multiple of
    BLOCK_M, and BLOCK_M of BLOCK_N, as in the tutorial."""
    import torch
    bh, seq, d = q.shape
    bm, bn = config.block_sizes
    assert seq % bm == 0 and bm % bn == 0, "seq % BLOCK_M and BLOCK_M % BLOCK_N must be 0"
    out = torch.empty_like(q)
    blocks = {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn}
    options = {"num_warps": config.get("num_warps", 4), "num_stages": config.get("num_stages", 3)}
    grid = (seq // bm, bh)
    if not tma:
        args = {"q_ptr": q, "k_ptr": k, "v_ptr": v, "out_ptr": out, "sm_scale": 1 / math.sqrt(d),
                "stride_bh": q.stride(0), "stride_n": q.stride(1), **blocks}
        return Launch(attention_kernel, grid, args, out=out, **options)
    flat = [t.reshape(bh * seq, d) for t in (q, k, v, out)]
    descs = {name: TensorDescriptor.from_tensor(t, [bm if name[0] in "qo" else bn, d])
             for name, t in zip(("q_desc", "k_desc", "v_desc", "o_desc"), flat)}
    args = {**descs, "sm_scale": 1 / math.sqrt(d), "seq": seq, **blocks}
    return Launch(attention_tma_kernel, grid, args, out=out, **options)
