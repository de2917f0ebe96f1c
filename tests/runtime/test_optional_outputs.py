"""A None in a kernel's returned tuple, an optional output the caller did not ask for
(flash-linear-attention's `return o, final_state`), comes back as None in its place on every
backend, and so does a number the trace computed (Liger's `return y, rstd, BLOCK_SIZE,
num_warps`); the tuner checks the tensors alone (tiledsl/runtime/returns.py)."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.runners import NumpyRunner
import tiledsl as td
from support import gpu_backend, scaled_rows, sized_rows, under_configs
from tiledsl.testing import assert_close


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial", gpu_backend()])
def test_an_optional_output_is_none_in_its_place(backend: str) -> None:
    x = np.random.default_rng(3).standard_normal((37, 20)).astype(np.float16)
    want_o, want_sums = x.astype(np.float64) * 0.5, x.astype(np.float64).sum(axis=1)
    for keep, (config, (o, sums)) in [(False, c) for c in under_configs(
            scaled_rows, (x, 0.5), backend, samples=1)] + [(True, c) for c in under_configs(
            scaled_rows, (x, 0.5, True), backend, samples=1)]:
        assert_close(o, want_o, np.float16)
        if keep:
            assert_close(sums, want_sums, np.float32)
        else:
            assert sums is None, config


def test_the_tuner_checks_the_tensors_an_optional_output_leaves() -> None:
    x = np.random.default_rng(4).standard_normal((33, 16)).astype(np.float32)
    for args in ([x, 2.0], [x, 2.0, True]):
        runner = NumpyRunner(scaled_rows, args)
        assert len(runner.reference()) == len(args) - 1  # o, and the sums when asked for
        assert runner.check(scaled_rows.config_space(*args).default()) is None


def test_assert_close_takes_an_optional_output_on_both_sides_only() -> None:
    o = np.arange(5.0)
    assert_close((o, None), (o, None))
    with pytest.raises(AssertionError, match="output 1 is None, its reference an array"):
        assert_close((o, None), (o, o))


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial", gpu_backend()])
def test_a_returned_number_comes_back_as_it_is(backend: str) -> None:
    x = np.random.default_rng(5).standard_normal((13, 20)).astype(np.float32)
    for config, (o, block, quarter, wide) in under_configs(sized_rows, (x,), backend, samples=1):
        assert_close(o, x.astype(np.float64) + 1, np.float32)
        assert (block, quarter, wide) == (32, 5.0, True), config
        assert (type(block), type(quarter), type(wide)) == (int, float, bool)
    assert sized_rows.traced(x).returns == \
        "tuple:tensor,int:32,float:5.0,bool:True"
    runner = NumpyRunner(sized_rows, [x])
    assert len(runner.reference()) == 1  # the tuner compares the tensor alone
    assert runner.check(sized_rows.config_space(x).default()) is None


@td.tile_kernel
def nested_states(x):
    """mamba3's step returns `Out, [state, k, v, V]`: lists and tuples nest in the return."""
    o, s = td.empty_like(x), td.empty_like(x)
    for t in td.tile(x.shape[0]):
        o[t] = x[t] + 1
        s[t] = x[t] * 2
    return o, [s, (x.shape[0], None, x)]


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_return_may_nest_lists_and_tuples(backend: str) -> None:
    x = np.random.default_rng(6).standard_normal(21).astype(np.float32)
    o, [s, (n, none, same)] = nested_states.run(x, backend=backend)
    assert_close(o, x.astype(np.float64) + 1, np.float32)
    assert_close(s, x.astype(np.float64) * 2, np.float32)
    assert (n, none) == (21, None)
    np.testing.assert_array_equal(same, x)
    assert nested_states.traced(x).returns == "tuple:tensor,[tensor,(int:21,None,tensor)]"
    if backend == "numpy":  # torch tensors in, torch tensors out, the numbers as they are
        torch = pytest.importorskip("torch")
        t = torch.from_numpy(x)
        o, [s, (n, none, same)] = nested_states(t)
        assert isinstance(s, torch.Tensor) and same is t and (n, none) == (21, None)


def test_a_returned_runtime_scalar_is_refused_at_its_line() -> None:
    @td.tile_kernel
    def returns_scale(x, scale: float):
        o = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            o[t] = x[t] * scale
        return o, scale

    with pytest.raises(td.TraceError, match="returns a runtime scalar") as err:
        returns_scale.run(np.ones(8, np.float32), 2.0, backend="numpy")
    assert "known when the kernel traces" in err.value.hint
