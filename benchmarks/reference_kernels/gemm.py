"""GEMM, optionally with a fused bias + exact (erf) GELU epilogue, as Triton's matmul tutorials
write it: grouped program order for L2 reuse, a float32 accumulator carried through `tl.dot`, a
K mask only when K is ragged (03-matrix-multiplication); tensor descriptors for TMA loads and
stores, and a persistent variant with one program per SM walking the output tiles
(09-persistent-matmul). `a` is (M, K), `b` is (K, N), both row-major, as in examples/matmul.py;
the epilogue computes what examples/gemm_bias_gelu.py does. The tutorial's `flatten=True` (the
tile and K loops fused, so the epilogue overlaps the next tile's loads) is a knob, off by
default: flattened, the K loop's body holds the epilogue too (530 SASS instructions against 87
at 128x256x64 on sm_90), so per-iteration counts no longer compare with tiledsl's nested loops.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from reference_kernels import Launch

SQRT1_2 = tl.constexpr(0.7071067811865476)
NUM_SMS = 132  # an H100 SXM's: the persistent grid


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of tile `tile_id` in grouped order: GROUP_M rows of tiles walked together."""
    in_group = GROUP_M * num_pid_n
    first_m = (tile_id // in_group) * GROUP_M
    group_rows = min(num_pid_m - first_m, GROUP_M)
    return first_m + (tile_id % in_group) % group_rows, (tile_id % in_group) // group_rows


@triton.jit
def _epilogue(acc, bias_ptr, offs_n, BIAS_GELU: tl.constexpr):
    """acc, or gelu(acc + bias) with the exact erf GELU, in float32."""
    if BIAS_GELU:
        z = acc + tl.load(bias_ptr + offs_n).to(tl.float32)[None, :]
        acc = 0.5 * z * (1.0 + tl.math.erf(z * SQRT1_2))
    return acc


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, BIAS_GELU: tl.constexpr):
    pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N),
                                GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows and columns past the edge read a wrapped-around valid row; the store masks them.
    offs_am = tl.max_contiguous(tl.multiple_of(offs_m % M, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_n % N, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    acc = _epilogue(acc, bias_ptr, offs_bn, BIAS_GELU)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, bias_ptr, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, BIAS_GELU: tl.constexpr):
    pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N),
                                GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])  # TMA zero-fills past the edges
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    acc = _epilogue(acc, bias_ptr, off_n + tl.arange(0, BLOCK_N), BIAS_GELU)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def matmul_tma_persistent_kernel(a_desc, b_desc, c_desc, bias_ptr, M, N, K,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                                 BIAS_GELU: tl.constexpr, NUM_SMS: tl.constexpr,
                                 FLATTEN: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=FLATTEN):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, k_tiles):
            a = a_desc.load([off_m, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, off_n])
            acc = tl.dot(a, b, acc)
        acc = _epilogue(acc, bias_ptr, off_n + tl.arange(0, BLOCK_N), BIAS_GELU)
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


def bind(a: Any, b: Any, config: Any, bias: Any = None, *, tma: bool = False,
         persistent: bool = False, flatten: bool = False) -> Launch:
    """a @ b (gelu(a @ b + bias) with a bias) under `config`: block sizes (BLOCK_M, BLOCK_N,
    BLOCK_K), num_warps, num_stages and group_m, as tiledsl's GEMM config. `persistent` implies
    TMA, as in the tutorial."""
    import torch
    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk = config.block_sizes
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    blocks = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": config.get("group_m", 8),
              "BIAS_GELU": bias is not None}
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    common = {"bias_ptr": bias, "M": m, "N": n, "K": k, **blocks}
    options = {"num_warps": config.get("num_warps", 4), "num_stages": config.get("num_stages", 3)}
    if not (tma or persistent):
        args = {"a_ptr": a, "b_ptr": b, "c_ptr": out, **common,
                "stride_am": a.stride(0), "stride_ak": a.stride(1), "stride_bk": b.stride(0),
                "stride_bn": b.stride(1), "stride_cm": out.stride(0), "stride_cn": out.stride(1),
                "EVEN_K": k % bk == 0}
        return Launch(matmul_kernel, (tiles,), args, out=out, **options)
    descs = {"a_desc": TensorDescriptor.from_tensor(a, [bm, bk]),
             "b_desc": TensorDescriptor.from_tensor(b, [bk, bn]),
             "c_desc": TensorDescriptor.from_tensor(out, [bm, bn])}
    if not persistent:
        return Launch(matmul_tma_kernel, (tiles,), {**descs, **common}, out=out, **options)
    args = {**descs, **common, "NUM_SMS": NUM_SMS, "FLATTEN": flatten}
    return Launch(matmul_tma_persistent_kernel, (min(tiles, NUM_SMS),), args, out=out, **options)
