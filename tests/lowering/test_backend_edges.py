"""Edges where the Triton and spatial backends once disagreed with the NumPy reference:
constant block sizes Triton pads (`td.tile(n, block_size=4)`), integer dots tl.dot does not
take (int16, int32), and `td.full` filled with a runtime scalar."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pytest

import tiledsl as td

pytest.importorskip("torch")
pytest.importorskip("triton")

BACKENDS = ["numpy", "triton-interpret", "spatial"]


# ---- constant block sizes that Triton pads to a power of two of at least 16 -------------------
@cache
def scaled_row_sums(block: int) -> td.TileKernel:
    """Sums of 2x + 1 over rows, both tile loops with constant blocks."""
    @td.tile_kernel
    def scaled_row_sums(x):
        m, n = x.shape
        out = td.empty((m,), dtype=td.float32)
        for tm in td.tile(m, block_size=block):
            acc = td.zeros((tm,), dtype=td.float32)
            for tn in td.tile(n, block_size=block):
                acc += td.sum(x[tm, tn] * 2.0 + 1.0, axis=1)
            out[tm] = acc
        return out
    return scaled_row_sums


@cache
def col_stats(block: int) -> td.TileKernel:
    """Per column, over each tile of `block` rows: the max and the mean of exp(x / 2) (reductions
    over the constant-block axis)."""
    @td.tile_kernel
    def col_stats(x):
        m, n = x.shape
        top = td.empty((-(-m // block), n), dtype=td.float32)
        mean = td.empty((-(-m // block), n), dtype=td.float32)
        for tm, tn in td.tile(m, n, block_size=(block, None)):
            v = td.exp(x[tm, tn] * 0.5)
            row = tm.begin // block
            top[row, tn] = td.max(v, axis=0)
            mean[row, tn] = td.mean(v, axis=0)
        return top, mean
    return col_stats


@cache
def shifted_by_index(block: int) -> td.TileKernel:
    """Elementwise, with the tile's index and size: x + index - size."""
    @td.tile_kernel
    def shifted_by_index(x):
        (n,) = x.shape
        out = td.empty((n,), dtype=td.float32)
        for t in td.tile(n, block_size=block):
            out[t] = x[t] + t.index.astype(td.float32) - t.size.astype(td.float32)
        return out
    return shifted_by_index


@cache
def matmul_fixed(bm: int, bk: int) -> td.TileKernel:
    @td.tile_kernel
    def matmul_fixed(a, b):
        m, k = a.shape
        _, n = b.shape
        out = td.empty((m, n), dtype=td.float32)
        for tm, tn in td.tile(m, n, block_size=(bm, None)):
            acc = td.zeros((tm, tn), dtype=td.float32)
            for tk in td.tile(k, block_size=bk):
                acc += a[tm, tk] @ b[tk, tn]
            out[tm, tn] = acc
        return out
    return matmul_fixed


