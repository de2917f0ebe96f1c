"""Compile-time arguments, ints specialized where a static int is needed, lists of tensors and
arrays captured by function arguments (tiledsl/frontend/static_args.py), on numpy, triton-interpret and
spatial."""

from __future__ import annotations

import pickle

import numpy as np
import torch
import pytest

import tiledsl as td
from support import example, under_configs

BACKENDS = ["numpy", "triton-interpret", "spatial"]


@td.tile_kernel
def scaled(x, causal, act, n):
    """`causal` (bool) and `act` (a function) are compile-time; `n` is used in arithmetic."""
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        v = x[t]
        if causal:
            v = v * 2.0
        out[t] = act(v) + n
    return out


@td.tile_kernel
def first_n(x, n):
    """`n` sizes the output and the grid: the kernel specializes on it."""
    out = td.empty((n,), dtype=x.dtype)
    for t in td.tile(n):
        out[t] = t.index.astype(x.dtype) * 3.0 + x[0]
    return out


@td.tile_kernel
def pairwise_add(xs, ys):
    """Lists of tensors: one output per pair, and a write into each element of `ys`."""
    outs = []
    for a, b in zip(xs, ys):
        out = td.empty_like(a)
        for t in td.tile(a.shape[0]):
            out[t] = a[t] + b[t]
            b[t] = b[t] * 2.0
        outs.append(out)
    return tuple(outs)


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_and_function_arguments_are_trace_time_values(backend: str) -> None:
    x = f32(37)
    for causal in (True, False):
        for cfg, out in under_configs(scaled, (x, causal, abs, 3), backend, samples=1):
            want = np.abs(x.astype(np.float64) * (2.0 if causal else 1.0)) + 3
            td.testing.assert_close(out, want, np.float32)


def test_each_value_has_its_own_trace_and_a_lambda_written_once_shares_one() -> None:
    x = f32(11)
    scaled.caches.traces.clear()
    for i in range(3):  # the same lambda code and closure each time: one trace
        scaled(x, True, lambda v: v * 0.5, i)
    assert len(scaled.caches.traces) == 1
    scaled(x, False, lambda v: v * 0.5, 0)
    assert len(scaled.caches.traces) == 2
    for k in (4.0, 5.0, 4.0):  # one code, two closure values: two traces
        np.testing.assert_allclose(scaled(x, False, _times(k), 0), x * k, rtol=1e-6)
    assert len(scaled.caches.traces) == 4


def _times(k: float):  # type: ignore[no-untyped-def]
    return lambda v: v * k


