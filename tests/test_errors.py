"""Every bad input gives a typed tiledsl error that names the kernel and, when tracing, the line.

Each case asserts the exact exception class (always a `td.TileDSLError` subclass: no raw NumPy,
IndexError, KeyError or AttributeError traceback leaks out), that the message names the kernel,
and, for errors raised while tracing, that `err.loc` is the offending line of this file (found by
a `# <- here` marker in the kernel's source) and that the message shows that source line.
"""

from __future__ import annotations

import inspect
import linecache
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tiledsl as td

HERE = os.path.abspath(__file__)
MARK = "# <- here"
RNG = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def f16(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float16)


# ---- helpers ----------------------------------------------------------------------------------
def marker_line(fn: Any, marker: str = MARK) -> int:
    """The line number (in this file) of the one line of `fn`'s source that ends with `marker`."""
    fn = getattr(fn, "fn", fn)
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(marker)]
    assert len(hits) == 1, f"{fn.__name__}: expected one line marked {marker!r}, found {hits}"
    return hits[0]


def msg(err: td.TileDSLError) -> str:
    """The message and hint alone (str(err) also shows the source line, which could match too)."""
    return f"{err.message}\n{err.hint or ''}"


def file_marker_line(marker: str) -> int:
    """The line number of the one line of this file that ends with `marker`."""
    with open(HERE) as f:
        hits = [i for i, text in enumerate(f, 1) if text.rstrip().endswith(marker)]
    assert len(hits) == 1, f"expected one line marked {marker!r}, found {hits}"
    return hits[0]


def raised(cls: type[td.TileDSLError], call: Callable[..., Any], *args: Any,
           **kwargs: Any) -> td.TileDSLError:
    """Call and return the tiledsl error it raises; fail on no error or on a leaked exception."""
    try:
        call(*args, **kwargs)
    except td.TileDSLError as e:
        err = e
    except Exception as e:  # noqa: BLE001 - the point: nothing else may escape
        pytest.fail(f"leaked a non-tiledsl {type(e).__module__}.{type(e).__qualname__}: {e}")
    else:
        pytest.fail(f"no error raised (expected {cls.__name__})")
    assert isinstance(err, td.TileDSLError)
    assert type(err) is cls, f"expected {cls.__name__}, got {type(err).__name__}: {err}"
    return err


def check_named(err: td.TileDSLError, kernel: Any) -> None:
    kernel = getattr(kernel, "__self__", kernel)  # a bound method such as `k.run`
    assert err.kernel == kernel.name, str(err)
    assert f"in kernel '{kernel.name}'" in str(err), str(err)


def check_loc(err: td.TileDSLError, fn: Any, marker: str = MARK) -> None:
    line = marker_line(fn, marker)
    assert err.loc is not None, f"no location: {err}"
    assert os.path.abspath(err.loc.file) == HERE, f"{err.loc} is not in this file: {err}"
    assert err.loc.line == line, f"points at line {err.loc.line}, not {line}: {err}"
    source = linecache.getline(HERE, line).strip()
    assert source and source in str(err), f"source line {source!r} not shown in: {err}"


def trace_error(cls: type[td.TileDSLError], kernel: td.TileKernel, *args: Any,
                marker: str = MARK, **kwargs: Any) -> td.TileDSLError:
    """Run `kernel` and check the error: class, kernel name, location and the message's head."""
    err = raised(cls, kernel, *args, **kwargs)
    check_named(err, kernel)
    check_loc(err, kernel, marker)
    head = f"{err.loc.file}:{err.loc.line}: in kernel '{kernel.name}': "
    assert str(err).startswith(head), str(err)
    return err


def arg_error(cls: type[td.TileDSLError], kernel: Any, *args: Any,
              **kwargs: Any) -> td.TileDSLError:
    """An error raised before tracing: class and kernel name (no source location needed)."""
    err = raised(cls, kernel, *args, **kwargs)
    check_named(err, kernel)
    name = getattr(kernel, "__self__", kernel).name
    assert str(err).startswith(f"in kernel '{name}': "), str(err)
    return err


# ---- kernels that are fine (bad arguments or configs are passed to them) -----------------------
@td.tile_kernel
def add(x, y):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] + y[t]
    return out


@td.tile_kernel
def scale(x, alpha):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * alpha
    return out


