"""Errors for misusing the language: Python control flow on tile values, tiles on the wrong
dimension, language calls outside kernels, values escaping their loops, bad returns (see
error_checks.py for what every case asserts)."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tiledsl as td
from error_checks import check_named, f32, file_marker_line, marker_line, msg, raised, trace_error

HERE = os.path.abspath(__file__)


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
def while_with_break(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        v = x[t]
        while td.sum(v) > 0:  # <- here
            v = v - 1.0
            if td.max(v) < 0:
                break
        out[t] = v
    return out


@td.tile_kernel
def chained_comparison(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        mask = 0.0 < x[t] < 1.0  # <- here
        out[t] = td.where(mask, x[t], 0.0)
    return out


# (`and`, `or` and `not` of bool tiles are Triton's elementwise logical ops:
# tests/lang/test_control_flow.py; `assert` on a tile is a device assertion:
# tests/lang/test_device_assert.py)
@pytest.mark.parametrize("kernel", [if_on_tile, chained_comparison], ids=lambda k: k.name)
def test_control_flow_on_tile(kernel: td.TileKernel) -> None:
    err = trace_error(td.ControlFlowError, kernel, f32(8))
    assert "td.where" in msg(err)
    assert isinstance(err, td.TraceError)


def test_a_while_with_break_on_a_runtime_value_is_refused() -> None:
    """A `while` op runs until its condition fails; a `break` is said at the `while` line
    with the flag to carry instead (tests/lang/test_while.py runs the supported forms)."""
    err = trace_error(td.ControlFlowError, while_with_break, f32(8))
    assert "cannot contain `break` or `return`" in msg(err)
    assert "carry a flag" in err.hint


@td.tile_kernel
def if_on_runtime_scalar(x, alpha):
    out = td.empty_like(x)
    if alpha > 0:  # <- here
        for t in td.tile(x.shape[0]):
            out[t] = x[t]
    return out


def test_control_flow_on_a_host_scalar_says_where_the_if_goes() -> None:
    """An `if` on a runtime scalar argument (a NumPy scalar: a Python int or float is traced
    as a constant instead, tests/frontend/test_static_args.py) outside the tile loops: each
    program must decide inside the grid; the hint says so and does not send the user to
    td.where (an `if` on a scalar inside the loops skips work: tests/lang/test_control_flow.py)."""
    err = trace_error(td.ControlFlowError, if_on_runtime_scalar, f32(8), np.float32(2.0))
    assert "outside the tile loops" in msg(err) and "inside the grid loop" in msg(err)
    assert "td.where" not in msg(err)


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


@td.tile_kernel
def helion_tile_from_zero(x, lens):  # Helion: hl.tile(0, end) with a loaded end
    m, n = x.shape
    out = td.zeros((m, n), dtype=x.dtype)
    for i in td.grid(m):
        for t in td.tile(0, lens[i]):
            out[i, t] = x[i, t]
    return out


def test_helion_tile_from_zero_is_a_loop_to_its_end() -> None:
    """A size of 0 is no 2-D tile: `td.tile(0, end)` is Helion's `hl.tile(0, end)`."""
    x, lens = f32(3, 10), np.array([0, 4, 10])
    want = np.where(np.arange(10)[None] < lens[:, None], x, 0)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(helion_tile_from_zero.run(x, lens, backend=backend), want)


@td.tile_kernel
def helion_tile_from_loaded(x, lens):  # Helion: hl.tile(begin, end) with a loaded begin
    m, n = x.shape
    out = td.zeros((m, n), dtype=x.dtype)
    for i in td.grid(m):
        for t in td.tile(lens[i], n):  # one loop variable: from begin to end
            out[i, t] = x[i, t]
    return out


@td.tile_kernel
def tile_2d_from_loaded(x, lens):
    m, n = x.shape
    out = td.zeros((m, n), dtype=x.dtype)
    for i in td.grid(m):
        for ta, tb in td.tile(lens[i], n):  # two loop variables: a 2-D tile
            out[i, tb] += ta.size * 1.0  # the rows' tiles' sizes add up to lens[i]
    return out