def test_an_int_used_as_a_shape_specializes_one_used_in_arithmetic_does_not() -> None:
    x = f32(40)
    first_n.caches.traces.clear()
    scaled.caches.traces.clear()
    for n in (3, 5, 3):
        np.testing.assert_allclose(first_n(x, n), np.arange(n) * 3.0 + x[0], rtol=1e-6)
        np.testing.assert_allclose(scaled(x, False, abs, n), np.abs(x) + n, rtol=1e-6)
    assert "n" in first_n.specs.static and len(first_n.caches.traces) == 2  # n = 3 and n = 5
    assert "n" not in scaled.specs.static and len(scaled.caches.traces) == 1
    ir = first_n.source(x, 7, target="ir")
    assert "n:" not in ir.splitlines()[0]  # 7 is a constant of the trace, not an argument
    for backend in BACKENDS[1:]:
        np.testing.assert_allclose(first_n.run(x, 7, backend=backend), np.arange(7) * 3.0 + x[0],
                                   rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lists_of_tensors_are_flattened_into_arguments(backend: str) -> None:
    xs = [f32(37, seed=1), f32(1, seed=2), f32(64, seed=3)]
    ys = [f32(37, seed=4), f32(1, seed=5), f32(64, seed=6)]
    space = pairwise_add.config_space(xs, ys, backend=backend)
    for cfg in (space.default(), *space.sample(1, seed=3)):
        call_ys = [y.copy() for y in ys]
        outs = pairwise_add.run(xs, call_ys, backend=backend, config=cfg)
        assert len(outs) == 3
        for out, x, y, written in zip(outs, xs, ys, call_ys):
            np.testing.assert_allclose(out, x + y, rtol=1e-6)
            np.testing.assert_allclose(written, y * 2.0, rtol=1e-6)
    assert pairwise_add.written_args(xs, ys) == ["ys[0]", "ys[1]", "ys[2]"]
    assert len(pairwise_add.traced(xs[:2], ys[:2]).ir.args) == 4  # specialized on the length


def test_captured_arrays_become_arguments_and_the_triton_code_takes_them() -> None:
    mod = example("matmul_epilogue")
    x, y, epilogue = mod.make_inputs(np.random.default_rng(2), {"m": 37, "k": 19, "n": 23})
    src = mod.matmul_epilogue.source(x, y, epilogue, target="triton")
    assert "bias_ptr" in src and "tl.maximum" in src
    report = mod.matmul_epilogue.compile(x, y, epilogue, arch="sm_90")  # no GPU needed
    assert report and not any(r.problem for r in report)


def test_kl_div_every_reduction_on_every_backend() -> None:
    mod = example("kl_div")
    dims = {"bt": 19, "v": 45}
    for log_target in (False, True):
        for reduction in mod.REDUCTIONS:
            args = mod.make_inputs(np.random.default_rng(3), dims, np.float32, log_target,
                                   reduction)
            ref = mod.reference(*args)
            for backend in BACKENDS:
                out = mod.kl_div.run(*args, backend=backend)
                td.testing.assert_close(out, ref, np.float32)


def test_grouped_gemm_under_sampled_configs() -> None:
    mod = example("grouped_gemm")
    args = mod.make_inputs(np.random.default_rng(4), {"groups": 3, "m": 37, "k": 45, "n": 29})
    ref = mod.reference(*args)
    for backend in BACKENDS:
        for cfg, out in under_configs(mod.grouped_gemm, args, backend, samples=1, seed=2):
            td.testing.assert_close(out, ref, np.float32)


def test_the_result_cache_key_tells_values_apart() -> None:
    from autotune import cache
    x = f32(9)
    keys = {cache.key(scaled, [x, c, f, 1], "numpy").text
            for c in (True, False) for f in (abs, lambda v: v)}
    assert len(keys) == 4
    again = cache.key(scaled, [x, True, abs, 2], "numpy").text  # a runtime int: the same key
    assert again in keys


def test_functions_are_shipped_to_other_processes_by_value() -> None:
    from tiledsl.frontend.static_args import shippable, static
    k = 3.0
    fn = lambda v: v * k  # noqa: E731 - what a user passes
    sent = shippable("scaled", ["act"], [fn])
    back = pickle.loads(pickle.dumps(sent[0]))
    assert back(2.0) == 6.0 and static(back) == static(fn)


class _Unpicklable:
    def __call__(self, v):  # type: ignore[no-untyped-def]
        return v

    def __reduce__(self):  # type: ignore[no-untyped-def]
        raise TypeError("no")


def test_unpicklable_constants_are_named() -> None:
    from tiledsl.frontend.static_args import shippable
    with pytest.raises(td.ArgumentError, match="argument 'act'.*cannot be sent"):
        shippable("scaled", ["act"], [_Unpicklable()])


def test_bad_arguments_and_misuse_are_clear_errors() -> None:
    x = f32(8)
    with pytest.raises(td.ArgumentError, match="argument 'act' is a builtins.dict"):
        scaled(x, True, {"a": 1}, 1)
    with pytest.raises(td.ArgumentError, match=r"argument 'xs' is a list holding a builtins.str"):
        pairwise_add([x, "a"], [x, x])
    with pytest.raises(td.TraceError, match="cannot use NoneType None in a tile expression"):
        scaled(x, False, lambda v: v * None, 1)


def test_torch_op_takes_str_and_bool_and_refuses_functions() -> None:
    pytest.importorskip("torch")
    mod = example("matmul_epilogue")
    with pytest.raises(td.ArgumentError, match="parameter 'epilogue'.*takes a function"):
        td.torch_op(mod.matmul_epilogue, name="static_args_test::mm")


def test_constexpr_marks_a_number_compile_time() -> None:
    x = f32(8)
    scaled.caches.traces.clear()
    for n in (1, 2):
        np.testing.assert_allclose(scaled(x, False, abs, td.constexpr(n)), np.abs(x) + n,
                                   rtol=1e-6)
    assert len(scaled.caches.traces) == 2


@td.tile_kernel
def shift_by(x, offset: td.constexpr, k: td.constexpr, eps: float):
    """Liger's RMSNorm writes `offset.to(X_row_dtype)` with `offset: tl.constexpr`: a
    compile-time number takes `.to`/`.cast`, giving a typed scalar; used as it is, it stays a
    weak Python number (`x + offset` keeps x's float16). A runtime float's `.to` is typed too,
    even to the float64 it holds."""
    typed = td.empty(x.shape, dtype=td.float32)
    weak = td.empty(x.shape, dtype=td.float32)
    wide = td.empty(x.shape, dtype=td.float64)
    for t in td.tile(x.shape[0]):
        typed[t] = x[t] + offset.to(td.float32) + k.cast(td.float32)
        weak[t] = (x[t] + offset).to(td.float32)
        wide[t] = x[t] + eps.to(td.float64)
    return typed, weak, wide


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compile_time_number_takes_to(backend: str) -> None:
    x = f32(37).astype(np.float16)
    typed, weak, wide = shift_by.run(x, 1 / 3, 2, 1 / 3, backend=backend)
    np.testing.assert_allclose(typed, x.astype(np.float64) + 1 / 3 + 2, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(weak, (x + 1 / 3).astype(np.float32))  # float16 arithmetic
    np.testing.assert_allclose(wide, x.astype(np.float64) + 1 / 3, rtol=1e-12)


def test_an_isolated_tune_ships_a_lambda_to_its_child(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import autotune.tuner
    from autotune.tuner import tune
    monkeypatch.setattr(autotune.tuner, "fork_start", lambda: "spawn")  # as GPU tunes start it
    x = f32(40)
    r = tune(scaled, [x, True, _times(3.0), 2], backend="numpy", trials=2, isolate=True,
             storage=f"sqlite:///{tmp_path}/s.db", rounds=1, use_cache=False)
    assert r.best_value is not None and r.best_value > 0


@td.tile_kernel
def moved_last(x, dim):
    """FlagGems' dim_compress: the host code's comprehension compares an int argument."""
    order = [i for i in range(x.ndim) if i != dim] + [dim]
    y = x.permute(*order)
    out = td.empty(y.shape, dtype=x.dtype)
    for a, b in td.tile(y.shape[0], y.shape[1]):
        out[a, b] = y[a, b]
    return out


def test_an_int_argument_taken_for_a_python_bool_becomes_compile_time() -> None:
    x = np.random.default_rng(26).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(moved_last(x, 0), x.T)
    np.testing.assert_array_equal(moved_last(x, 1), x)  # a trace of its own


@td.tile_kernel
def divided(x, divisor):
    """FlagGems' avg_pool2d checks its arguments in host code: `if divisor == 0: raise`."""
    if divisor == 0:
        raise ValueError("divisor must be nonzero")
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] / divisor
    return out


def test_an_if_on_an_int_argument_in_host_code_makes_it_compile_time() -> None:
    x = np.random.default_rng(32).standard_normal(37).astype(np.float32)
    td.testing.assert_close(divided(x, 4), x / 4.0, np.float32)
    with pytest.raises(td.TraceError, match="ValueError: divisor must be nonzero"):
        divided(x, 0)


@td.tile_kernel
def first_rows(x, m):
    """FlagGems' triu: `td.register_block_size(M)` of an int argument specializes it, as a
    size does."""
    out = td.zeros_like(x)
    bm = td.register_block_size(m)
    part, into = x[:m, :], out[:m, :]
    for t in td.tile(m, block_size=bm):
        into[t, :] = part[t, :] * 2
    return out


def test_a_block_size_registered_for_an_int_argument_specializes_it() -> None:
    x = np.random.default_rng(5).standard_normal((37, 5)).astype(np.float32)
    for m in (30, 37):
        want = np.where(np.arange(37)[:, None] < m, 2 * x, 0)
        np.testing.assert_array_equal(first_rows(x, m), want)


@td.tile_kernel
def soft_capped(x, softcap, rtol):
    """FlagGems' flash wrapper and isclose's checks: a host-code `if` on Python float
    arguments (`if softcap > 0.0:`, `if rtol < 0: raise`) traces the kernel with them as
    constants; in arithmetic alone a float stays a runtime argument."""
    if rtol < 0:
        raise ValueError("rtol must be >= 0")
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        v = x[t] * (1.0 + rtol)
        if softcap > 0.0:
            v = softcap * td.tanh(v / softcap)
        out[t] = v
    return out


def test_a_host_if_on_a_float_argument_specializes_it() -> None:
    x = f32(40)
    soft_capped.caches.traces.clear()
    for backend in BACKENDS[:2]:
        for cap in (0.0, 2.0):
            out = soft_capped.run(x, cap, 0.5, backend=backend)
            want = x * 1.5 if cap == 0 else cap * np.tanh(x * 1.5 / cap)
            np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    assert "rtol" in soft_capped.specs.static  # the host-level `if` tests it
    with pytest.raises(td.TraceError, match="rtol must be >= 0"):
        soft_capped(x, 0.0, -1.0)


@td.tile_kernel
def powers_of(x, base):
    """FlagGems' logspace: `math.log2(float(base))` of a Python float argument in host code
    traces the kernel per value of `base`, as an `if` on it does."""
    import math
    log2_base = math.log2(float(base))
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.exp2(x[t] * log2_base)
    return out


def test_a_python_float_argument_used_as_a_float_in_host_code_is_static() -> None:
    x = np.arange(6, dtype=np.float32)
    for base in (2.0, 10.0):
        td.testing.assert_close(powers_of.run(x, base), base ** x.astype(np.float64), np.float32)
    assert len(powers_of.caches.traces) == 2


@td.tile_kernel
def chunk_starts(x, chunk_size):
    """mamba's `nchunks = math.ceil(seqlen / chunk_size)` of an int argument in host code: the
    kernel specializes on it."""
    import math
    nchunks = math.ceil(x.shape[0] / chunk_size)
    out = td.empty((nchunks,), dtype=x.dtype)
    for c in td.grid(nchunks):
        out[c] = x[c * chunk_size]
    return out


def test_an_int_argument_divided_into_a_python_float_in_host_code_is_static() -> None:
    x = np.arange(37, dtype=np.float32)
    for size in (16, 5):
        np.testing.assert_array_equal(chunk_starts.run(x, size), x[::size])
    assert "chunk_size" in chunk_starts.specs.static


@td.tile_kernel
def shifted_by(x, off=0):
    """flash-attn's `seqlen_offsets: Union[int, Tensor]`: an int the host code needs static in
    one call, an array in another."""
    if isinstance(off, torch.Tensor):
        return x + off
    assert off + x.shape[0] <= 100
    return x + off


def test_a_parameter_made_static_by_an_int_still_takes_an_array() -> None:
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(shifted_by.run(x, 3), x + 3)
    assert "off" in shifted_by.specs.static
    np.testing.assert_array_equal(shifted_by.run(x, x), x + x)


@td.tile_kernel
def logit_scaled(x, scale: float = 1.0):
    """flash-attn's cross entropy: `assert logit_scale > 0.0` of a Python float argument in host
    code traces per value, as an `if` on it does."""
    assert scale > 0.0
    return x * scale


def test_a_host_assert_on_a_float_argument_specializes_it() -> None:
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(logit_scaled.run(x, 2.0), x * 2)
    with pytest.raises(td.TraceError, match="AssertionError"):
        logit_scaled.run(x, -1.0)


@td.tile_kernel
def leading_part(x, factor: float = 1.0):
    """lightllm's rotary: `head_dim = int(q.shape[2] * partial_rotary_factor)` of a Python float
    argument in host code traces per value."""
    d = int(x.shape[1] * factor)
    out = td.empty((x.shape[0], d), dtype=x.dtype)
    for t in td.tile(x.shape[0]):
        out[t, :] = x[t, :d]
    return out


def test_a_float_argument_made_a_python_int_in_host_code_is_static() -> None:
    x = np.random.default_rng(77).random((3, 8)).astype(np.float32)
    for factor in (0.5, 1.0):
        np.testing.assert_array_equal(leading_part.run(x, factor), x[:, :int(8 * factor)])
