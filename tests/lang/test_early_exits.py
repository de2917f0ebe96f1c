"""Early exits from tile loops (tiledsl/frontend/exits.py): a bare `return` ends a grid
program, `continue` skips the rest of an iteration, as in Triton; a `return` inside a sequential
tile loop is refused at its line; loops over Python iterables keep Python's meaning."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from error_checks import trace_error
from support import gpu_backend, under_configs

BACKENDS = ["numpy", "triton-interpret", gpu_backend()]
IGNORE = -100


@td.tile_kernel
def masked_rows(x, labels):
    """Liger's cross-entropy shape: an ignored row stores zeros and returns; a row labelled 0
    stores its double and `continue`s past a nested exit; the rest store x * label."""
    n, d = x.shape
    out = td.empty((n, d), dtype=x.dtype)
    hits = td.empty((n,), dtype=td.int32)
    for r in td.grid(n):
        y = labels[r]
        if y == IGNORE:
            out[r, :] = td.zeros((d,), dtype=x.dtype)
            hits[r] = 0
            return
        row = x[r, :]
        if y < 3:
            if y == 0:
                out[r, :] = row * 2
                hits[r] = 1
                continue
            row = row + 1
        out[r, :] = row * y
        hits[r] = 2
    return out, hits


def test_early_return_and_continue_in_a_grid_loop() -> None:
    """Each program takes the branch its row's label picks: the code after an exit is the
    other branch of its `if`, on every backend, under sampled configs."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((13, 37)).astype(np.float32)
    labels = rng.choice([IGNORE, 0, 1, 2, 5, 7], size=13).astype(np.int32)
    labels[:4] = [IGNORE, 0, 2, 5]
    xd, y = x.astype(np.float64), labels[:, None].astype(np.float64)
    expected = np.where(y == IGNORE, 0, np.where(y == 0, 2 * xd, np.where(y < 3, xd + 1, xd) * y))
    want_hits = np.where(labels == IGNORE, 0, np.where(labels == 0, 1, 2))
    for backend in ["numpy", "triton-interpret", "spatial"]:
        for config, (out, hits) in under_configs(masked_rows, (x, labels), backend):
            np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6,
                                       err_msg=f"{backend} {config}")
            np.testing.assert_array_equal(hits, want_hits)


