"""Tables of kernel tensors' addresses (tiledsl/frontend/pointer_tables.py): Triton's grouped
GEMM tutorial and vLLM's multi-slice LoRA kernels build `torch.tensor([w.data_ptr(), ...])` in
host code and pick a tensor in the body with `tl.load(table + i).to(tl.pointer_type(T))`."""

from __future__ import annotations

import numpy as np
import pytest
from support import gpu_backend, run_on

import tiledsl as td
from tiledsl.testing import assert_close

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = triton.language

BACKENDS = ["numpy", "triton-interpret", gpu_backend()]


@triton.jit
def grouped_matmul_kernel(group_a_ptrs, group_b_ptrs, group_c_ptrs, group_gemm_sizes, g_lds,
                          group_size, NUM_SM: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
                          BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):
    """Triton's python/tutorials/08-grouped-gemm.py kernel, as written."""
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_m_tiles = tl.cdiv(gm, BLOCK_SIZE_M)
        num_n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        num_tiles = num_m_tiles * num_n_tiles
        while (tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles):
            k = gk
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float16))
            tile_idx_in_gemm = tile_idx - last_problem_end
            tile_m_idx = tile_idx_in_gemm // num_n_tiles
            tile_n_idx = tile_idx_in_gemm % num_n_tiles
            offs_am = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_bn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):
                tl.multiple_of(a_ptrs, [16, 16])
                tl.multiple_of(b_ptrs, [16, 16])
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
                accumulator += tl.dot(a, b)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            c = accumulator.to(tl.float16)
            offs_cm = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_cn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + ldc * offs_cm[:, None] + offs_cn[None, :]
            tl.store(c_ptrs, c)
            tile_idx += NUM_SM
        last_problem_end = last_problem_end + num_tiles


def group_gemm_fn(group_A, group_B):
    """The tutorial's wrapper (its autotuner's configs replaced by one small one)."""
    group_size = len(group_A)
    A_addrs, B_addrs, C_addrs, g_sizes, g_lds, group_C = [], [], [], [], [], []
    for i in range(group_size):
        A = group_A[i]
        B = group_B[i]
        assert A.shape[1] == B.shape[0]
        M, K = A.shape
        K, N = B.shape
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        group_C.append(C)
        A_addrs.append(A.data_ptr())
        B_addrs.append(B.data_ptr())
        C_addrs.append(C.data_ptr())
        g_sizes += [M, N, K]
        g_lds += [A.stride(0), B.stride(0), C.stride(0)]
    d_a_ptrs = torch.tensor(A_addrs, device=A.device)
    d_b_ptrs = torch.tensor(B_addrs, device=A.device)
    d_c_ptrs = torch.tensor(C_addrs, device=A.device)
    d_g_sizes = torch.tensor(g_sizes, dtype=torch.int32, device=A.device)
    d_g_lds = torch.tensor(g_lds, dtype=torch.int32, device=A.device)
    grid = lambda META: (META['NUM_SM'], )  # noqa: E731
    grouped_matmul_kernel[grid](d_a_ptrs, d_b_ptrs, d_c_ptrs, d_g_sizes, d_g_lds, group_size,
                                NUM_SM=4, BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=16)
    return group_C