def test_helion_tile_from_a_loaded_begin_is_a_loop_to_its_end() -> None:
    """`for t in td.tile(begin, end)` with a runtime begin is Helion's `hl.tile(begin, end)`
    (jagged_hstu_attn_2, jagged_dense_add); a target of two names keeps the 2-D tile."""
    x, lens = f32(3, 10), np.array([0, 4, 10])
    want = np.where(np.arange(10)[None] >= lens[:, None], x, 0)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(helion_tile_from_loaded.run(x, lens, backend=backend), want)
        np.testing.assert_array_equal(tile_2d_from_loaded.run(x, lens, backend=backend),
                                      np.broadcast_to(lens[:, None], x.shape))


@td.tile_kernel
def helion_tile_static(x):  # Helion: hl.tile(2, n); a valid 2-D tile until indexed
    m, n = x.shape
    out = td.zeros((m, n), dtype=x.dtype)
    for i in td.grid(m):
        for t in td.tile(2, n):
            out[i, t] = x[i, t]  # <- here
    return out


def test_helion_tile_static_begin_end_says_start_and_stop() -> None:
    """`td.tile(2, n)` is a 2-D tile: written as Helion's `hl.tile(begin, end)`, the error
    gives tiledsl's spelling of a loop from begin to end."""
    err = trace_error(td.TraceError, helion_tile_static, f32(3, 10))
    assert "td.tile(a, b) is a 2-D tile" in msg(err)
    assert "hl.tile(begin, end) is td.tile(n, start=begin, stop=end)" in msg(err)
    assert "2147483647" not in msg(err)  # a runtime size is named as one


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
    assert err.loc.line == file_marker_line(marker, __file__)


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
    for t in td.tile(x.shape[0]):
        total = total + td.sum(x[t])  # <- here
    for t in td.tile(x.shape[0]):
        out[t] = x[t] / total         # reads what no program can hand out
    return out


def test_rebind_outer_name_inside_grid() -> None:
    # Read after the loop: the error points at the line that rebinds it (liveness.py). (Not
    # read after it, the name is each program's local: test_control_flow.py.)
    err = trace_error(td.TraceError, rebind_before_grid, f32(8))
    assert "'total'" in msg(err) and "grid" in msg(err) and "read after" in msg(err)


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


@td.tile_kernel
def carried_becomes_float64(x):  # a NumPy float64 is typed (a Python float would be weak)
    m, n = x.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        mx = td.full((tm,), -float("inf"), dtype=td.float32)
        for tn in td.tile(n):  # <- here
            s = x[tm, tn] + td.where(tn.index[None, :] <= tm.index[:, None], 0, np.float64(-1e6))
            mx = td.maximum(mx, td.max(s, 1))
        out[tm] = mx
    return out


def test_a_loop_carried_dtype_change_names_where_it_happens() -> None:
    err = trace_error(td.TraceError, carried_becomes_float64, f32(8, 6))
    line = marker_line(carried_becomes_float64) + 1
    assert f"float64(tm,) after an iteration (it becomes float64 at line {line})" in msg(err)


def test_loop_carried_shape_changes() -> None:
    err = trace_error(td.TraceError, carried_changes_shape, f32(8, 6))
    assert "'acc'" in msg(err) and "(tm,)" in msg(err)