def _rows_cols(rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((37, 29)).astype(np.float32)


def _col_stats_reference(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    v = np.exp(x.astype(np.float64) * 0.5)
    parts = [v[i:i + block] for i in range(0, len(v), block)]
    return np.stack([p.max(axis=0) for p in parts]), np.stack([p.mean(axis=0) for p in parts])


@pytest.mark.parametrize("block", [1, 2, 4, 8])
@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_blocks_reduce_exactly(backend: str, block: int) -> None:
    x = _rows_cols(np.random.default_rng(0))
    out = scaled_row_sums(block).run(x, backend=backend)
    ref = (x.astype(np.float64) * 2 + 1).sum(axis=1)
    td.testing.assert_close(out, ref, np.float32)
    top, mean = col_stats(block).run(x, backend=backend)
    ref_top, ref_mean = _col_stats_reference(x, block)
    td.testing.assert_close(top, ref_top, np.float32)
    td.testing.assert_close(mean, ref_mean, np.float32)


@pytest.mark.parametrize("block", [4, 8])
@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_blocks_elementwise(backend: str, block: int) -> None:
    x = np.random.default_rng(1).standard_normal(37).astype(np.float32)
    out = shifted_by_index(block).run(x, backend=backend)
    index = np.arange(37)
    size = np.minimum(block, 37 - index // block * block)
    td.testing.assert_close(out, x.astype(np.float64) + index - size, np.float32)


@pytest.mark.parametrize("blocks", [(4, 8), (8, 4), (2, 2), (1, 8)], ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_blocks_under_a_dot(backend: str, blocks: tuple[int, int]) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((37, 21)).astype(np.float32)
    b = rng.standard_normal((21, 19)).astype(np.float32)
    out = matmul_fixed(*blocks).run(a, b, backend=backend)
    td.testing.assert_close(out, a.astype(np.float64) @ b, np.float32)


def test_small_constant_blocks_are_not_padded() -> None:
    """A block of 4 is held in 4 lanes (Triton's tiles are powers of two, and only tl.dot needs
    16: its rule widens its operands), masked at the ragged edge only."""
    x = _rows_cols(np.random.default_rng(0))
    src = scaled_row_sums(4).source(x, target="triton")
    assert "offs_tm = begin_tm + tl.arange(0, 4)" in src
    assert "mask_tm = offs_tm < 37" in src
    src = scaled_row_sums(4).source(x[:36], target="triton")  # 4 divides 36: no mask
    assert "mask_tm" not in src


def test_small_blocks_use_exact_tensor_descriptors() -> None:
    """A TMA box is the block itself (4 rows), so it moves no other tile's rows."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    space = matmul_fixed(4, 32).config_space(a, b, backend="triton-interpret")
    config = space.complete(td.Config(space.default().block_sizes, tma=True))
    src = matmul_fixed(4, 32).source(a, b, target="triton", config=config)
    assert "a_desc" in src and "b_desc" in src
    out = matmul_fixed(4, 32).run(a, b, backend="triton-interpret", config=config)
    td.testing.assert_close(out, a.astype(np.float64) @ b, np.float16)


@pytest.mark.parametrize("arch", ["sm_90"])
def test_constant_blocks_compile(arch: str) -> None:
    rng = np.random.default_rng(4)
    x = _rows_cols(rng)
    a = rng.standard_normal((37, 21)).astype(np.float16)
    b = rng.standard_normal((21, 19)).astype(np.float16)
    reports = [*scaled_row_sums(4).compile(x, arch=arch), *col_stats(8).compile(x, arch=arch),
               *shifted_by_index(2).compile(x[0], arch=arch),
               *matmul_fixed(4, 8).compile(a, b, arch=arch)]
    assert all(r.registers > 0 for r in reports)
    assert "mma" in matmul_fixed(4, 8).source(a, b, target="ptx", arch=arch)


# ---- integer dots tl.dot does not take -------------------------------------------------------
@td.tile_kernel
def matmul_int(a, b):
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=td.int32)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=td.promote_types(td.int32, a.dtype))  # int64 for int64
        for tk in td.tile(k):
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc
    return out


def _int_operands(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Values whose products overflow int16 (and, for int32 and int64 operands, whose products
    wrap in int32)."""
    rng = np.random.default_rng(5)
    high = 30000 if dtype == np.int16 else 2**20
    a = rng.integers(-high, high, (37, 45)).astype(dtype)
    b = rng.integers(-high, high, (45, 29)).astype(dtype)
    return a, b


@pytest.mark.parametrize("dtype", [np.int16, pytest.param(np.int32, marks=pytest.mark.slow),
                                   np.int64], ids=["int16", "int32", "int64"])  # (int32: 10 s)
def test_integer_dots_match_numpy(dtype: type) -> None:
    a, b = _int_operands(dtype)
    ref = matmul_int.run(a, b, backend="numpy")
    exact = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)  # wrapped to int32
    np.testing.assert_array_equal(ref, exact)
    space = matmul_int.config_space(a, b, backend="triton-interpret")
    sampled = space.sample(2, seed=0) if dtype == np.int32 else []  # the interpreter: ~2 s each
    for config in [space.default(), *sampled]:
        out = matmul_int.run(a, b, backend="triton-interpret", config=config)
        np.testing.assert_array_equal(out, ref)


def test_integer_dots_compile_without_spills() -> None:
    a, b = _int_operands(np.int16)
    (report,) = matmul_int.compile(a, b, arch="sm_90")
    assert report.registers > 0 and report.problem is None
    a = np.zeros((300, 200), np.int16)
    b = np.zeros((200, 100), np.int16)
    (report,) = matmul_int.compile(a, b, arch="sm_90")  # default blocks: small enough
    assert report.spill_bytes == 0


def test_integer_dots_are_a_multiply_and_a_sum() -> None:
    a, b = _int_operands(np.int16)
    src = matmul_int.source(a, b, target="triton")
    assert "tl.dot" not in src
    assert "tl.sum(a_tile.to(tl.int32)[:, :, None] * b_tile.to(tl.int32)[None, :, :], axis=1)" \
        in src


# ---- td.full with a runtime scalar ------------------------------------------------------------
@td.tile_kernel
def add_to_filled(x, alpha: float):
    (n,) = x.shape
    out = td.full((n,), alpha * 2.0 + 1.0, dtype=td.float32)
    for t in td.tile(n):
        out[t] = out[t] + x[t]
    return out


@td.tile_kernel
def filled_with(x, alpha: float):
    (n,) = x.shape
    out = td.full((n,), alpha, dtype=td.float32)
    for t in td.tile(n):
        out[t] = out[t] + x[t]
    return out


@pytest.mark.parametrize("backend", ["spatial", "triton-interpret"])
@pytest.mark.parametrize("kernel", [add_to_filled, filled_with], ids=lambda k: k.name)
def test_full_with_a_runtime_scalar(kernel: td.TileKernel, backend: str) -> None:
    """Spatial computes the fill with the NumPy backend's rules; Triton's launcher in Python."""
    if backend == "triton-interpret":
        pytest.importorskip("torch")
    x = np.arange(37, dtype=np.float32)
    ref = kernel.run(x, 0.1, backend="numpy")
    out = kernel.run(x, 0.1, backend=backend)
    np.testing.assert_array_equal(out, ref)


def test_an_export_refuses_a_fill_computed_at_run_time(tmp_path: Any) -> None:
    pytest.importorskip("triton")
    with pytest.raises(td.BackendError, match="fills tensors only with constants"):
        add_to_filled.export(tmp_path / "pkg", np.arange(37, dtype=np.float32), 0.1, arch="sm_90")


@td.tile_kernel
def total_of(x):
    out = td.empty((), dtype=td.float32)  # a 0-d output, written by one program
    for _ in td.grid(1):
        acc = td.zeros((), dtype=td.float32)
        for t in td.tile(x.shape[0]):
            acc += td.sum(x[t])
        out[()] = acc
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_into_a_0d_tensor_writes_it(backend: str) -> None:
    """The NumPy backend stores through a view of the 0-d tensor (`arr[()]` would be a copy,
    and the output would read as never written)."""
    if backend == "triton-interpret":
        pytest.importorskip("torch")
    x = np.arange(37, dtype=np.float32)
    out = total_of.run(x, backend=backend)
    assert out.shape == () and out == x.sum()