@td.tile_kernel
def matmul(a, b):
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=td.float32)
        for tk in td.tile(k):
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc
    return out


def test_good_kernels_run() -> None:
    """The kernels used for argument and config errors are themselves correct."""
    x, y = f32(100), f32(100)
    np.testing.assert_allclose(add(x, y), x + y, rtol=1e-6)
    np.testing.assert_allclose(scale(x, 2.0), 2 * x, rtol=1e-6)
    a, b = f32(9, 7), f32(7, 5)
    np.testing.assert_allclose(matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)


# ---- 1. wrong argument types --------------------------------------------------------------------
@pytest.mark.parametrize("bad, words", [
    ([1.0, 2.0, 3.0], ["'x'", "list", "NumPy array"]),
    ("abc", ["'x'", "str", "NumPy array"]),
    (None, ["'x'", "NoneType"]),
    ({"a": 1}, ["'x'", "dict"]),
], ids=["list", "str", "None", "dict"])
def test_argument_not_an_array(bad: Any, words: list[str]) -> None:
    err = arg_error(td.ArgumentError, add, bad, f32(3))
    for w in words:
        assert w in msg(err)


@pytest.mark.parametrize("dtype", [np.complex64, np.uint8, np.uint32, np.float128 if hasattr(
    np, "float128") else np.complex128, np.object_])
def test_argument_unsupported_dtype(dtype: Any) -> None:
    x = np.ones(4, dtype=dtype)
    err = arg_error(td.ArgumentError, add, x, f32(4))
    assert "'x'" in msg(err) and np.dtype(dtype).name in msg(err)
    for supported in ("float16", "bfloat16", "float32", "int32", "bool"):  # lists what is allowed
        assert supported in msg(err)


@pytest.mark.parametrize("alpha", [np.complex64(1 + 2j), np.uint8(3), 1 + 2j],
                         ids=["np.complex64", "np.uint8", "complex"])
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
        err = raised(td.ArgumentError, entry, [1.0, 2.0], f32(2))
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
    err = trace_error(td.DTypeError, dot_mixed_dtypes, f16(8, 6), f32(6, 5))
    assert "float16" in msg(err) and "float32" in msg(err)
    assert err.hint and "astype" in err.hint


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