@td.tile_kernel
def block_sparse_rowsum(x, keep):
    """A block-sparse reduction: key blocks whose `keep` flag is 0 are skipped with `continue`;
    the running sum and count are carried past the skipped iterations unchanged."""
    m, n = x.shape
    out = td.empty((m,), dtype=td.float32)
    used = td.empty((m,), dtype=td.int32)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.float32)
        count = 0
        for tk in td.tile(n, block_size=8):
            if keep[tk.begin // 8] == 0:
                continue
            acc += td.sum(x[tm, tk].astype(td.float32), axis=1)
            count += 1
        out[tm] = acc
        used[tm] = td.full((tm,), count, dtype=td.int32)
    return out, used


@pytest.mark.parametrize("backend", BACKENDS)
def test_continue_in_a_sequential_loop(backend: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((11, 45)).astype(np.float16)
    keep = np.array([1, 0, 1, 1, 0, 1], np.int32)  # 6 blocks of 8 cover 45 columns
    mask = np.repeat(keep, 8)[:45]
    expected = (x.astype(np.float64) * mask).sum(axis=1)
    for config, (out, used) in under_configs(block_sparse_rowsum, (x, keep), backend):
        np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-3, err_msg=str(config))
        np.testing.assert_array_equal(used, np.full(11, keep.sum()))


@td.tile_kernel
def return_in_key_loop(x):
    n, d = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for tm in td.tile(n):
        acc = td.zeros((tm,), dtype=x.dtype)
        for tk in td.tile(d):
            if td.sum(x[tm.begin, tk]) > 0:
                return  # <- here
            acc += td.sum(x[tm, tk], axis=1)
        out[tm] = acc
    return out


def test_return_in_a_sequential_loop_is_refused_at_its_line() -> None:
    err = trace_error(td.TraceError, return_in_key_loop, np.ones((8, 16), np.float32))
    assert "this `return` cannot leave the td.tile() loop of line" in err.message
    assert "not from a nested loop" in err.message
    assert err.loc is not None and err.loc.source_line().startswith("return  # <- here")


@td.tile_kernel
def python_loop_exits(x, skip: int, leave: td.constexpr):
    """Loops over Python values keep Python's meaning inside a tile kernel: `continue` skips
    an unrolled step (on a runtime condition too: the rest of the step is the `if`'s else
    branch), and a `return` in one leaves the kernel."""
    n = x.shape[0]
    out = td.empty((n,), dtype=x.dtype)
    other = td.zeros((n,), dtype=x.dtype)
    for t in td.tile(n):
        acc = x[t]
        for k in range(4):
            if k == skip:
                continue
            acc = acc + k
        out[t] = acc
    for k in range(3):
        if k == leave:
            return out
    return other


def test_loops_over_python_values_keep_python_exits() -> None:
    x = np.random.default_rng(2).standard_normal(10).astype(np.float32)
    np.testing.assert_allclose(python_loop_exits(x, 1, 1), x + 5, rtol=1e-6)  # 0 + 2 + 3
    np.testing.assert_array_equal(python_loop_exits(x, 1, 3), np.zeros(10))  # `other`


@td.tile_kernel
def scaled_rows(alpha, x, n_valid):
    """Liger's mhc sinkhorn: `if pid >= N: return`, then a tensor's name rebound to the value
    loaded from it, and a pointer's to one of another shape. The rest of the program is the
    `if`'s other branch, so the names are never used where the branches disagree on them."""
    n = x.shape[0]
    out = td.zeros((n,), dtype=td.float32)
    for pid in td.grid(n):
        x_row = x + pid  # a pointer moved by a scalar, then by a tile (flash-attn's rotary)
        if pid >= n_valid:
            return
        alpha = td.load(alpha)
        x_row = x_row + td.arange(0, 1)
        td.store(out + pid + td.arange(0, 1), td.load(x_row) * alpha)
    return out


@td.tile_kernel
def rebound_then_used(alpha, x):
    n = x.shape[0]
    out = td.zeros((n,), dtype=td.float32)
    for pid in td.grid(n):
        if td.load(x + pid) > 0:
            alpha = td.load(alpha)
        td.store(out + pid, td.load(alpha))  # a tensor or a value, by program
    return out


def test_a_name_rebound_after_an_early_return() -> None:
    x = np.arange(5, dtype=np.float32)
    for backend in ("numpy", "triton-interpret"):
        out = scaled_rows.run(np.array([2.0], np.float32), x, 3, backend=backend)
        np.testing.assert_array_equal(out, [0, 2, 4, 0, 0])
    with pytest.raises(td.TraceError, match="'alpha' \\(TileValue / Tensor\\) is rebound") as e:
        rebound_then_used(np.array([2.0], np.float32), x)
    assert e.value.loc.source_line().startswith("if td.load(x + pid) > 0")


def _update_row(pid, x_ptr, o_ptr, idx_ptr, BLOCK):
    """vLLM's `_causal_conv1d_update_kernel` kept as a function: a pad slot ends the program
    (`if idx_seq >= batch: return`) before the rest of its body."""
    slot = td.load(idx_ptr + pid)
    if slot == -1:
        return
    cols = td.arange(0, BLOCK)
    td.store(o_ptr + pid * BLOCK + cols, td.load(x_ptr + slot * BLOCK + cols) * 2)


@td.tile_kernel
def gathered_rows(x, idx):
    o = td.zeros((idx.shape[0], x.shape[1]), dtype=x.dtype)
    for pid in td.grid(idx.shape[0]):
        _update_row(pid, x, o, idx, x.shape[1])
    return o


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bare_return_ends_a_helper_the_grid_calls(backend: str) -> None:
    x = np.random.default_rng(3).standard_normal((3, 16)).astype(np.float32)
    idx = np.array([2, -1, 0, 1], np.int32)
    want = np.where(idx[:, None] == -1, 0.0, 2 * x[np.maximum(idx, 0)])
    for config, out in under_configs(gathered_rows, (x, idx), backend):
        np.testing.assert_allclose(out, want, rtol=1e-6, err_msg=str(config))
