"""Every bad input gives a typed tiledsl error that names the kernel and, when tracing, the line.

Each case asserts the exact exception class (always a `td.TileDSLError` subclass: no raw NumPy,
IndexError, KeyError or AttributeError traceback leaks out), that the message names the kernel,
and, for errors raised while tracing, that `err.loc` is the offending line of the kernel's file
(found by a `# <- here` marker in the kernel's source) and that the message shows that source
line (error_checks.py). This file: wrong arguments, ranks, shapes, dtypes, configs and empty
dimensions; test_errors_misuse.py and test_errors_values.py hold the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tiledsl as td
from error_checks import (add, arg_error, check_named, f16, f32, matmul, msg, raised, scale,
                          trace_error)


def test_good_kernels_run() -> None:
    """The kernels used for argument and config errors are themselves correct."""
    x, y = f32(100), f32(100)
    np.testing.assert_allclose(add(x, y), x + y, rtol=1e-6)
    np.testing.assert_allclose(scale(x, 2.0), 2 * x, rtol=1e-6)
    a, b = f32(9, 7), f32(7, 5)
    np.testing.assert_allclose(matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)


# ---- 1. wrong argument types --------------------------------------------------------------------
@pytest.mark.parametrize("bad, words", [
    ({"a": 1}, ["'x'", "dict", "NumPy array"]),
    (object(), ["'x'", "builtins.object", "NumPy array"]),
], ids=["dict", "object"])
def test_argument_not_an_array(bad: Any, words: list[str]) -> None:
    err = arg_error(td.ArgumentError, add, bad, f32(3))
    for w in words:
        assert w in msg(err)


@pytest.mark.parametrize("bad", [[1.0, 2.0, 3.0], "abc", None], ids=["list", "str", "None"])
def test_compile_time_argument_used_as_a_tensor(bad: Any) -> None:
    """A list of numbers, a str or None is a compile-time argument (static_args.py): used where
    a tensor is needed, the error is at the line that uses it."""
    err = raised(td.TraceError, add, bad, f32(3))
    assert f"takes a tensor, got {type(bad).__name__}" in msg(err)
    assert "td.empty_like(x)" in str(err)


@pytest.mark.parametrize("dtype", [np.complex64, "datetime64[s]", np.float128 if hasattr(
    np, "float128") else np.complex128, np.object_])
def test_argument_unsupported_dtype(dtype: Any) -> None:
    x = np.ones(4, dtype=dtype)
    err = arg_error(td.ArgumentError, add, x, f32(4))
    assert "'x'" in msg(err) and np.dtype(dtype).name in msg(err)
    for supported in ("float16", "bfloat16", "float32", "int32", "bool"):  # lists what is allowed
        assert supported in msg(err)


@pytest.mark.parametrize("alpha", [np.complex64(1 + 2j), np.datetime64(3, "s"), 1 + 2j],
                         ids=["np.complex64", "np.datetime64", "complex"])
def test_scalar_argument_unsupported(alpha: Any) -> None:
    err = arg_error(td.ArgumentError, scale, f32(4), alpha)
    assert "'alpha'" in msg(err)


def test_too_few_arguments() -> None:
    err = arg_error(td.ArgumentError, add, f32(4))
    assert "'y'" in msg(err) and "parameters: x, y" in msg(err)


def test_too_many_arguments() -> None:
    err = arg_error(td.ArgumentError, add, f32(4), f32(4), f32(4))
    assert "too many" in msg(err) and "parameters: x, y" in msg(err)


def test_unknown_keyword_argument() -> None:
    err = arg_error(td.ArgumentError, add, f32(4), f32(4), z=f32(4))
    assert "'z'" in msg(err) and "parameters: x, y" in msg(err)


def test_argument_errors_from_every_entry_point() -> None:
    """`config_space`, `source` and `traced` check arguments the same way as a call."""
    for entry in (add.config_space, add.source, add.traced, add.run):
        err = raised(td.ArgumentError, entry, {"a": 1}, f32(2))
        check_named(err, add)


# ---- 2. wrong ranks -----------------------------------------------------------------------------
@td.tile_kernel
def rank2_unpack(a):
    m, k = a.shape  # <- here
    out = td.empty((m, k), dtype=a.dtype)
    for tm, tk in td.tile(m, k):
        out[tm, tk] = a[tm, tk]
    return out


@pytest.mark.parametrize("shape, words", [((4, 5, 6), "too many values"),
                                          ((4,), "not enough values")], ids=["3-D", "1-D"])
def test_wrong_rank_unpack(shape: tuple[int, ...], words: str) -> None:
    err = trace_error(td.TraceError, rank2_unpack, f32(*shape))
    assert isinstance(err.__cause__, ValueError)
    assert "ValueError" in msg(err) and words in msg(err)


@td.tile_kernel
def three_indices(a):
    m, k = a.shape
    out = td.empty((m, k), dtype=a.dtype)
    for tm, tk in td.tile(m, k):
        out[tm, tk] = a[tm, tk, tk]  # <- here
    return out


def test_too_many_indices_load() -> None:
    err = trace_error(td.ShapeError, three_indices, f32(6, 6))
    assert "'a'" in msg(err) and "2 dimension" in msg(err) and "3 indices" in msg(err)


@td.tile_kernel
def three_indices_store(a):
    m, k = a.shape
    out = td.empty((m, k), dtype=a.dtype)
    for tm, tk in td.tile(m, k):
        out[tm, tk, 0] = a[tm, tk]  # <- here
    return out


def test_too_many_indices_store() -> None:
    err = trace_error(td.ShapeError, three_indices_store, f32(6, 6))
    assert "2 dimension" in msg(err) and "3 indices" in msg(err)


# ---- 3. mismatched shapes -----------------------------------------------------------------------
@td.tile_kernel
def dot_inner_mismatch(a, b):  # a: (m, k), b: (n, k)
    m, k = a.shape
    n, _ = b.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=td.float32)
        for tk in td.tile(k):
            acc += a[tm, tk] @ b[tn, tk]  # <- here
        out[tm, tn] = acc
    return out


def test_dot_contraction_mismatch() -> None:
    err = trace_error(td.ShapeError, dot_inner_mismatch, f32(8, 6), f32(5, 6))
    assert "'@'" in msg(err) and "(tm, tk) @ (tn, tk)" in msg(err)
    assert err.hint and "a[tm, tk] @ b[tk, tn]" in err.hint


@td.tile_kernel
def dot_rank1(a, b):
    m, _k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        row = td.sum(a[tm, :], axis=1)
        out[tm, tn] = row @ b[:, tn]  # <- here
    return out


def test_dot_not_2d() -> None:
    err = trace_error(td.ShapeError, dot_rank1, f32(8, 6), f32(6, 5))
    assert "2-D" in msg(err) and "(tm,)" in msg(err)


@td.tile_kernel
def store_mismatch(a, b):  # out: (m, n) but the stored tile is (tm, tk)
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        for tk in td.tile(k):
            out[tm, tn] = a[tm, tk]  # <- here
    return out


def test_store_shape_mismatch() -> None:
    err = trace_error(td.ShapeError, store_mismatch, f32(8, 6), f32(6, 5))
    assert "(tm, tk)" in msg(err) and "(tm, tn)" in msg(err)


@td.tile_kernel
def broadcast_two_tiles(x, y):
    m = x.shape[0]
    n = y.shape[0]
    out = td.empty((m, n), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        s = x[tm] + y[tn]  # <- here
        out[tm, tn] = s[:, None]
    return out


def test_broadcast_tiles_of_different_loops() -> None:
    err = trace_error(td.ShapeError, broadcast_two_tiles, f32(8), f32(5))
    assert "(tm,)" in msg(err) and "(tn,)" in msg(err) and "broadcast" in msg(err)


@td.tile_kernel
def broadcast_same_extent(x):  # two tile loops over the same extent are still different tiles
    n = x.shape[0]
    out = td.empty_like(x)
    for ti in td.tile(n):
        acc = td.zeros((ti,), dtype=td.float32)
        for tj in td.tile(n):
            acc += x[ti] * x[tj]  # <- here
        out[ti] = acc
    return out


def test_broadcast_tiles_same_extent() -> None:
    err = trace_error(td.ShapeError, broadcast_same_extent, f32(8))
    assert "(ti,)" in msg(err) and "(tj,)" in msg(err)


# ---- 4. dtype clashes ---------------------------------------------------------------------------
@td.tile_kernel
def dot_mixed_dtypes(a, b):
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=td.float32)
        for tk in td.tile(k):
            acc += a[tm, tk] @ b[tk, tn]  # <- here
        out[tm, tn] = acc
    return out


def test_dot_dtype_clash() -> None:
    """A float and an int operand clash (two float widths promote, as NumPy's matmul)."""
    err = trace_error(td.DTypeError, dot_mixed_dtypes, f16(8, 6), np.ones((6, 5), np.int32))
    assert "float16" in msg(err) and "int32" in msg(err)
    assert err.hint and "astype" in err.hint
    np.testing.assert_allclose(dot_mixed_dtypes(a := f16(8, 6), b := f32(6, 5)),
                               a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@td.tile_kernel
def store_float_into_int(x):
    n = x.shape[0]
    out = td.empty((n,), dtype=td.int32)
    for t in td.tile(n):
        out[t] = x[t] * 2.0  # <- here
    return out


def test_store_float_into_int() -> None:
    err = trace_error(td.DTypeError, store_float_into_int, f32(8))
    assert "float32" in msg(err) and "int32" in msg(err)
    assert err.hint and "astype" in err.hint


@td.tile_kernel
def bitwise_and_float(x, y):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] & y[t]  # <- here
    return out


def test_bitwise_on_floats() -> None:
    err = trace_error(td.DTypeError, bitwise_and_float, f32(8), f32(8))
    assert "'&'" in msg(err) and "float32" in msg(err)


@td.tile_kernel
def invert_float(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = ~x[t]  # <- here
    return out


def test_invert_on_floats() -> None:
    err = trace_error(td.DTypeError, invert_float, f32(8))
    assert "'~'" in msg(err) and "float32" in msg(err)


@td.tile_kernel
def where_float_condition(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.where(x[t], x[t], 0.0)  # <- here
    return out


def test_where_non_bool_condition() -> None:
    err = trace_error(td.DTypeError, where_float_condition, f32(8))
    assert "td.where" in msg(err) and "bool" in msg(err) and "float32" in msg(err)


@td.tile_kernel
def dot_bool(a, b):
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        for tk in td.tile(k):
            out[tm, tn] = (a[tm, tk] > 0) @ (b[tk, tn] > 0)  # <- here
    return out


def test_dot_on_bool_tiles() -> None:
    err = trace_error(td.DTypeError, dot_bool, f32(8, 6), f32(6, 5))
    assert "'@'" in msg(err) and "bool" in msg(err)


@td.tile_kernel
def astype_bad_dtype(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t].astype("complex64")  # <- here
    return out


def test_astype_unknown_dtype() -> None:
    err = trace_error(td.DTypeError, astype_bad_dtype, f32(8))
    assert "complex64" in msg(err)


@td.tile_kernel
def astype_none(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t].astype(None)  # <- here
    return out


def test_astype_none_is_not_a_dtype() -> None:
    """NumPy reads None as float64; in a kernel it is a slip, not a silent no-op or cast."""
    err = trace_error(td.DTypeError, astype_none, f32(8))
    assert "None is not a tiledsl dtype" in msg(err)


def reduce_with(axis: Any, keepdims: Any) -> td.TileKernel:
    @td.tile_kernel
    def reduce_with(x):
        out = td.empty((x.shape[0],), dtype=td.float32)
        for t in td.tile(x.shape[0]):
            out[t] = td.sum(x[t, :], axis=axis, keepdims=keepdims)  # <- here
        return out
    return reduce_with


@td.tile_kernel
def reduce_on_argument(x, axis):
    out = td.empty((x.shape[0],), dtype=td.float32)
    for t in td.tile(x.shape[0]):
        out[t] = td.sum(x[t, :], axis=axis)  # <- here
    return out


def test_a_reduction_axis_is_a_constant() -> None:
    err = trace_error(td.ShapeError, reduce_on_argument, f32(8, 5), 1.0)
    assert "td.sum: axis must be a constant int" in msg(err)
    x = f32(8, 5)  # an int argument as the axis: the kernel specializes on its value
    np.testing.assert_allclose(reduce_on_argument(x, 1), x.sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("axis, keepdims, cls, message", [
    ((1, 1), False, td.ShapeError, "axis (1, 1) names an axis twice"),
    ((1, -1), False, td.ShapeError, "axis (1, -1) names an axis twice"),
    (True, False, td.ShapeError, "axis True is not an axis of a 2-D tile"),
    (1, "yes", td.TraceError, "keepdims must be True or False, got 'yes'"),
    (1, 2, td.TraceError, "keepdims must be True or False, got 2"),
])
def test_reduction_axes_and_keepdims_are_checked(axis: Any, keepdims: Any,
                                                 cls: type[td.TileDSLError],
                                                 message: str) -> None:
    """NumPy raises for each of these; tiledsl used to dedupe, cast or accept them."""
    err = trace_error(cls, reduce_with(axis, keepdims), f32(8, 5))
    assert message in msg(err)


def test_reduction_keepdims_takes_numpy_bools_and_0_or_1() -> None:
    x = f32(9, 5)
    for keepdims in (0, np.False_):
        td.testing.assert_close(reduce_with(1, keepdims)(x), x.astype(np.float64).sum(1),
                                np.float32)


# ---- 7. invalid configs -------------------------------------------------------------------------
@pytest.mark.parametrize("block", [3, 48, 0, -4])
def test_config_block_not_power_of_two(block: int) -> None:
    x, y = f32(100), f32(100)
    err = arg_error(td.ConfigError, add.run, x, y, config=td.Config(block_sizes=(block,)))
    assert "block_sizes[0]" in msg(err) and "power of two" in msg(err)
    assert "tile 't' over 100" in msg(err)  # says which tile the block size is for


@pytest.mark.parametrize("blocks", [(), (64, 64)])
def test_config_wrong_number_of_blocks(blocks: tuple[int, ...]) -> None:
    x, y = f32(100), f32(100)
    err = arg_error(td.ConfigError, add.run, x, y, config=td.Config(block_sizes=blocks))
    assert f"{len(blocks)} block sizes given" in msg(err)
    assert "1 tunable" in msg(err) and "block_sizes[0]: tile 't' over 100" in msg(err)


def test_config_wrong_number_of_blocks_matmul() -> None:
    a, b = f32(9, 7), f32(7, 5)
    err = arg_error(td.ConfigError, matmul.run, a, b, config=td.Config(block_sizes=(16, 16)))
    for p in ("block_sizes[0]: tile 'tm' over 9", "block_sizes[1]: tile 'tn' over 5",
              "block_sizes[2]: tile 'tk' over 7"):
        assert p in msg(err)


def test_config_block_too_large() -> None:
    x, y = f32(100), f32(100)  # next power of two of 100 is 128
    err = arg_error(td.ConfigError, add.run, x, y, config=td.Config(block_sizes=(256,)))
    assert "256" in msg(err) and "[1, 2, 4, 8, 16, 32, 64, 128]" in msg(err)
    assert "tile 't' over 100" in msg(err)
    assert add.run(x, y, config=td.Config(block_sizes=(128,))) is not None  # the largest is fine


def test_config_unknown_knob() -> None:
    x, y = f32(100), f32(100)
    err = arg_error(td.ConfigError, add.run, x, y, config=td.Config(block_sizes=(64,), bogus=1))
    assert "bogus" in msg(err) and "block_sizes[0]" in msg(err)


@pytest.mark.parametrize("config", [{"block_sizes": (64,)}, (64,), 64, "64"],
                         ids=["dict", "tuple", "int", "str"])
def test_config_not_a_config(config: Any) -> None:
    x, y = f32(100), f32(100)
    err = arg_error(td.ArgumentError, add.run, x, y, config=config)
    assert "td.Config" in msg(err) and type(config).__name__ in msg(err)


def test_config_space_validate_not_a_config() -> None:
    space = add.config_space(f32(100), f32(100))
    err = raised(td.ArgumentError, space.validate, {"block_sizes": (64,)})
    assert "td.Config" in msg(err) and err.kernel == "add"


def test_config_space_validate_names_kernel() -> None:
    space = add.config_space(f32(100), f32(100))
    err = raised(td.ConfigError, space.validate, td.Config(block_sizes=(3,)))
    check_named(err, add)


@td.tile_kernel
def fixed_block_not_pow2(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0], block_size=24):  # <- here
        out[t] = x[t]
    return out


def test_fixed_block_size_not_power_of_two() -> None:
    err = trace_error(td.TraceError, fixed_block_not_pow2, f32(100))
    assert "power of two" in msg(err) and "24" in msg(err)


@td.tile_kernel
def fixed_block_wrong_count(a):
    m, n = a.shape
    out = td.empty_like(a)
    for tm, tn in td.tile(m, n, block_size=(16, 16, 16)):  # <- here
        out[tm, tn] = a[tm, tn]
    return out


def test_fixed_block_sizes_wrong_count() -> None:
    err = trace_error(td.TraceError, fixed_block_wrong_count, f32(8, 8))
    assert "3 block sizes for 2 sizes" in msg(err)


@pytest.mark.parametrize("make", [
    lambda: td.Config(block_sizes=None),
    lambda: td.Config.from_dict({"block_sizes": 64}),
    lambda: td.Config.from_json("not json"),
], ids=["block_sizes=None", "from_dict-int", "from_json-garbage"])
def test_malformed_config_input(make: Callable[[], Any]) -> None:
    err = raised(td.ConfigError, make)
    assert "block_sizes" in msg(err) or "JSON" in msg(err)


# ---- 8. empty dimensions ------------------------------------------------------------------------
def test_empty_argument() -> None:
    """An empty tensor runs where its grids have no program; a tile of it is empty: an error
    (tests/lang/test_empty_tensors.py has the rest)."""
    assert add(np.zeros(0, np.float32), np.zeros(0, np.float32)).shape == (0,)
    err = raised(td.ShapeError, lambda: add(np.zeros((3, 0), np.float32),
                                            np.zeros((3, 0), np.float32)))
    assert "a tile has no empty dimension" in msg(err)


@td.tile_kernel
def tile_of_zero(x):
    m = x.shape[0]
    out = td.empty_like(x)
    for t in td.tile(m - m):  # <- here
        out[t] = x[t]
    return out


def test_tile_of_zero() -> None:
    """A grid of no program runs nothing: what it would have written is never written."""
    err = raised(td.TraceError, lambda: tile_of_zero(f32(8)))
    assert "no store writes" in msg(err) and f"the grid at line {err.loc.line - 2} has no " \
        "program" in msg(err)


@td.tile_kernel
def grid_of_zero(x):
    b, _n = x.shape
    out = td.empty_like(x)
    for i in td.grid(b - b):  # <- here
        out[i, :] = x[i, :]
    return out


def test_grid_of_zero() -> None:
    err = raised(td.TraceError, lambda: grid_of_zero(f32(3, 8)))
    assert f"the grid at line {err.loc.line - 2} has no program" in msg(err)


@td.tile_kernel
def empty_of_zero(x):
    n = x.shape[0]
    out = td.empty((n - n, n), dtype=x.dtype)  # an empty tensor, which no tile fits
    for t in td.tile(n):
        out[t, :] = x[t][:, None]  # <- here
    return out


def test_empty_allocation_of_zero() -> None:
    err = trace_error(td.ShapeError, empty_of_zero, f32(8))
    assert "which has 0 (shape (0, 8))" in msg(err)


@td.tile_kernel
def zeros_of_zero(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        z = td.zeros((t, 0), dtype=td.float32)  # <- here
        out[t] = x[t] + td.sum(z, axis=1)
    return out


def test_zeros_tile_of_zero() -> None:
    err = trace_error(td.ShapeError, zeros_of_zero, f32(8))
    assert "td.full" in msg(err) or "td.zeros" in msg(err)


def test_error_hierarchy() -> None:
    """The classes the cases above rely on, and the builtin bases users may catch."""
    for cls in (td.ShapeError, td.DTypeError, td.ControlFlowError):
        assert issubclass(cls, td.TraceError)
    for cls in (td.TraceError, td.ArgumentError, td.ConfigError, td.IRError, td.BackendError):
        assert issubclass(cls, td.TileDSLError)
    assert issubclass(td.ShapeError, ValueError) and issubclass(td.DTypeError, TypeError)
    assert issubclass(td.ArgumentError, TypeError) and issubclass(td.ConfigError, ValueError)
