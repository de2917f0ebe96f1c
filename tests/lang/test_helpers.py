"""Tile loops and branches in helper functions the kernel calls (tiledsl/frontend/helpers.py):
the fused-attention tutorial's form, whose key loop is `_attn_fwd_inner(acc, l_i, m_i, ...)`
returning the carried values, runs as written; errors in a helper name its own file and line."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

import tiledsl as td
from support import example, under_configs


def _attn_inner(acc, l_i, m_i, qt, k, v, b, tq, scale):
    """The key loop up to the query tile's end: a sequential tile loop carrying (acc, l_i, m_i),
    with a runtime `if` that masks only the tiles reaching the diagonal."""
    for tk in td.tile(tq.end):
        s = (qt @ k[b, tk, :].T) * scale
        if tk.end > tq.begin:
            s = td.where(tq.index[:, None] >= tk.index[None, :], s, -float("inf"))
        m_new = td.maximum(m_i, td.max(s, axis=1))
        alpha = td.exp(m_i - m_new)
        p = td.exp(s - m_new[:, None])
        l_i = l_i * alpha + td.sum(p, axis=1)
        acc = acc * alpha[:, None] + p.astype(v.dtype) @ v[b, tk, :]
        m_i = m_new
    return acc, l_i, m_i


def _write_rows(out, b, tq, acc, l_i):
    out[b, tq, :] = acc / l_i[:, None]


@td.tile_kernel
def attention_with_helpers(q, k, v):
    batch, seq, d = q.shape
    out = td.empty((batch, seq, d), dtype=q.dtype)
    for bh, tq in td.tile(batch, seq, block_size=(1, None)):
        b = bh.begin
        qt = q[b, tq, :]
        m_i = td.full((tq,), -float("inf"), dtype=td.float32)
        l_i = td.zeros((tq,), dtype=td.float32)
        acc = td.zeros((tq, d), dtype=td.float32)
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, qt, k, v, b, tq, 1.0 / math.sqrt(d))
        _write_rows(out, b, tq, acc, l_i)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_key_loop_in_a_helper(backend: str) -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 37, 16)).astype(np.float16) for _ in range(3))
    expected = example("attention").reference(q, k, v)  # the same kernel, in one function
    for config, out in under_configs(attention_with_helpers, (q, k, v), backend):
        np.testing.assert_allclose(out, expected, rtol=1e-2, atol=1e-2, err_msg=str(config))


HELPER_MODULE = '''
import tiledsl as td


def copy_rows(x, out):
    for t in td.tile(x.shape[0]):
        out[t] = x[t]


def positive_rows(x, out):
    for t in td.tile(x.shape[0]):
        if x[t] > 0:  # a tile-shaped condition: an error at this line of this file
            out[t] = x[t]
'''


def test_helpers_in_another_module(tmp_path: Path) -> None:
    """A grid loop in an imported helper runs; an error in one names the helper's own file."""
    path = tmp_path / "row_helpers.py"
    path.write_text(HELPER_MODULE)
    spec = importlib.util.spec_from_file_location("row_helpers", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]

    @td.tile_kernel
    def copied(x):
        out = td.empty_like(x)
        mod.copy_rows(x, out)
        return out

    @td.tile_kernel
    def positive(x):
        out = td.zeros_like(x)
        mod.positive_rows(x, out)
        return out

    x = np.random.default_rng(1).standard_normal(11).astype(np.float32)
    np.testing.assert_array_equal(copied(x), x)
    with pytest.raises(td.ControlFlowError) as info:
        positive(x)
    err = info.value
    assert "an `if` on a tile" in err.message and err.kernel == "positive"
    assert err.loc is not None and Path(err.loc.file) == path and err.loc.line == 12


def _compute_pid(tile_id, num_pid_in_group, num_pid_m, group_size_m):
    """The persistent-matmul tutorial's helper: no loop, builtin `min` on runtime values."""
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * group_size_m
    group_size_m = min(num_pid_m - first_pid_m, group_size_m)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@td.tile_kernel
def swizzled_ids(x, num_pid_m, num_pid_n, group: td.constexpr):
    out = td.empty((num_pid_m * num_pid_n, 2), td.int64)
    for tile_id in td.grid(num_pid_m * num_pid_n):
        pid_m, pid_n = _compute_pid(tile_id, group * num_pid_n, num_pid_m, group)
        out[tile_id, 0] = pid_m
        out[tile_id, 1] = pid_n
    return out


def test_builtin_min_in_a_helper_without_loops() -> None:
    m, n, g = 5, 3, 2
    want = []
    for t in range(m * n):
        first = t // (g * n) * g
        size = min(m - first, g)
        want.append((first + t % size, t % (g * n) // size))
    np.testing.assert_array_equal(swizzled_ids(np.ones(1, np.float32), m, n, g), want)


class _ScaledOp:
    """A callable object with a method (FlagGems' pointwise_dynamic ops are objects whose
    `__call__` checks its arguments and loops over tiles): both are rewritten as helpers."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def __call__(self, x):  # type: ignore[no-untyped-def]
        import torch
        if not isinstance(x, torch.Tensor):  # (a kernel's tensor is one only when rewritten)
            raise TypeError("not a tensor")
        return self.apply(x)

    def apply(self, x):  # type: ignore[no-untyped-def]
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            v = x[t]
            out[t] = v * self.scale if self.scale > 0 else -v  # (a runtime `if` needs rewriting)
        return out


_TRIPLE = _ScaledOp(3.0)


@td.tile_kernel
def through_objects(x):
    return _TRIPLE(x), _TRIPLE.apply(x)


def test_a_callable_object_and_a_bound_method_are_rewritten() -> None:
    pytest.importorskip("torch")
    x = np.random.default_rng(46).standard_normal(37).astype(np.float32)
    a, b = through_objects(x)
    np.testing.assert_allclose(a, 3 * x, rtol=1e-6)
    np.testing.assert_allclose(b, 3 * x, rtol=1e-6)


_BUILT: list | None = None
_CALLS = 0


def _lazily_built() -> list:
    """torchao's lazily built kernel: a helper that binds module globals under `if`s and in a
    loop (each rewritten body is a function of its own, where the name would be local)."""
    global _BUILT, _CALLS
    built = _BUILT
    if built is None:
        built = [2.0]
        _BUILT = built
    for _ in range(2):
        _CALLS = _CALLS + 1
    return built


def test_a_helper_binding_globals_under_ifs_and_loops() -> None:
    x = np.arange(5, dtype=np.float32)
    _, factor = calls_torchao.run(x, backend="numpy")
    assert factor == 2.0 and _BUILT == [2.0] and _CALLS >= 2 and _CALLS % 2 == 0


def _doubled_in_torchao(x):  # type: ignore[no-untyped-def]
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * 2 if x.shape[0] > 0 else x[t]
    return out


_doubled_in_torchao.__module__ = "torchao.prototype.kernels"  # a library named torch*, not torch


@td.tile_kernel
def calls_torchao(x):
    return _doubled_in_torchao(x), _lazily_built()[0]


def test_a_library_whose_name_starts_with_torch_is_traced() -> None:
    """torchao's functions are the user's, traced as helpers: only `torch` and `torch.*` are
    torch's own (which a kernel calls as they are)."""
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(calls_torchao.run(x, backend="numpy")[0], 2 * x)