@td.tile_kernel
def break_in_tile_loop(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
        break  # <- here
    return out


@td.tile_kernel
def return_in_tile_loop(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
        return out  # <- here
    return out


@td.tile_kernel
def else_on_tile_loop(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):  # <- here
        out[t] = x[t]
    else:  # noqa: PLW0120 - the point of the case
        pass
    return out


@pytest.mark.parametrize("kernel, words", [
    (break_in_tile_loop, "a td.tile() loop cannot `break`"),
    (return_in_tile_loop, "this `return` cannot leave the td.tile() loop of line"),
    (else_on_tile_loop, "a td.tile() loop cannot have an else clause"),
], ids=lambda k: getattr(k, "name", ""))
def test_escape_from_tile_loop(kernel: td.TileKernel, words: str) -> None:
    """The error names the line of the break/return (an else clause: the loop's). A bare
    `return` or a `continue` reached through `if`s is folded instead (tests/lang/
    test_early_exits.py)."""
    err = trace_error(td.TraceError, kernel, f32(8))
    assert words in msg(err) and err.hint
    assert "<- here" in err.loc.source_line()


@td.tile_kernel
def load_outside_loop(x):
    out = td.empty_like(x)
    first = x[0]
    for t in td.tile(x.shape[0]):
        out[t] = x[t] + first  # <- here
    return out


def test_index_tensor_outside_tile_loop() -> None:
    """`x[0]` in host code is a view (a tensor), so computing with it is the error, and it
    says where the view was made."""
    err = trace_error(td.TraceError, load_outside_loop, f32(8))
    assert "'x[0]'" in msg(err) and "indexed in host code at line" in msg(err)
    assert "inside a td.tile/td.grid loop" in err.hint


@td.tile_kernel
def return_tile_value(x, alpha):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
    return alpha * 2.0  # <- here


def test_return_tile_value() -> None:
    err = trace_error(td.TraceError, return_tile_value, f32(8), 3.0)
    assert "returns a runtime scalar" in msg(err)


def test_return_tile_value_class_and_name() -> None:
    err = raised(td.TraceError, return_tile_value, f32(8), 3.0)
    check_named(err, return_tile_value)
    assert "returns a runtime scalar" in msg(err) and err.hint and "td.empty" in err.hint


@td.tile_kernel
def return_int(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
    return x.shape[0]  # <- here


GROUP = 4


@td.tile_kernel
def shadows_a_global(x):
    """Unsloth's rope merged with its wrapper: the body's `GROUP = 4` makes the global local."""
    n_groups = td.cdiv(x.shape[0], GROUP)  # noqa: F823  # <- here
    out = td.empty((n_groups,), dtype=x.dtype)
    for pid in td.grid(n_groups):
        GROUP = 4
        offs = pid * GROUP + td.arange(0, 4)
        td.store(out + pid, td.sum(td.load(x + offs, mask=offs < x.shape[0], other=0)))
    return out


def test_a_global_the_kernel_also_binds_is_named() -> None:
    err = trace_error(td.TraceError, shadows_a_global, f32(10))
    assert "UnboundLocalError" in msg(err) and "'GROUP' is a global" in err.hint


def test_return_not_a_tensor() -> None:
    err = trace_error(td.TraceError, return_int, f32(8))
    assert "returns a int" in msg(err) or "returns an int" in msg(err)


@td.tile_kernel
def return_unwritten(x):
    out = td.empty_like(x)  # <- never written
    scratch = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        scratch[t] = x[t] * 2.0
    return scratch, out  # <- here


def test_return_an_output_no_store_writes() -> None:
    """It would hold NaN on the NumPy backend and garbage on a GPU, with no error."""
    err = trace_error(td.TraceError, return_unwritten, f32(8))
    line = file_marker_line("# <- never written", HERE)
    assert f"returns 'out' (td.empty at line {line}), which no store writes" in msg(err)
    assert err.hint and "td.zeros" in err.hint


@td.tile_kernel
def doubled_through_a_view(x):
    out = td.empty_like(x)
    flat, x_flat = out.view(-1), x.view(-1)
    for t in td.tile(x.size):
        flat[t] = x_flat[t] * 2.0
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_stores_through_a_view_write_the_returned_tensor(backend: str) -> None:
    """Helion's geglu and swiglu store into `out.view(-1)` and return `out` (refused as never
    written before: the check compared the store's operand, the view, with `out`)."""
    if backend == "triton-interpret":
        pytest.importorskip("torch")
    x = f32(3, 5)
    np.testing.assert_array_equal(doubled_through_a_view.run(x, backend=backend), x * 2.0)


@td.tile_kernel
def first_row_only(x):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)  # <- partly written
    for tn in td.tile(n):
        out[0, tn] = x[0, tn]
    return out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_output_elements_no_store_writes_are_an_error(dtype: str) -> None:
    """The stores write row 0 only: the rest would be garbage on a GPU. The NumPy backend
    fills td.empty with a NaN no arithmetic makes and finds what is left of it (and so do the
    spatial backend, which executes on NumPy, and Triton's interpreter, given such outputs)."""
    x = f32(3, 5).astype(getattr(td, dtype).np)
    err = raised(td.ShapeError, first_row_only, x)
    check_named(err, first_row_only)
    for backend in ("spatial", "triton-interpret"):
        if backend == "triton-interpret":
            pytest.importorskip("torch")
        other = raised(td.ShapeError, first_row_only.run, x, backend=backend)
        assert "no store writes 10 of its 15 elements" in msg(other)
    assert err.loc is not None and err.loc.line == file_marker_line("# <- partly written", HERE)
    assert f"output 0 ({dtype}[3, 5]): no store writes 10 of its 15 elements under " \
        "Config(block_sizes=(" in msg(err) and "the first at index (1, 0)" in msg(err)


@td.tile_kernel
def first_row_viewed(x):
    m, n = x.shape
    out = td.empty((m, n, 1), dtype=x.dtype)  # <- partly written, returned through a view
    for tn in td.tile(n):
        out[0, tn, 0] = x[0, tn]
    return out.squeeze(-1)


def test_output_elements_no_store_writes_are_an_error_through_a_view_too() -> None:
    err = raised(td.ShapeError, first_row_viewed, f32(3, 5))
    assert "no store writes 10 of its 15 elements" in msg(err)
    assert err.loc is not None and err.loc.line == file_marker_line(
        "# <- partly written, returned through a view", HERE)


@td.tile_kernel
def log_shifted(x):
    out = td.empty(x.shape, dtype=x.dtype)
    for t in td.tile(x.shape[0]):
        out[t] = td.abs(td.log(x[t] - 10.0))  # NaN, positive: as a NaN constant is
    return out


def test_computed_nans_are_not_taken_for_unwritten_elements() -> None:
    for dtype in (np.float16, np.float32, np.float64):
        out = log_shifted(f32(11).astype(dtype))
        assert np.isnan(out).all()


@td.tile_kernel
def return_filled_and_argument(x):
    out = td.zeros(x.shape, dtype=x.dtype)
    for t in td.tile(x.shape[0]):
        x[t] = x[t] * 2.0
    return out, x


def test_an_initialised_or_argument_output_needs_no_store() -> None:
    x = f32(9)
    zeros, doubled = return_filled_and_argument(x.copy())
    assert np.all(zeros == 0) and np.allclose(doubled, 2 * x)


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


@td.tile_kernel
def wrap_in_host_code(idx, x):
    """Helion's gather_gemv wraps negative indices with torch in its host code: grids."""
    wrapped = td.where(idx < 0, idx + x.shape[0], idx)
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[wrapped[t]]
    return out


@td.tile_kernel
def bits_in_host_code(a, b):  # (no host math for bits; `a @ b` and `a ** b` are)
    return a & b  # <- here


def test_whole_tensor_math_in_host_code() -> None:
    idx = np.array([0, -1, 3, -8, 2, 5, -3, 7], np.int64)
    x = np.arange(8, dtype=np.float32) * 1.5
    np.testing.assert_array_equal(wrap_in_host_code(idx, x), x[idx])
    ints = np.arange(16, dtype=np.int32).reshape(4, 4)
    err = trace_error(td.TraceError, bits_in_host_code, ints, ints)
    assert "in host code a tensor is memory, not a value" in msg(err)
    assert "inside the tile loop" in err.hint


@td.tile_kernel
def pointer_bump(X_ptr, n_cols: td.constexpr):
    out = td.empty((X_ptr.shape[0],), td.float32)
    for row in td.grid(X_ptr.shape[0]):
        X_ptr += row * n_cols
        out[row] = td.sum(td.load(X_ptr, td.arange(0, n_cols)))  # <- here
    return out


def test_a_pointer_given_an_index_says_it_holds_its_offsets() -> None:
    """Liger's `X_ptr += row * X_row_stride` is a pointer (tests/lang/test_pointers.py); a
    port that then indexes it as a tensor, or gives a store through a tile-bumped pointer
    (FlagGems' isin, `out_ptr += rows`) an index, is told the pointer holds its offsets."""
    for kernel, args in ((pointer_bump, (f32(3, 4), 4)), (tile_bump, (f32(37),))):
        err = trace_error(td.TraceError, kernel, *args)
        assert "takes a bool mask where" in msg(err) and "holds its offsets" in msg(err)
        assert "x + offsets" in err.hint


@td.tile_kernel
def tile_bump(x):
    out = td.zeros_like(x)
    for pid in td.grid(3):
        rows = pid * 16 + td.arange(0, 16)
        out_ptr = out
        out_ptr += rows
        td.store(out_ptr, [0], td.load(x, [rows], mask=rows < 37), mask=rows < 37)  # <- here
    return out


@td.tile_kernel
def optional_weight(x, w, host_test: bool = False):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * (2.0 if w else 1.0)
    if host_test and w:  # <- here
        pass
    return out


def test_a_tensor_s_truth_asks_whether_it_was_passed_inside_the_grid() -> None:
    """Triton's `if weight_ptr:` (FlagGems' batch_norm) asks whether an argument was given;
    in host code, where torch would read the elements, it is an error saying what to write."""
    x = np.random.default_rng(1).standard_normal(37).astype(np.float32)
    np.testing.assert_array_equal(optional_weight(x, None), x)
    np.testing.assert_array_equal(optional_weight(x, x), 2 * x)
    err = trace_error(td.TraceError, optional_weight, f32(8), f32(8), True)
    assert "tensor 'w' has no truth value in host code" in msg(err)
    assert "`if w is not None:`" in err.hint


@td.tile_kernel
def flat_offsets(X, store: td.constexpr):
    for r in td.grid(X.shape[0]):
        cols = td.arange(0, 16)
        if store:
            td.store(X, r * X.shape[1] + cols, td.zeros((16,)), mask=cols < X.shape[1])  # <- st
        else:
            td.load(X, r * X.shape[1] + cols, mask=cols < X.shape[1])  # <- ld


@pytest.mark.parametrize("store", [True, False])
def test_a_flat_offset_into_a_2d_tensor_says_to_view_it_flat(store: bool) -> None:
    """Liger's `X_ptr + row * stride + cols` ported onto the 2-D X: one index takes rows."""
    err = trace_error(td.ShapeError, flat_offsets, f32(3, 10), store,
                      marker="# <- st" if store else "# <- ld")
    assert "a Triton pointer offset is flat: index X.view(-1) with it" in err.hint


@pytest.mark.parametrize("kernel", UNINDEXED)
def test_arithmetic_on_unindexed_tensor(kernel: td.TileKernel) -> None:
    args = (f32(8, 6), f32(6, 5)) if kernel is matmul_unindexed else (f32(8),)
    err = trace_error(td.TraceError, kernel, *args)
    assert "must be indexed" in msg(err) and err.hint and "[" in err.hint


@td.tile_kernel
def loop_in_a_comprehension(x):
    out = td.empty_like(x)
    _ = [out.__setitem__(t, x[t]) for t in td.tile(x.shape[0])]  # <- here
    return out


def test_a_tile_loop_in_a_comprehension_says_where_loops_go() -> None:
    """(A `for` statement in a helper the kernel calls is rewritten: tests/lang/test_helpers.py.)"""
    err = trace_error(td.TraceError, loop_in_a_comprehension, f32(10))
    assert "of the kernel or of a function it calls" in msg(err)
    assert "a comprehension" in err.hint and "<- here" in err.loc.source_line()


# ---- statements a tile kernel cannot hold -------------------------------------------------------
LAST = None


@td.tile_kernel
def global_in_loop(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        global LAST  # <- here
        LAST = t
        out[t] = x[t]
    return out


@td.tile_kernel
def generator_kernel(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
    yield out  # <- here


@td.tile_kernel
def calls_itself(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
    return calls_itself(out)  # <- here


@td.tile_kernel
def doubled(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * 2
    return out


@td.tile_kernel
def calls_a_kernel_s_function(x):
    """vLLM's wrappers call each other: a kernel's `.fn` is its body, traced here."""
    return doubled.fn(doubled.fn(x))


def test_a_kernel_s_function_is_a_helper() -> None:
    x = np.random.default_rng(3).standard_normal(37).astype(np.float32)
    np.testing.assert_array_equal(calls_a_kernel_s_function(x), 4 * x)
    assert "calls_itself.fn(...)" in trace_error(td.TraceError, calls_itself, f32(8)).hint


@td.tile_kernel
def hashes_a_tile(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * hash(x[t])  # <- here
    return out


@pytest.mark.parametrize("kernel, words", [
    (global_in_loop, "cannot be used inside a tile loop"),
    (generator_kernel, "is a generator (it has `yield`)"),
    (calls_itself, "kernel 'calls_itself' calls kernel 'calls_itself'"),
    (hashes_a_tile, "a tile value cannot be hashed"),
], ids=["global", "yield", "self-call-in-host-code", "hash"])
def test_statements_a_kernel_cannot_hold(kernel: td.TileKernel, words: str) -> None:
    err = trace_error(td.TraceError, kernel, f32(8))
    assert words in msg(err), msg(err)


@td.tile_kernel
def widen_float32(x):
    acc = td.float64 if x.dtype == np.float32 else td.float32
    same = x.dtype == "float32" and x.dtype == np.dtype("float32") and x.dtype != np.float16
    out = td.empty((x.shape[0],), dtype=acc if same else td.bfloat16)
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
    return out


def test_a_dtype_equals_its_numpy_dtype_in_host_code() -> None:
    assert widen_float32(f32(5)).dtype == np.float64
    assert widen_float32(f32(5).astype(np.float16)).dtype == td.bfloat16.np
    assert td.float32 == np.float32 and td.bfloat16 == "bfloat16" and td.int64 != np.int32
    assert td.float64 != None and td.int32 != 1  # noqa: E711 - no dtype of None or of a number
    assert len({td.float32, td.float32, td.int8}) == 2


# ---- Triton's functions, and a shape entry that is none -----------------------------------------
try:
    from triton.language.extra import libdevice
except ImportError:  # the test skips
    libdevice = None


@td.tile_kernel
def stores_libdevice(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = libdevice.asinh(x[t])  # <- here
    return out


@td.tile_kernel
def computes_with_libdevice(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        v = libdevice.asinh(x[t])  # <- here
        out[t] = v + 1.0
    return out


@td.tile_kernel
def branches_on_libdevice(x):
    out = td.zeros(x.shape, dtype=x.dtype)
    for t in td.tile(x.shape[0]):
        if libdevice.isnan(x[t]):  # <- here
            out[t] = x[t]
    return out


def test_a_triton_function_in_a_kernel_is_named_with_the_td_functions() -> None:
    """A libdevice stub returns None while the kernel traces: the error names the call (where
    the None is stored, or lines later where it is used) and names tiledsl's function of that
    name (or lists its math). In an `if` the None took the else branch with no error (a kernel
    of zeros)."""
    pytest.importorskip("triton")
    assert "libdevice.isnan is a Triton function" in msg(
        trace_error(td.TraceError, branches_on_libdevice, f32(9)))
    for kernel in (stores_libdevice, computes_with_libdevice):
        err = trace_error(td.TraceError, kernel, f32(9))
        assert "libdevice.asinh is a Triton function" in msg(err), msg(err)
        assert "write td.asinh(...)" in msg(err), msg(err)  # tiledsl has it: named
    from tiledsl.frontend.foreign_calls import MATH
    assert all(callable(getattr(td, name, None)) for name in MATH)


@td.tile_kernel
def zeros_of_a_float(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] + td.zeros((t, 2.5))[:, 0]  # <- here
    return out


def test_a_bad_tile_shape_entry_names_the_function_called() -> None:
    err = trace_error(td.ShapeError, zeros_of_a_float, f32(9))
    assert msg(err).startswith("td.zeros: shape entries must be tiles, a tile value's .shape"), \
        msg(err)


@td.tile_kernel
def int32_count(x):
    out = td.empty((1,), dtype=td.int32)
    for p in td.grid(1):
        acc = td.zeros((), dtype=td.int32)
        for t in td.tile(x.shape[0]):  # <- here
            acc += td.sum(x[t], axis=0)
        out[p] = acc
    return out


def test_a_carried_int32_widened_by_a_sum_says_why() -> None:
    """FlagGems' masked_select carries `tl.sum` of int32 in int32; td.sum gives int64."""
    err = trace_error(td.TraceError, int32_count, np.ones(37, np.int32))
    assert "loop-carried 'acc' is int32() before the loop but int64()" in msg(err)
    assert "td.sum of a narrower int or bool is int64" in err.hint


@td.tile_kernel
def refuses_wide_rows(x):
    if x.shape[-1] > 4:
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")  # <- here
    if x.shape[-1] == 3:
        return x.reshape(7)  # (a ShapeError of tiledsl's, not raised by the kernel's code)
    return x + 1


def test_an_exception_the_kernel_raises_is_also_of_its_own_type() -> None:
    """TritonBench's rmsnorm wrapper raises a RuntimeError its test catches: the TraceError is
    one too (and names the line); what tiledsl itself raises keeps its own class."""
    with pytest.raises(RuntimeError) as info:
        refuses_wide_rows(f32(2, 8))
    err = info.value
    assert isinstance(err, td.TraceError) and "RuntimeError: This layer norm" in msg(err)
    assert err.loc is not None and err.loc.line == marker_line(refuses_wide_rows)
    again = pickle.loads(pickle.dumps(err))  # (as an autotuning worker sends it back)
    assert isinstance(again, RuntimeError) and str(again) == str(err)
    with pytest.raises(td.ShapeError) as shape:
        refuses_wide_rows(f32(2, 3))
    assert type(shape.value) is td.ShapeError
