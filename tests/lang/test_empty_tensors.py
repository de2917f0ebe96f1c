"""Tensors with an empty dimension (n = 0 tokens, `torch.empty(0)` placeholders): a grid of no
program runs nothing, a masked-off access of an empty tensor reads `other` and writes nothing,
and a tile with an empty dimension is a ShapeError at the user's line."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import gpu_backend, run_on
from tiledsl.errors import OutOfBoundsError, ShapeError

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = triton.language

BACKENDS = ["numpy", "triton-interpret", "spatial", gpu_backend()]


@triton.jit
def _add(X, Y, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Out + offs, tl.load(X + offs, mask=mask) + tl.load(Y + offs, mask=mask), mask=mask)


@td.tile_kernel
def add(x, y):
    """Triton's tutorial wrapper: cdiv(0, 1024) = 0 programs."""
    out = torch.empty_like(x)
    n = out.numel()
    _add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=1024)
    return out


@td.tile_kernel
def doubled(x):
    (n,) = x.shape
    out = td.empty_like(x)
    for t in td.tile(n):  # no tile at n = 0
        out[t] = x[t] * 2
    return out


@triton.jit
def _row_sums(X, Bias, Out, N, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.0)  # every lane off at N = 0
    s = tl.sum(x, 0)
    if HAS_BIAS:
        s += tl.load(Bias + row)
    tl.store(Out + row, s)


@td.tile_kernel
def row_sums(x, bias=None):
    """torch's `x.sum(1)` of (M, 0) is zeros; an absent bias is flash-attn's and Liger's
    `torch.empty(0)` placeholder, never read."""
    M, N = x.shape
    b = bias if bias is not None else torch.empty(0, dtype=x.dtype, device=x.device)
    out = torch.empty(M, dtype=x.dtype, device=x.device)
    _row_sums[(M,)](x, b, out, N, HAS_BIAS=bias is not None, BLOCK=16)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_grids_of_no_program_and_masked_off_reads(backend: str) -> None:
    empty = np.zeros(0, np.float32)
    for out in (run_on(add, (empty, empty), backend), run_on(doubled, (empty,), backend)):
        assert out.shape == (0,) and out.dtype == np.float32
    np.testing.assert_array_equal(run_on(first16, (empty,), backend), np.full(16, -1.0))
    sums = run_on(row_sums, (np.zeros((5, 0), np.float32),), backend)
    np.testing.assert_array_equal(sums, np.zeros(5, np.float32))
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    np.testing.assert_allclose(run_on(row_sums, (x,), backend), x.astype(np.float64).sum(1),
                               rtol=1e-6)


def test_torch_tensors_and_the_generated_launcher() -> None:
    assert add(torch.empty(0), torch.empty(0)).shape == (0,)
    src = add.source(np.zeros(0, np.float32), np.zeros(0, np.float32), target="triton")
    assert "@triton.jit" not in src and "empty((0,), 'float32')" in src  # nothing to launch
    # NumPy's strides of an empty array are 0, which would broadcast the pointer: not a tile
    [compiled] = first16.compile(np.zeros(0, np.float32), arch="sm_90")
    assert compiled.spill_bytes == 0


@triton.jit
def _first16(X, Out, n):
    offs = tl.arange(0, 16)
    tl.store(Out + offs, tl.load(X + offs, mask=offs < n, other=-1.0))


@td.tile_kernel
def first16(x):
    """A grid of one program reading a 1-D tensor, every lane masked off when it is empty."""
    out = torch.empty(16, dtype=x.dtype, device=x.device)
    _first16[(1,)](x, out, x.numel())
    return out


@td.tile_kernel
def column_sums(x):
    m, n = x.shape
    out = td.empty((m,), dtype=x.dtype)
    for tm in td.tile(m):
        out[tm] = x[tm, :].sum(1)
    return out


@triton.jit
def _copy16(X, Out):
    offs = tl.arange(0, 16)
    tl.store(Out + offs, tl.load(X + offs))


@td.tile_kernel
def copy16(x):
    out = torch.empty(16, dtype=x.dtype)
    _copy16[(1,)](x, out)
    return out


def test_an_empty_tile_and_an_unmasked_read_are_errors_at_the_line() -> None:
    with pytest.raises(ShapeError, match="a tile has no empty dimension") as e:
        column_sums.run(np.zeros((4, 0), np.float32), backend="numpy")
    assert "x[tm, :].sum(1)" in str(e.value)
    with pytest.raises(OutOfBoundsError, match="out of bounds for dimension 0 .size 0."):
        copy16.run(np.zeros(0, np.float32), backend="numpy")