# ---- 5. Python control flow on tile values ------------------------------------------------------
@td.tile_kernel
def if_on_tile(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        v = x[t]
        if v > 0:  # <- here
            out[t] = v
        else:
            out[t] = -v
    return out


@td.tile_kernel
def while_on_tile(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        v = x[t]
        while td.sum(v) > 0:  # <- here
            v = v - 1.0
        out[t] = v
    return out


@td.tile_kernel
def and_on_tiles(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        mask = (x[t] > 0) and (x[t] < 1)  # <- here
        out[t] = td.where(mask, x[t], 0.0)
    return out


@td.tile_kernel
def or_on_tiles(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        mask = (x[t] > 0) or (x[t] < -1)  # <- here
        out[t] = td.where(mask, x[t], 0.0)
    return out


@td.tile_kernel
def not_on_tile(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        mask = not (x[t] > 0)  # <- here
        out[t] = td.where(mask, x[t], 0.0)
    return out


@td.tile_kernel
def chained_comparison(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        mask = 0.0 < x[t] < 1.0  # <- here
        out[t] = td.where(mask, x[t], 0.0)
    return out


@td.tile_kernel
def assert_on_tile(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        assert td.min(x[t]) > -100.0  # <- here
        out[t] = x[t]
    return out


@pytest.mark.parametrize("kernel", [if_on_tile, while_on_tile, and_on_tiles, or_on_tiles,
                                    not_on_tile, chained_comparison, assert_on_tile],
                         ids=lambda k: k.name)
def test_control_flow_on_tile(kernel: td.TileKernel) -> None:
    err = trace_error(td.ControlFlowError, kernel, f32(8))
    assert "td.where" in msg(err)
    assert isinstance(err, td.TraceError)


@td.tile_kernel
def if_on_runtime_scalar(x, alpha):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        if alpha > 0:  # <- here
            out[t] = x[t]
        else:
            out[t] = -x[t]
    return out


def test_control_flow_on_runtime_scalar() -> None:
    err = trace_error(td.ControlFlowError, if_on_runtime_scalar, f32(8), 2.0)
    assert "td.where" in msg(err)


# ---- 6. a tile on the wrong dimension -----------------------------------------------------------
@td.tile_kernel
def tile_on_wrong_dim(a):  # a: (m, k) with m != k
    m, _k = a.shape
    out = td.empty((m,), dtype=a.dtype)
    for tm in td.tile(m):
        out[tm] = td.sum(a[tm, tm], axis=1)  # <- here
    return out


def test_tile_on_wrong_dimension() -> None:
    err = trace_error(td.ShapeError, tile_on_wrong_dim, f32(8, 5))
    text = msg(err)
    assert "'a'" in text and "dimension 1" in text and "'tm'" in text
    assert "covers 8" in text and "has 5" in text


@td.tile_kernel
def matmul_b_transposed(a, b):  # b indexed as b[tn, tk] although b is (k, n)
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=td.float32)
        for tk in td.tile(k):
            acc += a[tm, tk] @ b[tn, tk].T  # <- here
        out[tm, tn] = acc
    return out


def test_tile_on_wrong_dimension_swapped() -> None:
    err = trace_error(td.ShapeError, matmul_b_transposed, f32(8, 6), f32(6, 5))
    assert "'b'" in msg(err) and "dimension 0" in msg(err) and "'tn'" in msg(err)


@td.tile_kernel
def store_on_wrong_dim(a):
    m, k = a.shape
    out = td.empty((k,), dtype=a.dtype)
    for tm in td.tile(m):
        out[tm] = td.sum(a[tm, :], axis=1)  # <- here
    return out


def test_store_tile_on_wrong_dimension() -> None:
    err = trace_error(td.ShapeError, store_on_wrong_dim, f32(8, 5))
    assert "dimension 0" in msg(err) and "'tm'" in msg(err)


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
@pytest.mark.parametrize("shape", [(0,), (3, 0)])
def test_empty_argument(shape: tuple[int, ...]) -> None:
    err = arg_error(td.ArgumentError, add, np.zeros(shape, np.float32), np.zeros(shape, np.float32))
    assert "'x'" in msg(err) and "empty" in msg(err) and str(shape) in msg(err)


@td.tile_kernel
def tile_of_zero(x):
    m = x.shape[0]
    out = td.empty_like(x)
    for t in td.tile(m - m):  # <- here
        out[t] = x[t]
    return out


def test_tile_of_zero() -> None:
    err = trace_error(td.ShapeError, tile_of_zero, f32(8))
    assert "td.tile()" in msg(err) and "empty" in msg(err)


@td.tile_kernel
def grid_of_zero(x):
    b, _n = x.shape
    out = td.empty_like(x)
    for i in td.grid(b - b):  # <- here
        out[i, :] = x[i, :]
    return out


def test_grid_of_zero() -> None:
    err = trace_error(td.ShapeError, grid_of_zero, f32(3, 8))
    assert "td.grid()" in msg(err)


@td.tile_kernel
def empty_of_zero(x):
    n = x.shape[0]
    out = td.empty((n - n, n), dtype=x.dtype)  # <- here
    for t in td.tile(n):
        out[t, :] = x[t][:, None]
    return out


def test_empty_allocation_of_zero() -> None:
    err = trace_error(td.ShapeError, empty_of_zero, f32(8))
    assert "empty" in msg(err)


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


# ---- 9. other misuse ----------------------------------------------------------------------------
@pytest.mark.parametrize("name, marker, call", [
    ("td.tile", "# <- outside tile", lambda: td.tile(4)),  # <- outside tile
    ("td.grid", "# <- outside grid", lambda: td.grid(4)),  # <- outside grid
    ("td.empty", "# <- outside empty", lambda: td.empty((4,))),  # <- outside empty
], ids=["tile", "grid", "empty"])
def test_language_outside_kernel(name: str, marker: str, call: Callable[[], Any]) -> None:
    err = raised(td.TraceError, call)
    assert f"{name}()" in msg(err) and "@td.tile_kernel" in msg(err)
    assert err.kernel is None
    assert err.loc is not None and os.path.abspath(err.loc.file) == HERE
    assert err.loc.line == file_marker_line(marker)


OUTSIDE_NAMES_THE_CALL = [
    pytest.param("td.zeros", lambda: td.zeros((4,)), id="zeros"),
    pytest.param("td.full", lambda: td.full((4,), 1.0), id="full"),
    pytest.param("td.where", lambda: td.where(True, 1.0, 2.0), id="where"),
    pytest.param("td.exp", lambda: td.exp(1.0), id="exp"),
    pytest.param("td.sum", lambda: td.sum(1.0), id="sum"),
]


@pytest.mark.parametrize("name, call", OUTSIDE_NAMES_THE_CALL)
def test_language_outside_kernel_names_the_call(name: str, call: Callable[[], Any]) -> None:
    err = raised(td.TraceError, call)
    assert "@td.tile_kernel" in msg(err)
    assert f"{name}(" in msg(err), f"the message does not name {name}: {err}"


@td.tile_kernel
def empty_in_loop(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        _tmp = td.empty((4,), dtype=x.dtype)  # <- here
        out[t] = x[t]
    return out


def test_empty_inside_tile_loop() -> None:
    err = trace_error(td.TraceError, empty_in_loop, f32(8))
    assert "td.empty()" in msg(err) and err.hint and "td.zeros" in err.hint


@td.tile_kernel
def rebind_before_grid(x):
    total = 0.0
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):  # <- here
        total = total + td.sum(x[t])
        out[t] = x[t]
    return out


def test_rebind_outer_name_inside_grid() -> None:
    # The error points at the grid loop (the rewrite knows the names a loop rebinds, not where).
    err = trace_error(td.TraceError, rebind_before_grid, f32(8))
    assert "'total'" in msg(err) and "grid" in msg(err)


@td.tile_kernel
def carried_changes_dtype(a):
    m, k = a.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.float16)
        for tk in td.tile(k):  # <- here
            acc = acc + td.sum(a[tm, tk], axis=1)
        out[tm] = acc
    return out


def test_loop_carried_dtype_changes() -> None:
    err = trace_error(td.TraceError, carried_changes_dtype, f32(8, 6))
    assert "'acc'" in msg(err) and "float16" in msg(err) and "float32" in msg(err)
    assert err.hint and "astype" in err.hint


@td.tile_kernel
def carried_changes_shape(a):
    m, k = a.shape
    out = td.empty((m, k), dtype=td.float32)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.float32)
        for tk in td.tile(k):  # <- here
            acc = acc[:, None] + a[tm, tk]
        out[tm, :] = acc
    return out


def test_loop_carried_shape_changes() -> None:
    err = trace_error(td.TraceError, carried_changes_shape, f32(8, 6))
    assert "'acc'" in msg(err) and "(tm,)" in msg(err)


@td.tile_kernel
def break_in_tile_loop(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):  # <- here
        out[t] = x[t]
        break
    return out


@td.tile_kernel
def continue_in_inner_loop(a):
    m, k = a.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.float32)
        for tk in td.tile(k):  # <- here
            acc += td.sum(a[tm, tk], axis=1)
            continue
        out[tm] = acc
    return out


@td.tile_kernel
def return_in_tile_loop(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):  # <- here
        out[t] = x[t]
        return out
    return out


@td.tile_kernel
def else_on_tile_loop(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):  # <- here
        out[t] = x[t]
    else:  # noqa: PLW0120 - the point of the case
        pass
    return out


@pytest.mark.parametrize("kernel", [break_in_tile_loop, continue_in_inner_loop,
                                    return_in_tile_loop, else_on_tile_loop], ids=lambda k: k.name)
def test_escape_from_tile_loop(kernel: td.TileKernel) -> None:
    x = f32(8, 6) if kernel is continue_in_inner_loop else f32(8)
    err = trace_error(td.TraceError, kernel, x)
    assert "break, continue, return or an else clause" in msg(err)
    assert err.hint and "td.where" in err.hint


@td.tile_kernel
def load_outside_loop(x):
    out = td.empty_like(x)
    first = x[0]  # <- here
    for t in td.tile(x.shape[0]):
        out[t] = x[t] + first
    return out


def test_index_tensor_outside_tile_loop() -> None:
    err = trace_error(td.TraceError, load_outside_loop, f32(8))
    assert "'x'" in msg(err) and "inside a td.tile/td.grid loop" in msg(err)


@td.tile_kernel
def store_outside_loop(x):
    out = td.empty_like(x)
    out[0] = 1.0  # <- here
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
    return out


def test_store_tensor_outside_tile_loop() -> None:
    err = trace_error(td.TraceError, store_outside_loop, f32(8))
    assert "inside a td.tile/td.grid loop" in msg(err)


@td.tile_kernel
def return_tile_value(x, alpha):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
    return alpha * 2.0  # <- here


def test_return_tile_value() -> None:
    err = trace_error(td.TraceError, return_tile_value, f32(8), 3.0)
    assert "returns a tile value" in msg(err)


def test_return_tile_value_class_and_name() -> None:
    err = raised(td.TraceError, return_tile_value, f32(8), 3.0)
    check_named(err, return_tile_value)
    assert "returns a tile value" in msg(err) and err.hint and "td.empty" in err.hint


@td.tile_kernel
def return_int(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
    return x.shape[0]  # <- here


def test_return_not_a_tensor() -> None:
    err = trace_error(td.TraceError, return_int, f32(8))
    assert "returns a int" in msg(err) or "returns an int" in msg(err)


@td.tile_kernel
def add_unindexed(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x + 1.0  # <- here
    return out


@td.tile_kernel
def matmul_unindexed(a, b):
    m, _ = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = a @ b  # <- here
    return out


@td.tile_kernel
def exp_unindexed(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.exp(x)  # <- here
    return out


@td.tile_kernel
def neg_unindexed(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = -x  # <- here
    return out


@td.tile_kernel
def mixed_unindexed(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * x  # <- here
    return out


@td.tile_kernel
def pow_unindexed(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x ** 2  # <- here
    return out


@td.tile_kernel
def compare_unindexed(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.where(x > 0, x[t], 0.0)  # <- here
    return out


@td.tile_kernel
def eq_unindexed(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.where(x == 0, 0.0, x[t])  # <- here
    return out


UNINDEXED = [
    pytest.param(add_unindexed, id="add"),
    pytest.param(matmul_unindexed, id="matmul"),
    pytest.param(exp_unindexed, id="exp"),
    pytest.param(neg_unindexed, id="neg"),
    pytest.param(mixed_unindexed, id="tile*tensor"),
    pytest.param(pow_unindexed, id="pow"),
    pytest.param(compare_unindexed, id="compare"),
    pytest.param(eq_unindexed, id="eq"),
]


@pytest.mark.parametrize("kernel", UNINDEXED)
def test_arithmetic_on_unindexed_tensor(kernel: td.TileKernel) -> None:
    args = (f32(8, 6), f32(6, 5)) if kernel is matmul_unindexed else (f32(8),)
    err = trace_error(td.TraceError, kernel, *args)
    assert "must be indexed" in msg(err) and err.hint and "[" in err.hint


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
    err = trace_error(td.TraceError, range_of_scalar, f32(8), 3)
    assert "Python int" in msg(err)


@td.tile_kernel
def int_of_scalar(x, alpha):
    n = int(alpha)  # <- here
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * n
    return out


def test_int_of_runtime_scalar() -> None:
    err = trace_error(td.TraceError, int_of_scalar, f32(8), 3)
    assert "Python int" in msg(err)


@td.tile_kernel
def tile_of_scalar(x, n):
    out = td.empty_like(x)
    for t in td.tile(n):  # <- here
        out[t] = x[t]
    return out


def test_tile_over_runtime_scalar() -> None:
    err = trace_error(td.TraceError, tile_of_scalar, f32(8), 8)
    assert "td.tile()" in msg(err) and "runtime value" in msg(err)


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
    err = trace_error(td.TraceError, partial_slice, f32(8))
    assert "`:`" in msg(err)


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
    assert err.loc.line in (file_marker_line("def var_args(*xs):  # <- here") - 1,
                            file_marker_line("def var_args(*xs):  # <- here"))


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


def test_error_hierarchy() -> None:
    """The classes the cases above rely on, and the builtin bases users may catch."""
    for cls in (td.ShapeError, td.DTypeError, td.ControlFlowError):
        assert issubclass(cls, td.TraceError)
    for cls in (td.TraceError, td.ArgumentError, td.ConfigError, td.IRError, td.BackendError):
        assert issubclass(cls, td.TileDSLError)
    assert issubclass(td.ShapeError, ValueError) and issubclass(td.DTypeError, TypeError)
    assert issubclass(td.ArgumentError, TypeError) and issubclass(td.ConfigError, ValueError)
