"""`td.arange`: Triton's `pid * BLOCK + tl.arange(0, BLOCK)` and Helion's `hl.arange(bs)`,
indexing tensors as integer tiles with the bounds given as masks."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tiledsl as td
from support import under_configs

torch = pytest.importorskip("torch")

BACKENDS = ["numpy", "triton-interpret"]


@td.tile_kernel
def add_kernel(x, y, BLOCK: td.constexpr):
    """Triton's vector-add tutorial as written: offsets from the program id, a mask."""
    n = x.shape[0]
    out = td.empty_like(x)
    for pid in td.grid(td.cdiv(n, BLOCK)):
        offsets = pid * BLOCK + td.arange(0, BLOCK)
        mask = offsets < n
        a = td.load(x, [offsets], mask=mask)
        b = td.load(y, [offsets], mask=mask)
        td.store(out, [offsets], a + b, mask=mask)
    return out


@td.tile_kernel
def grouped_gemm_persistent(a_packed, b, group_offsets, num_workers: td.constexpr):
    """Helion's `grouped_gemm_jagged_persistent` (examples/grouped_gemm.py there): workers take
    every `num_workers`-th tile of each group, whose coordinates are computed, not looped over;
    rows and columns are `td.arange` vectors of registered block sizes, masked at the group's
    end. Differs from Helion's text in `[row_idx[:, None], k_idx[None, :]]` (index tiles
    broadcast as NumPy's), and `td.addmm` for `torch.addmm`."""
    block_m = td.register_block_size(16, 64)
    block_n = td.register_block_size(16, 64)
    total_m, k = a_packed.shape
    _, n = b.shape
    out = td.zeros((total_m, n), dtype=td.promote_types(a_packed.dtype, b.dtype))
    for worker_id in td.grid(num_workers):
        for g in td.grid(group_offsets.shape[0] - 1):
            group_start = group_offsets[g]
            group_end = group_offsets[g + 1]
            m_size = group_end - group_start
            if m_size > 0:
                num_m_tiles = (m_size + block_m - 1) // block_m
                num_group_tiles = num_m_tiles * ((n + block_n - 1) // block_n)
                for local_tile in td.grid(num_group_tiles):  # a runtime count
                    tile_in_group = local_tile * num_workers + worker_id
                    if tile_in_group < num_group_tiles:
                        base_row = group_start + (tile_in_group % num_m_tiles) * block_m
                        base_col = (tile_in_group // num_m_tiles) * block_n
                        row_idx = base_row + td.arange(block_m)
                        col_idx = base_col + td.arange(block_n)
                        rows_valid = row_idx < group_end
                        cols_valid = col_idx < n
                        acc = td.zeros([block_m, block_n], dtype=td.float32)
                        for k_tile in td.tile(k):
                            k_idx = k_tile.index
                            a_blk = td.load(a_packed, [row_idx[:, None], k_idx[None, :]],
                                            extra_mask=rows_valid[:, None])
                            b_blk = td.load(b, [k_idx[:, None], col_idx[None, :]],
                                            extra_mask=cols_valid[None, :])
                            acc = td.addmm(acc, a_blk, b_blk)
                        valid = rows_valid[:, None] & cols_valid[None, :]
                        td.store(out, [row_idx[:, None], col_idx[None, :]], acc.to(out.dtype),
                                 extra_mask=valid)
    return out


@td.tile_kernel
def matmul_kernel(a, b, BLOCK_SIZE_M: td.constexpr, BLOCK_SIZE_N: td.constexpr,
                  BLOCK_SIZE_K: td.constexpr, GROUP_SIZE_M: td.constexpr):
    """Triton's tutorial 03 as written: one program id, the GROUP_SIZE_M swizzle (the race
    check evaluates it per program and finds it a bijection), offsets from td.arange."""
    M, K = a.shape
    _, N = b.shape
    c = td.empty((M, N), dtype=td.float32)
    for pid in td.grid(td.cdiv(M, BLOCK_SIZE_M) * td.cdiv(N, BLOCK_SIZE_N)):
        num_pid_m = td.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = td.cdiv(N, BLOCK_SIZE_N)
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m
        offs_am = (pid_m * BLOCK_SIZE_M + td.arange(0, BLOCK_SIZE_M)) % M
        offs_bn = (pid_n * BLOCK_SIZE_N + td.arange(0, BLOCK_SIZE_N)) % N
        offs_k = td.arange(0, BLOCK_SIZE_K)
        accumulator = td.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=td.float32)
        for k in td.range(0, td.cdiv(K, BLOCK_SIZE_K)):
            a_t = td.load(a, [offs_am[:, None], offs_k[None, :] + k * BLOCK_SIZE_K],
                          mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
            b_t = td.load(b, [offs_k[:, None] + k * BLOCK_SIZE_K, offs_bn[None, :]],
                          mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
            accumulator = td.dot(a_t, b_t, accumulator)
        offs_cm = pid_m * BLOCK_SIZE_M + td.arange(0, BLOCK_SIZE_M)
        offs_cn = pid_n * BLOCK_SIZE_N + td.arange(0, BLOCK_SIZE_N)
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        td.store(c, [offs_cm[:, None], offs_cn[None, :]], accumulator, mask=c_mask)
    return c


@pytest.mark.parametrize("backend", BACKENDS)
def test_triton_matmul_tutorial_as_written(backend: str) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((77, 45)).astype(np.float16)
    b = rng.standard_normal((45, 53)).astype(np.float16)
    out = matmul_kernel.run(a, b, 16, 16, 16, 2, backend=backend)
    td.testing.assert_close(out, a.astype(np.float64) @ b, np.float16)


@pytest.mark.parametrize("backend", [*BACKENDS, "spatial"])
def test_triton_vector_add_as_written(backend: str) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 1000)).astype(np.float32)
    out = add_kernel.run(x, y, 128, backend=backend)
    np.testing.assert_allclose(out, x.astype(np.float64) + y, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_helion_persistent_grouped_gemm(backend: str) -> None:
    rng = np.random.default_rng(1)
    offsets = np.cumsum([0, 37, 0, 50, 5]).astype(np.int32)  # an empty group, ragged ones
    a = rng.standard_normal((offsets[-1], 24)).astype(np.float32)
    b = rng.standard_normal((24, 40)).astype(np.float32)
    expected = a.astype(np.float64) @ b
    space = grouped_gemm_persistent.config_space(a, b, offsets, 3, backend=backend)
    assert sorted({c.block_sizes[0] for c in space}) == [16, 32, 64]  # Helion's (min, max)
    for config, out in under_configs(grouped_gemm_persistent, (a, b, offsets, 3), backend):
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, err_msg=str(config))


def test_compiles_for_sm90() -> None:
    """The Triton source has `tl.arange` over the registered blocks and a `for` over the
    runtime count (a counted loop); ptxas takes it."""
    pytest.importorskip("triton")
    offsets = np.array([0, 3, 9], np.int32)
    args = (np.ones((9, 8), np.float32), np.ones((8, 5), np.float32), offsets, 2)
    source = grouped_gemm_persistent.source(*args, target="triton")
    assert "tl.arange(0, BLOCK_" in source and re.search(r"for \w+ in range\(", source) \
        and "while " not in source
    (report,) = grouped_gemm_persistent.compile(*args, arch="sm_90")
    assert report.spill_bytes == 0


def test_overlapping_windows_are_a_race() -> None:
    """A program's lanes reach past the next program's start: refused, naming the store."""
    @td.tile_kernel
    def overlapping(x):
        out = td.empty_like(x)
        for pid in td.grid(td.cdiv(x.shape[0], 32)):
            offsets = pid * 32 + td.arange(0, 64)
            td.store(out, [offsets], td.load(x, [offsets], mask=offsets < x.shape[0]),
                     mask=offsets < x.shape[0])
        return out

    with pytest.raises(td.TraceError, match="can give two of its programs the same elements"):
        overlapping(np.ones(100, np.float32))


@td.tile_kernel
def summed(x, lens, make):
    out = td.empty_like(x)
    for g in td.grid(x.shape[0]):
        out[g] = td.sum(make(lens[g]))
    return out


@pytest.mark.parametrize("make, error, match", [
    (lambda n: td.arange(0, 48), td.ShapeError, "must be a power of two, got 48"),
    (lambda n: td.arange(n), td.TraceError, "must be an int known when tracing"),
    (lambda n: td.arange(8, dtype=td.float32), td.TraceError, "must be an integer dtype"),
    (lambda n: td.arange(124, 132, dtype=td.int8), td.ShapeError, "does not fit in int8"),
])
def test_errors(make, error: type, match: str) -> None:
    with pytest.raises(error, match=match) as e:
        summed(np.ones(4, np.int64), np.ones(4, np.int32), make)
    assert "(lambda n: td.arange(" in str(e.value)  # the user's line


@td.tile_kernel
def host_ranges(x, dim: int):
    """In host code `torch.arange` (and td.arange) is torch's: a new tensor (FlagGems' radix
    sort's `torch.arange(0, n, device=x.device).broadcast_to(x.shape)`)."""
    n = x.shape[dim]
    idx = torch.arange(0, n, dtype=torch.int64, device=x.device).broadcast_to(x.shape)
    return idx.contiguous(), td.arange(3, 12, 4), torch.arange(0.5, 2.0, 0.5)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_host_arange_is_torchs(backend: str) -> None:
    x = np.ones((3, 7), np.float32)
    idx, stepped, floats = host_ranges.run(x, 1, backend=backend)
    np.testing.assert_array_equal(idx, np.broadcast_to(np.arange(7), (3, 7)))
    np.testing.assert_array_equal(stepped, [3, 7, 11])
    assert idx.dtype == stepped.dtype == np.int64 and floats.dtype == np.float32
    np.testing.assert_array_equal(floats, [0.5, 1.0, 1.5])


def test_host_arange_errors_and_a_stepped_tile() -> None:
    @td.tile_kernel
    def empty_range(x):
        return td.arange(4, 4)

    @td.tile_kernel
    def stepped_tile(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = x[t] + td.arange(0, 8, 2)
        return out

    with pytest.raises(td.ShapeError, match=r"torch.arange\(4, 4, 1\) is empty"):
        empty_range(np.ones(4, np.float32))
    with pytest.raises(td.TraceError, match="a tile's lanes step by 1"):
        stepped_tile(np.ones(4, np.float32))