@td.tile_kernel
def grouped_gemm(a0, a1, a2, b0, b1, b2):
    return group_gemm_fn([a0, a1, a2], [b0, b1, b2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_grouped_gemm_tutorial(backend: str) -> None:
    """Three GEMMs of different shapes, each tile's tensors picked from the tables by a loop
    counter; the pointers move in the K loop and the C tile is stored through one."""
    rng = np.random.default_rng(0)
    shapes = [(64, 32, 48), (32, 64, 32), (96, 32, 16)]  # (M, N, K): full tiles, as it assumes
    a = [rng.standard_normal((m, k)).astype(np.float16) for m, _, k in shapes]
    b = [rng.standard_normal((k, n)).astype(np.float16) for _, n, k in shapes]
    got = run_on(grouped_gemm, (*a, *b), backend)
    want = [x.astype(np.float64) @ y.astype(np.float64) for x, y in zip(a, b)]
    assert_close(tuple(got), tuple(want), dtype="float16")


@triton.jit
def _sliced_scale(x_ptr, w_table, out_ptr, acc_table, n, stride_s, BLOCK: tl.constexpr):
    """For slice s (program axis 1): out[s] = x[s] * w_s, and acc_s[j % 4] += the same, w_s and
    acc_s picked from tables as vLLM's LoRA kernels pick a slice's weights."""
    pid = tl.program_id(0)
    s = tl.program_id(1)
    w = tl.load(w_table + s).to(tl.pointer_type(x_ptr.dtype.element_ty))
    acc = tl.cast(tl.load(acc_table + s), tl.pointer_type(tl.float32))
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + s * stride_s + offs, mask=m) * tl.load(w + offs, mask=m, other=0.0)
    tl.store(out_ptr + s * stride_s + offs, v, mask=m)
    tl.atomic_add(acc + offs % 4, v.to(tl.float32), mask=m)


@td.tile_kernel
def sliced(x, w4, big):
    ws = [w4.squeeze(1)[0], big[1:], big]  # views: a 4-D weight's, and one from element 1
    table = torch.tensor([w.data_ptr() for w in ws], dtype=torch.uint64)
    accs = [torch.zeros(4, dtype=torch.float32) for _ in ws]
    out = torch.empty_like(x)
    n = x.shape[1]
    _sliced_scale[(triton.cdiv(n, 8), 3)](x, table, out, torch.tensor([a.data_ptr() for a in accs]),
                                          n, x.stride(0), BLOCK=8)
    return out, *accs


@pytest.mark.parametrize("backend", BACKENDS)
def test_table_of_views_with_atomics(backend: str) -> None:
    """Views' addresses (their start inside the root), a masked load and a store through a
    picked pointer, and an atomic through one (one atomic per tensor, masked by its slot)."""
    rng = np.random.default_rng(1)
    n = 21
    x = rng.standard_normal((3, n)).astype(np.float32)
    w4 = rng.standard_normal((1, 1, 1, n)).astype(np.float32)
    big = rng.standard_normal(n + 1).astype(np.float32)
    got = run_on(sliced, (x, w4, big), backend)
    ws = [w4[0, 0, 0], big[1:], big[:n]]
    want = np.stack([x[i].astype(np.float64) * ws[i] for i in range(3)])
    sums = []
    for row in want:
        s = np.zeros(4)
        np.add.at(s, np.arange(n) % 4, row)
        sums.append(s)
    assert_close(tuple(got), (want, *sums), dtype="float32")


@triton.jit
def _by_lane(tab, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    src = tl.load(tab + offs % 2).to(tl.pointer_type(tl.float32))
    tl.store(out + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _copy_at(address, out, n, BLOCK: tl.constexpr):
    src = address.to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


@td.tile_kernel
def by_lane(x, y):
    out = torch.empty_like(x)
    _by_lane[(1,)](torch.tensor([x.data_ptr(), y.data_ptr()]), out, x.shape[0], BLOCK=16)
    shifted = torch.zeros_like(x)
    _copy_at[(1,)](x[2:].data_ptr(), shifted, x.shape[0] - 2, BLOCK=16)  # an address as an int
    return out, shifted


@pytest.mark.parametrize("backend", BACKENDS)
def test_table_by_lane_and_address_argument(backend: str) -> None:
    """Each lane picks its own tensor (x for even lanes, y for odd); an address passed as an
    int argument is a pointer after `.to(tl.pointer_type(T))`."""
    x = np.random.default_rng(2).standard_normal(13).astype(np.float32)
    y = x * -3.0
    out, shifted = run_on(by_lane, (x, y), backend)
    np.testing.assert_array_equal(out, np.where(np.arange(13) % 2 == 0, x, y))
    np.testing.assert_array_equal(shifted, np.concatenate([x[2:], [0, 0]]))


@triton.jit
def _pick(tab, out, n, BLOCK: tl.constexpr):
    src = tl.load(tab + tl.program_id(0)).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    tl.store(out + tl.program_id(0) * n + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


@triton.jit
def _moved(tab, out, n, BLOCK: tl.constexpr):
    (tl.load(tab) + 4).to(tl.pointer_type(tl.float32))


@triton.jit
def _half(tab, out, n, BLOCK: tl.constexpr):
    src = tl.load(tab).to(tl.pointer_type(tl.float16))
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(src + offs).to(tl.float32))


@td.tile_kernel
def misuse(x, y, programs, kind):
    out = torch.zeros((programs, x.shape[0]), dtype=x.dtype)
    entries = [x.data_ptr(), 0] if kind == "zero" else [x.data_ptr(), y.data_ptr()]
    table = torch.tensor(entries, dtype=torch.int32 if kind == "int32" else torch.int64)
    {"moved": _moved, "half": _half}.get(kind, _pick)[(programs,)](table, out, x.shape[0],
                                                                   BLOCK=16)
    return out


@pytest.mark.parametrize("kind,programs,error,match", [
    ("pick", 3, td.OutOfBoundsError, r"load from 'data_ptr_table': index 2 is out of bounds"),
    ("zero", 2, td.TraceError, r"holds 0 beside them: every entry must be a kernel tensor's"),
    ("int32", 1, td.TraceError, r"of dtype int32: addresses are 64-bit ints"),
    ("moved", 1, td.TraceError, r"takes `.to\(tl.pointer_type\(dtype\)\)` only"),
    ("half", 1, td.TraceError, r"entry 0 of a table of data_ptr\(\)s reads 'x' \(float32\) as "
                               r"float16"),
])
def test_table_misuse(kind: str, programs: int, error: type, match: str) -> None:
    """An index past the table is out of bounds at its load; an entry that is not a tensor's
    address, a 32-bit table, arithmetic on an address and a dtype of another size are errors
    at the user's line."""
    x = np.arange(13, dtype=np.float32)
    with pytest.raises(error, match=match) as info:
        misuse.run(x, -x, programs, kind, backend="numpy")
    assert "test_pointer_tables.py" in str(info.value)
