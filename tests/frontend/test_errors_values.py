"""Errors for runtime scalars, indexing, kernels calling kernels, unknown backends and other
misuse (see error_checks.py for what every case asserts)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import tiledsl as td
from error_checks import add, check_named, f32, file_marker_line, msg, raised, trace_error

HERE = os.path.abspath(__file__)


# ---- 9. other misuse (continued) ----------------------------------------------------------------
@td.tile_kernel
def range_of_scalar(x, alpha):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        v = x[t]
        for _ in range(alpha):  # <- here
            v = v * 2.0
        out[t] = v
    return out


def test_runtime_scalar_as_python_int() -> None:
    """A float argument is never an int bound; an int argument is specialized on its value."""
    err = trace_error(td.TraceError, range_of_scalar, f32(8), 3.0)
    assert "range(): bounds must be integer scalars, got a float64 scalar" in msg(err)
    x = f32(8)
    np.testing.assert_allclose(range_of_scalar(x, 3), x * 8.0)


@td.tile_kernel
def int_of_scalar(x, alpha):
    n = int(alpha)  # <- here
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * n
    return out


def test_int_of_runtime_scalar() -> None:
    err = trace_error(td.TraceError, int_of_scalar, f32(8), np.float32(3.0))
    assert "Python int" in msg(err)  # (a NumPy scalar stays a runtime value)
    x = f32(8)
    np.testing.assert_allclose(int_of_scalar(x, 3), x * 3.0)
    np.testing.assert_allclose(int_of_scalar(x, 3.0), x * 3.0)  # (a Python float: traced per
    # value in host code, as float() and `if` on it are)


@td.tile_kernel
def tile_of_scalar(x, n):
    out = td.empty_like(x)
    for t in td.tile(n):  # <- here
        out[t] = x[t]
    return out


def test_tile_over_runtime_scalar() -> None:
    err = trace_error(td.TraceError, tile_of_scalar, f32(8), 8.0)
    assert "td.tile()" in msg(err) and "runtime value" in msg(err)
    x = f32(8)
    np.testing.assert_array_equal(tile_of_scalar(x, 8), x)  # an int: specialized


@td.tile_kernel
def tile_of_float(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0] / 2):  # <- here
        out[t] = x[t]
    return out


def test_tile_over_float() -> None:
    err = trace_error(td.TraceError, tile_of_float, f32(8))
    assert "td.tile()" in msg(err) and "float" in msg(err)


@td.tile_kernel
def tile_as_value(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * t  # <- here
    return out


def test_tile_used_as_value() -> None:
    err = trace_error(td.TraceError, tile_as_value, f32(8))
    assert "'t'" in msg(err) and err.hint and "t.index" in err.hint


@td.tile_kernel
def iterate_tile_value(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        for v in x[t]:  # <- here
            out[t] = v
    return out


def test_iterate_tile_value() -> None:
    err = trace_error(td.TraceError, iterate_tile_value, f32(8))
    assert "iterate" in msg(err)


@td.tile_kernel
def iterate_tensor_in_loop(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        for row in x:  # <- here
            out[t] = row
    return out


@td.tile_kernel
def iterate_tensor_on_host(x):
    out = td.empty_like(x)
    for row in x:  # <- here
        pass
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
    return out


@pytest.mark.parametrize("kernel", [iterate_tensor_in_loop, iterate_tensor_on_host],
                         ids=lambda k: k.name)
def test_iterate_tensor(kernel: td.TileKernel) -> None:
    err = trace_error(td.TraceError, kernel, f32(4))
    assert "iterate" in msg(err) and "'x'" in msg(err)


@td.tile_kernel
def int_index_out_of_range(a):
    m, _k = a.shape
    out = td.empty((m,), dtype=a.dtype)
    for tm in td.tile(m):
        out[tm] = a[tm, 7]  # <- here
    return out


def test_int_index_out_of_range() -> None:
    err = trace_error(td.ShapeError, int_index_out_of_range, f32(8, 5))
    assert "7" in msg(err) and "'a'" in msg(err) and "dimension 1" in msg(err)


@td.tile_kernel
def partial_slice(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[1:3]  # <- here
    return out


def test_partial_slice() -> None:
    """A bounded slice is a constant-size dimension (test_shifted.py): here one of 2 elements
    stored where a tile of t goes."""
    err = trace_error(td.ShapeError, partial_slice, f32(8))
    assert "cannot store a tile of shape (2,)" in msg(err) and "of shape (t,)" in msg(err)


@td.tile_kernel
def index_with_float_scalar(x, alpha):
    out = td.empty_like(x)
    for t in td.grid(x.shape[0]):
        out[t] = x[alpha]  # <- here
    return out


def test_index_with_float_scalar() -> None:
    err = trace_error(td.TraceError, index_with_float_scalar, f32(8), 1.5)
    assert "'x'" in msg(err)


@td.tile_kernel
def index_tile_value_with_tile(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t][t]  # <- here
    return out


def test_index_tile_value_with_tile() -> None:
    err = trace_error(td.TraceError, index_tile_value_with_tile, f32(8))
    assert "None" in msg(err)


@td.tile_kernel
def reduce_bad_axis(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] - td.sum(x[t], axis=1)  # <- here
    return out


def test_reduce_axis_out_of_range() -> None:
    err = trace_error(td.ShapeError, reduce_bad_axis, f32(8))
    assert "axis 1" in msg(err) and "td.sum" in msg(err)


@td.tile_kernel
def numpy_array_in_kernel(x):
    out = td.empty_like(x)
    weights = np.ones(4, dtype=np.float32)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * weights  # <- here
    return out


def test_numpy_array_inside_kernel() -> None:
    err = trace_error(td.TraceError, numpy_array_in_kernel, f32(8))
    assert "ndarray" in msg(err)


@td.tile_kernel
def user_key_error(x):
    table = {"a": 1}
    n = table["b"]  # <- here
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * n
    return out


def test_users_own_exception_is_wrapped() -> None:
    err = trace_error(td.TraceError, user_key_error, f32(8))
    assert isinstance(err.__cause__, KeyError) and "KeyError" in msg(err)


@td.tile_kernel
def value_escapes_inner_loop(a):
    m, k = a.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        for tk in td.tile(k):
            part = td.sum(a[tm, tk], axis=1)
        out[tm] = part  # <- here
    return out


def test_value_defined_in_loop_used_after_it() -> None:
    err = trace_error(td.TraceError, value_escapes_inner_loop, f32(8, 6))
    assert "'part'" in msg(err)


def test_value_defined_in_loop_used_after_it_message() -> None:
    err = trace_error(td.TraceError, value_escapes_inner_loop, f32(8, 6))
    assert "loop" in msg(err)


def test_unknown_backend() -> None:
    err = raised(td.BackendError, add.run, f32(8), f32(8), backend="cuda-nope")
    assert "'cuda-nope'" in msg(err) and "numpy" in msg(err)  # lists the available ones


def test_unknown_backend_names_kernel() -> None:
    err = raised(td.BackendError, add.run, f32(8), f32(8), backend="cuda-nope")
    check_named(err, add)


def test_unknown_source_target() -> None:
    err = raised(td.BackendError, add.source, f32(8), f32(8), target="nope")
    assert "'nope'" in msg(err)


def test_var_args_kernel() -> None:
    with pytest.raises(td.TraceError) as info:
        @td.tile_kernel
        def var_args(*xs):  # <- here
            return xs
    err = info.value
    assert type(err) is td.TraceError
    assert "'var_args'" in msg(err) and "*args" in msg(err)
    assert err.loc is not None and os.path.abspath(err.loc.file) == HERE
    assert err.loc.line in (file_marker_line("def var_args(*xs):  # <- here", __file__) - 1,
                            file_marker_line("def var_args(*xs):  # <- here", __file__))


def test_kernel_without_source() -> None:
    namespace: dict[str, Any] = {"td": td}
    exec(  # noqa: S102
        compile("def no_source(x):\n    return x\n", "<generated>", "exec"), namespace)
    k = td.tile_kernel(namespace["no_source"])
    err = raised(td.TraceError, k, f32(4))
    assert "'no_source'" in msg(err) and "defined in a file" in msg(err)


@td.tile_kernel
def calls_a_kernel(x, y):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = add(x[t], y[t])  # <- here
    return out


def test_kernel_called_inside_kernel() -> None:
    err = trace_error(td.TraceError, calls_a_kernel, f32(8), f32(8))
    assert "'add'" in msg(err)


@pytest.mark.parametrize("n", [4, 9])
def test_arguments_of_mismatched_lengths(n: int) -> None:
    err = trace_error(td.ShapeError, add, f32(8), f32(n), marker="out[t] = x[t] + y[t]")
    assert "'y'" in msg(err) and f"which has {n}" in msg(err)


def test_lambda_kernel() -> None:
    with pytest.raises(td.TraceError) as info:
        td.tile_kernel(lambda x: x)
    assert info.value.kernel == "<lambda>" and "def" in msg(info.value)


# ---- ill-typed arguments to the kernel's methods -------------------------------------------------
@pytest.mark.parametrize("call, cls, words", [
    (lambda s: s.sample(1.5), td.ConfigError, "n is a count"),
    (lambda s: s.sample(None), td.ConfigError, "n is a count"),
    (lambda s: s.sample(-1), td.ConfigError, "n is a count"),
    (lambda s: s.sample(2, seed="1"), td.ConfigError, "the seed is an int"),
    (lambda s: td.Config.from_dict({"block_sizes": [4], 5: 1}), td.ConfigError, "keys are names"),
    (lambda s: td.Config.from_json(5), td.ConfigError, "JSON is a string"),
    (lambda s: add.export(5, f32(8), f32(8)), td.ArgumentError, "path is a directory name"),
    (lambda s: td.load(5), td.ArgumentError, "path is a package's directory"),
    (lambda s: add.autotune(f32(8), f32(8), trails=5), td.ConfigError,
     "unknown option(s) trails; the options: backend, arch, trials"),
    (lambda s: add.warm(f32(8), f32(8), num_sms=0), td.BackendError, "num_sms is the GPU's"),
], ids=["sample-float", "sample-none", "sample-negative", "sample-seed", "from-dict-key",
        "from-json-int", "export-path", "load-path", "autotune-option", "warm-num-sms"])
def test_ill_typed_arguments_to_the_api(call: Any, cls: type, words: str) -> None:
    space = add.config_space(f32(8), f32(8))
    err = raised(cls, call, space)
    assert words in msg(err), msg(err)
    assert len(space.sample(0)) == 0 and len(space.sample(np.int64(2), seed=np.int64(1))) == 2


def test_an_arch_attach_given_as_a_list_is_the_tuple() -> None:
    import dataclasses

    from lowering.backends.spatial.arch import preset
    base = preset("generic-8x8")
    channel = base.dram[0]
    arch = dataclasses.replace(base, dram=(dataclasses.replace(channel, attach=list(channel.attach)),
                                           *base.dram[1:]))
    assert arch.dram[0].attach == channel.attach and isinstance(arch.dram[0].attach, tuple)
    x, y = f32(8), f32(8)
    assert add.simulate(x, y, arch=arch).cycles == add.simulate(x, y, arch=base).cycles


@td.tile_kernel
def floats_into_ints(out):
    for t in td.tile(out.shape[0]):
        out[t] = td.where(t.index % 2 == 0, 1.0, 0.0)  # <- here


@td.tile_kernel
def float_of_int_argument(x, k):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * float(k)
    return out


def test_python_floats_into_an_int_tensor_and_float_of_an_argument() -> None:
    """A select of two Python floats is weak: the error says so, and that Triton would
    truncate; float() of a runtime scalar in the kernel's code is that scalar."""
    err = trace_error(td.DTypeError, floats_into_ints, np.zeros(8, np.int32))
    assert "storing a tile of Python floats into int32 tensor" in msg(err)
    assert "td.where(c, 1, 0)" in (err.hint or "")
    x = f32(8)
    np.testing.assert_allclose(float_of_int_argument(x, 3), x * 3.0)
