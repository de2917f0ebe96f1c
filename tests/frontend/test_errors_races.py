"""Errors for what would otherwise be a race or a silent wrong answer: a store that leaves out a
grid dimension (every program along it writes the same elements), arguments that share memory
with one written in place, fill values an integer dtype cannot hold, int arguments past int64,
and architectures that are not one (see error_checks.py for what every case asserts)."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from error_checks import add, arg_error, f32, marker_line, msg, scale, trace_error
from support import gpu_backend, on_cuda, under_configs
from tiledsl.interop.arrays import share_memory
from tiledsl.testing import assert_close

BACKENDS = ["numpy", "spatial", "triton-interpret"]


# ---- a store that leaves out a grid dimension -------------------------------------------------
@td.tile_kernel
def row_sum_race(x):
    m, n = x.shape
    out = td.empty((m,), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        out[tm] = x[tm, tn].sum(axis=1)  # <- here
    return out


@td.tile_kernel
def race_in_inner_loop(a):
    m, k = a.shape
    out = td.empty((m, k), dtype=a.dtype)
    for tm, tn in td.tile(m, 7):
        for tk in td.tile(k):
            out[tm, tk] = a[tm, tk] + tn.begin  # <- here
    return out


@td.tile_kernel
def race_on_grid_index(x):
    out = td.empty((1,), dtype=x.dtype)
    for i in td.grid(x.shape[0]):
        out[0] = x[i]  # <- here
    return out


@pytest.mark.parametrize("kernel, args, axis", [
    (row_sum_race, (f32(13, 11),), "tn"),
    (race_in_inner_loop, (f32(9, 10),), "tn"),
    (race_on_grid_index, (f32(5),), "i"),
], ids=["row-sum", "inner-loop", "grid-index"])
def test_a_store_that_leaves_out_a_grid_dimension_is_an_error(kernel: td.TileKernel,
                                                               args: tuple, axis: str) -> None:
    err = trace_error(td.TraceError, kernel, *args)
    assert f"does not use grid dimension '{axis}'" in msg(err), msg(err)
    assert "store to 'out'" in msg(err)  # the variable td.empty's tensor is assigned to
    assert "nested (sequential) loop" in msg(err)
    for backend in BACKENDS:  # traced before any backend: each rejects it the same way
        with pytest.raises(td.TraceError, match=f"does not use grid dimension '{axis}'"):
            kernel.run(*args, backend=backend)


@td.tile_kernel
def copy_and_rows(x, y):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    rows = td.empty((m,), dtype=y.dtype)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = x[tm, tn] * 2.0
        rows[tm] = y[tm] + 1.0  # the same values from every program along tn: no race
    return out, rows


@td.tile_kernel
def one_program_along_tn(x):
    m, n = x.shape
    out = td.empty((m,), dtype=x.dtype)
    for tm, tn in td.tile(m, n, block_size=(None, 16)):
        out[tm] = x[tm, tn].sum(axis=1)  # n <= 16: one program along tn under every config
    return out


def test_stores_that_cannot_race_are_accepted() -> None:
    x, y = f32(13, 11), f32(13)
    space = copy_and_rows.config_space(x, y)
    for config in [space.default(), *space.sample(3, seed=1)]:
        for backend in BACKENDS:
            out, rows = copy_and_rows.run(x, y, backend=backend, config=config)
            np.testing.assert_allclose(out, x.astype(np.float64) * 2, rtol=1e-6)
            np.testing.assert_allclose(rows, y.astype(np.float64) + 1, rtol=1e-6)
    for backend in BACKENDS:
        got = one_program_along_tn.run(x, backend=backend)
        np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


# ---- reads of what another program writes, and computed store indices -----------------------
@td.tile_kernel
def shift_rows_in_place(x):
    m, n = x.shape
    for i in td.grid(m - 1):
        for tn in td.tile(n):
            row = x[i, tn]  # <- there
            x[i + 1, tn] = row  # <- here


@td.tile_kernel
def subtract_first_column(x):
    for tn in td.tile(x.shape[1]):
        first = x[:, :1]  # <- there
        x[:, tn] = x[:, tn] - first  # <- here


@td.tile_kernel
def gather_after_write(x, idx):
    for t in td.tile(x.shape[0]):
        x[t] = x[t] * 2.0  # <- there
        x[t] = x[idx[t]] + 1.0  # <- here


@td.tile_kernel
def persistent_shift(x):
    for p in td.grid(3):
        for t in td.tile(x.shape[0])[p::3]:
            prev = x[t - 1]  # <- there
            x[t] = prev  # <- here


@td.tile_kernel
def shift_under_if(x, flags):
    for t in td.tile(x.shape[0], block_size=1):
        if flags[t.begin] != 0:
            v = x[t]  # <- there
            x[t + 1] = v  # <- here


@td.tile_kernel
def read_through_a_view(x):
    flat = x.flatten()
    for tm in td.tile(x.shape[0]):
        first = flat[:5]  # <- there
        x[tm, :] = x[tm, :] - first[None, :]  # <- here


@td.tile_kernel
def read_next_row_by_begin(x, y):
    m = x.shape[0]
    out = td.empty((m,), dtype=x.dtype)
    for tr in td.tile(m, block_size=1):
        out[tr] = x[(tr.begin + 1) % m, y[tr.begin]]  # <- there
        for i in td.tile(x.shape[1]):
            x[tr, i] = td.zeros((tr, i), dtype=x.dtype)  # <- here
    return out


@pytest.mark.parametrize("kernel, args", [
    (read_next_row_by_begin, (f32(7, 5), np.zeros(7, np.int32))),
    (shift_rows_in_place, (f32(7, 5),)),
    (read_through_a_view, (f32(7, 5),)),
    (subtract_first_column, (f32(7, 5),)),
    (gather_after_write, (f32(9), np.arange(9, dtype=np.int32)[::-1].copy())),
    (persistent_shift, (f32(9),)),
    (shift_under_if, (f32(9), np.ones(9, np.int32))),
], ids=["begin-plus-one", "grid-shift", "view", "first-column", "gather", "persistent",
        "under-if"])
def test_a_load_of_what_another_program_writes_is_an_error(kernel: td.TileKernel,
                                                           args: tuple) -> None:
    """A grid's programs run in any order: the old or the new value would be read (numpy gave
    one answer and triton-interpret and spatial another, issue 29)."""
    err = trace_error(td.TraceError, kernel, *args)
    other = marker_line(kernel, "# <- there")
    assert f"at line {other} " in msg(err), msg(err)
    assert "in another program of the grid" in msg(err)
    assert "two grids" in msg(err) and "atomic" in msg(err)


@td.tile_kernel
def store_through_two_views(x):
    flat = x.flatten()
    m, n = x.shape
    for tm, tn in td.tile(m, n):
        x[tm, tn] = x[tm, tn] * 2.0
        flat[tm.index[:, None] * n + tn.index[None, :]] = x[tm, tn]  # <- here


def test_stores_through_two_views_of_one_tensor_are_an_error() -> None:
    err = trace_error(td.TraceError, store_through_two_views, f32(7, 5))
    assert "may write elements that the store at line" in msg(err), msg(err)


@td.tile_kernel
def pair_sums(x):
    (n,) = x.shape
    s = td.zeros((td.cdiv(n, 8),), dtype=x.dtype)
    for t in td.tile(n, block_size=4):
        s[t.begin // 8] = td.sum(x[t])  # <- here


@td.tile_kernel
def diagonal_sums(x):
    m, n = x.shape
    s = td.zeros((m + n,), dtype=x.dtype)
    for i, j in td.grid(m, n):
        s[i + j] = x[i, j]  # <- here


@pytest.mark.parametrize("kernel", [pair_sums, diagonal_sums], ids=["floordiv", "sum"])
def test_a_store_index_two_programs_may_compute_alike_is_an_error(kernel: td.TileKernel) -> None:
    """Last writer wins with no error before (issue 29): `t.begin // 8` over blocks of 4 and
    `i + j` give two programs one element."""
    err = trace_error(td.TraceError, kernel, f32(9, 5) if kernel is diagonal_sums else f32(37))
    assert "can give two of its programs the same elements" in msg(err), msg(err)
    assert "td.atomic_add" in msg(err)


@td.tile_kernel
def in_place_own_elements(x, v, sums):
    """Each program reads only what it writes itself, or what no program writes."""
    for tm in td.tile(x.shape[0]):
        x[tm, 1:] = (x[tm, 1:] - x[tm, :1]) * 2.0  # column 0 is read, never written
    for t in td.tile(v.shape[0], block_size=4):
        sums[t.begin // 4] = sums[t.begin // 4] + td.sum(v[t])  # one element per program


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_kernels_whose_programs_keep_to_their_elements_run(backend: str) -> None:
    x, v, sums = f32(13, 7), f32(13), f32(td.cdiv(13, 4))
    want_x = x.astype(np.float64)
    want_x[:, 1:] = (want_x[:, 1:] - want_x[:, :1]) * 2
    want_sums = sums + np.add.reduceat(v.astype(np.float64), range(0, 13, 4))
    space = in_place_own_elements.config_space(x, v, sums, backend=backend)
    for config in (space.default(), *space.sample(1, seed=2)):
        gx, gsums = x.copy(), sums.copy()
        in_place_own_elements.run(gx, v, gsums, backend=backend, config=config)
        np.testing.assert_allclose(gx, want_x, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gsums, want_sums, rtol=1e-5, atol=1e-5)


@td.tile_kernel
def pick_then_zero_rows(x, y):
    """Program r reads x[r, y[r]] through `tr.begin`, then zeroes row r through `tr` (block 1):
    the same row, so no other program's (Liger's cross_entropy reads its row, then writes it)."""
    out = td.empty((x.shape[0],), dtype=x.dtype)
    for tr in td.tile(x.shape[0], block_size=1):
        out[tr] = x[tr.begin, y[tr.begin]]
        for i in td.tile(x.shape[1]):
            x[tr, i] = td.zeros((tr, i), dtype=x.dtype)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_block_1_tile_and_its_begin_name_one_row(backend: str) -> None:
    x, y = f32(7, 5), np.array([0, 4, 1, 3, 2, 2, 0], np.int32)
    got_x = x.copy()
    got = pick_then_zero_rows.run(got_x, y, backend=backend)
    np.testing.assert_array_equal(got, x[np.arange(7), y])
    np.testing.assert_array_equal(got_x, np.zeros_like(x))


# ---- arguments that share memory --------------------------------------------------------------
@td.tile_kernel
def shift_add(x, out):
    for t in td.tile(x.shape[0]):
        out[t] = x[t] + 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_argument_written_in_place_may_not_share_memory_with_another(backend: str) -> None:
    buf = np.arange(9, dtype=np.float32)
    err = arg_error(td.ArgumentError, shift_add.run, buf[:-1], buf[1:], backend=backend)
    assert "arguments 'out' and 'x' share memory" in msg(err)
    assert "pass a copy of 'x'" in msg(err)
    np.testing.assert_array_equal(buf, np.arange(9))  # checked before anything ran
    same = buf.copy()  # one array passed twice is one tensor: `out[t] = out[t] + 1`, in place
    shift_add.run(same, same, backend=backend)
    np.testing.assert_array_equal(same, buf + 1)
    # the check is made on every call: the same shapes with disjoint arrays then run
    before = buf.copy()
    shift_add.run(buf[:4], buf[4:8], backend=backend)
    np.testing.assert_array_equal(buf[4:8], before[:4] + 1)
    even, odd = buf[::2].copy(), buf[1::2]  # interleaved views share no element
    shift_add.run(buf[::2][:4], odd, backend=backend)
    np.testing.assert_array_equal(odd, even[:4] + 1)


@td.tile_kernel
def scaled_rows(dY, dX, n_cols, BLOCK: td.constexpr, shift: td.constexpr):
    """Liger's in-place backward: dX is dY (`in_place=True`), each program reading its row
    and writing it back; with `shift`, the row below, which another program writes."""
    for r in td.grid(dY.shape[0] // n_cols - shift):
        cols = td.arange(0, BLOCK)
        mask = cols < n_cols
        v = td.load(dY, [(r + shift) * n_cols + cols], mask=mask, other=0.0)
        td.store(dX, [r * n_cols + cols], v * 2.0, mask=mask)


@pytest.mark.parametrize("backend", [*BACKENDS, gpu_backend()])
def test_one_array_passed_twice_is_one_tensor(backend: str) -> None:
    """dX is dY: traced as one tensor (arg_specs.py "alias"), so the race check sees each
    program read and write its own row in place. A read of another program's row is a race,
    whose error says the two names are one array."""
    g = np.random.default_rng(8).standard_normal(37 * 45).astype(np.float32)
    if backend == "triton-gpu":
        buf = on_cuda(g)
        for _ in range(2):  # the second call takes the fast path, keyed with the alias
            scaled_rows(buf, buf, 45, 64, 0)
        got = buf.cpu().numpy()
        np.testing.assert_array_equal(got, 4 * g)
        other = on_cuda(np.zeros_like(g))
        scaled_rows(on_cuda(g), other, 45, 64, 0)  # then distinct arrays of that layout
        np.testing.assert_array_equal(other.cpu().numpy(), 2 * g)
        return
    buf = g.copy()
    scaled_rows.run(buf, buf, 45, 64, 0, backend=backend)
    np.testing.assert_array_equal(buf, 2 * g)
    if backend == "numpy" and (torch := pytest.importorskip("torch")):  # two DLPack views
        t = torch.from_numpy(g.copy())
        scaled_rows(t, t, 45, 64, 0)
        np.testing.assert_array_equal(t.numpy(), 2 * g)
    with pytest.raises(td.TraceError, match="in another program") as e:
        scaled_rows.run(buf, buf, 45, 64, 1, backend=backend)
    assert "in this call 'dX' is 'dY' (one array passed twice)" in e.value.hint


def test_a_package_is_made_for_distinct_arrays(tmp_path) -> None:
    g = np.ones(4 * 45, np.float32)
    with pytest.raises(td.ArgumentError, match="arguments 'dY' and 'dX' are one array"):
        scaled_rows.export(tmp_path / "pkg", g, g, 45, 64, 0)


def test_read_only_arguments_may_share_memory() -> None:
    x = f32(10)
    np.testing.assert_allclose(add(x, x), 2 * x.astype(np.float64), rtol=1e-6)
    assert len(add.traced(x, x).ir.args) == 2  # read only: two arguments, as written
    np.testing.assert_allclose(add(x[1:], x[:-1]), x[1:] + x[:-1].astype(np.float64), rtol=1e-6)


class _Device:
    """A GPU array as share_memory sees it: only __cuda_array_interface__."""

    def __init__(self, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None,
                 typestr: str = "<f4") -> None:
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                         "strides": strides, "typestr": typestr, "version": 3}


def test_gpu_arrays_share_memory_when_their_bytes_overlap() -> None:
    assert share_memory(_Device(1000, (4,), None), _Device(1012, (4,), None))
    assert not share_memory(_Device(1000, (4,), None), _Device(1016, (4,), None))
    assert share_memory(_Device(1000, (2, 3), (4, 8)), _Device(1016, (1,), None))
    assert not share_memory(_Device(1000, (2, 3), (4, 8)), _Device(1024, (1,), None))
    assert share_memory(_Device(1012, (4,), (-4,)), _Device(996, (1,), None, "<f8"))
    assert not share_memory(_Device(1012, (4,), (-4,)), _Device(1016, (1,), None))
    assert not share_memory(_Device(1000, (0,), None), _Device(1000, (4,), None))


# ---- values a dtype cannot hold ---------------------------------------------------------------
@td.tile_kernel
def fill_tile(x):
    out = td.empty((x.shape[0],), dtype=td.int8)
    for t in td.tile(x.shape[0]):
        out[t] = td.full((t,), 1000, dtype=td.int8)  # <- here
    return out


@td.tile_kernel
def fill_tensor(x):
    out = td.full((x.shape[0],), 300, dtype=td.int8)  # <- here
    for t in td.tile(x.shape[0]):
        out[t] = out[t] + x[t]
    return out


@td.tile_kernel
def fill_nan(x):
    out = td.empty((x.shape[0],), dtype=td.int32)
    for t in td.tile(x.shape[0]):
        out[t] = td.full((t,), float("nan"), dtype=td.int32)  # <- here
    return out


@td.tile_kernel
def fill_in_range(x):
    out = td.empty((x.shape[0],), dtype=td.int8)
    for t in td.tile(x.shape[0]):
        out[t] = td.full((t,), -128, dtype=td.int8) + td.full((t,), 2.0, dtype=td.int8) + x[t]
    return out


def test_fill_values_an_integer_dtype_cannot_hold_are_errors() -> None:
    x8 = np.arange(-3, 4, dtype=np.int8)
    err = trace_error(td.DTypeError, fill_tile, f32(7))
    assert "fill value 1000 is out of range for int8 (-128 to 127)" in msg(err)
    err = trace_error(td.DTypeError, fill_tensor, x8)
    assert "fill value 300 is out of range for int8" in msg(err)
    err = trace_error(td.DTypeError, fill_nan, f32(7))
    assert "cannot fill a int32 tile with nan" in msg(err)
    for backend in BACKENDS:
        got = fill_in_range.run(x8, backend=backend)
        np.testing.assert_array_equal(got, (-126 + x8.astype(np.int64)).astype(np.int8))


# ---- scalar arguments and architectures -------------------------------------------------------
@pytest.mark.parametrize("value", [2**63, -2**63 - 1, 2**70])
def test_an_int_argument_past_int64_is_an_error(value: int) -> None:
    for backend in BACKENDS:
        err = arg_error(td.ArgumentError, scale.run, f32(5), value, backend=backend)
        assert f"argument 'alpha' is {value}, out of the range of int64" in msg(err)
    x = f32(5)
    np.testing.assert_allclose(scale(x, 2**62), x.astype(np.float64) * 2**62, rtol=1e-6)


@pytest.mark.parametrize("arch", [{"rows": 2}, ["generic-8x8"], "", 0, False])
def test_an_arch_that_is_not_one_is_an_error(arch: object) -> None:
    x = f32(5)
    for call in (lambda: scale.simulate(x, 2.0, arch=arch),
                 lambda: scale.run(x, 2.0, backend="spatial", arch=arch),
                 lambda: scale.config_space(x, 2.0, backend="spatial", arch=arch)):
        with pytest.raises(td.BackendError, match="spatial (preset|architecture)"):
            call()


# ---- two stores of one program: program order ---------------------------------------------------
@td.tile_kernel
def softmax_minus_onehot(X, Y):
    """Liger's cross_entropy writes each row's softmax over X in a loop, then `X[r, y] -= 1`: two
    stores that meet only within one program, which keeps them in order."""
    n, v = X.shape
    lse = td.empty((n,), dtype=td.float32)
    for r in td.grid(n):
        m = td.full((), -float("inf"), dtype=td.float32)
        d = td.zeros((), dtype=td.float32)
        for t in td.tile(v):
            xb = X[r, t].astype(td.float32)
            m_new = td.maximum(m, td.max(xb))
            d = d * td.exp(m - m_new) + td.sum(td.exp(xb - m_new))
            m = m_new
        for t in td.tile(v):
            X[r, t] = (td.exp(X[r, t].astype(td.float32) - m) / d).astype(X.dtype)
        X[r, Y[r]] -= 1.0
        lse[r] = m + td.log(d)
    return lse


@td.tile_kernel
def onehot_into_the_next_row(X, Y):
    n, v = X.shape
    for r in td.grid(n - 1):
        for t in td.tile(v):
            X[r, t] = X[r, t] * 2.0  # <- there
        X[r + 1, Y[r]] = 0.0  # <- here


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_stores_that_meet_in_one_program_keep_its_order(backend: str) -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 37)).astype(np.float32)
    Y = np.array([1, 36, 0, 5, 5], np.int32)
    x = X.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    p = np.exp(x - m) / np.exp(x - m).sum(axis=1, keepdims=True)
    p[np.arange(5), Y] -= 1
    out = X.copy()
    lse = softmax_minus_onehot.run(out, Y, backend=backend)
    np.testing.assert_allclose(out, p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse, np.log(np.exp(x).sum(axis=1)), rtol=1e-5)
    if backend == "triton-interpret":  # the threads of one program: a barrier orders them
        lines = softmax_minus_onehot.source(X, Y, target="triton").splitlines()
        first = next(i for i, t in enumerate(lines) if "tl.store(X_ptr" in t)  # in the loop
        reload = next(i for i in range(first, len(lines)) if "tl.load(X_ptr" in lines[i])
        assert any("tl.debug_barrier()" in t for t in lines[first:reload])
    err = trace_error(td.TraceError, onehot_into_the_next_row, f32(4, 6),
                      np.zeros(4, np.int32))  # another program's row: still a race
    assert "may write elements that the store at line" in msg(err)
    assert f"line {marker_line(onehot_into_the_next_row, '# <- there')}" in msg(err)


# ---- loops whose bounds move with the program -------------------------------------------------
@td.tile_kernel
def shared_windows(x):  # programs 0 and 1 (and 2 and 3) cover the same window
    (n,) = x.shape
    out = td.zeros((n,), dtype=x.dtype)
    for p in td.grid(4):
        s = (p // 2) * 8
        for t in td.tile(n, start=s, stop=s + 8, block_size=4):
            out[t] = x[t] * (p + 1).astype(x.dtype)  # <- here
    return out


@td.tile_kernel
def prefix_windows(x):  # every window starts at 0
    (n,) = x.shape
    out = td.zeros((n,), dtype=x.dtype)
    for tq in td.tile(n):
        for tk in td.tile(tq.end):
            out[tk] = x[tk] * tq.begin.astype(x.dtype)  # <- here
    return out


@td.tile_kernel
def own_windows(x):
    """Disjoint windows: p * 8 + [0, 8); a grid tile's own [begin, end); and every window's
    prefix written with the same values (x[t] + 1 holds at an element whichever writes it)."""
    (n,) = x.shape
    a = td.zeros((n,), dtype=x.dtype)
    b = td.zeros((n,), dtype=x.dtype)
    c = td.zeros((n,), dtype=x.dtype)
    for p in td.grid(n // 8):
        for t in td.tile(n, start=p * 8, stop=p * 8 + 8, block_size=4):
            a[t] = x[t] * (p + 1).astype(x.dtype)
    for tb in td.tile(n):
        for t in td.tile(tb.end, start=tb.begin):
            b[t] = x[t] * tb.begin.astype(x.dtype)
        for t in td.tile(tb.end):
            c[t] = x[t] + 1
    return a, b, c


def test_loops_whose_bounds_move_with_the_program() -> None:
    """A loop range with program-dependent bounds gives each program its own elements only
    where the windows cannot meet (a race there was missed before)."""
    for kernel in (shared_windows, prefix_windows):
        err = trace_error(td.TraceError, kernel, f32(32))
        assert "can give two of its programs the same elements" in msg(err)
    x = np.random.default_rng(0).standard_normal(32).astype(np.float32)
    a, b, c = own_windows.run(x, backend="numpy", config=td.Config(block_sizes=(16, 8, 8)))
    np.testing.assert_allclose(a, x * (np.arange(32) // 8 + 1), rtol=1e-6)
    np.testing.assert_allclose(b, x * (np.arange(32) // 16 * 16), rtol=1e-6)
    np.testing.assert_allclose(c, x + 1, rtol=1e-6)


@td.tile_kernel
def split_heads(q, H: td.constexpr):
    """The fused-attention tutorial's `off_z = off_hz // H`, `off_h = off_hz % H`: together
    they give each program its own (batch, head)."""
    Z, _, n = q.shape
    out = td.empty(q.shape, dtype=q.dtype)
    for tq, hz in td.tile(n, Z * H, block_size=(None, 1)):
        off_z, off_h = hz.begin // H, hz.begin % H
        out[off_z, off_h, tq] = q[off_z, off_h, tq] * 2
    return out


@td.tile_kernel
def batch_only(q, H: td.constexpr):  # `// H` alone: H programs write one batch row
    Z, _, n = q.shape
    out = td.zeros(q.shape, dtype=q.dtype)
    for tq, hz in td.tile(n, Z * H, block_size=(None, 1)):
        off_z = hz.begin // H
        out[off_z, 0, tq] = q[off_z, 0, tq] * hz.begin.astype(q.dtype)  # <- here
    return out


def test_a_floordiv_and_mod_pair_separates_programs() -> None:
    q = np.random.default_rng(0).standard_normal((3, 4, 10)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(split_heads.run(q, 4, backend=backend), 2 * q)
    err = trace_error(td.TraceError, batch_only, q, 4)
    assert "can give two of its programs the same elements" in msg(err)


@td.tile_kernel
def scattered_rows(x, stride: td.constexpr):
    """Each program writes row `(i * stride) % m`: a permutation exactly when stride and m
    share no factor (the check evaluates the index per program)."""
    m, n = x.shape
    out = td.zeros_like(x)
    for i in td.grid(m):
        out[(i * stride) % m, :] = x[i, :]
    return out


def test_a_computed_index_separates_programs_when_it_is_a_bijection() -> None:
    x = np.random.default_rng(0).standard_normal((9, 4)).astype(np.float32)
    out = scattered_rows(x, 2)  # 2 and 9: a permutation of the rows
    np.testing.assert_array_equal(out[(np.arange(9) * 2) % 9], x)
    with pytest.raises(td.TraceError, match="can give two of its programs the same elements"):
        scattered_rows(x, 3)  # rows 0, 3, 6 three times each


@td.tile_kernel
def padded_rows(x, H: td.constexpr, D: td.constexpr, PAD_H: td.constexpr):
    """Liger's row kernels: `pid.to(td.int64)`, a padded block of rows masked to H, in place."""
    for pid in td.grid(x.shape[0] // (H * D)):
        pid = pid.to(td.int64)
        offs = td.arange(0, PAD_H)[:, None] * D + td.arange(0, D)[None, :]
        mask = td.arange(0, PAD_H)[:, None] < H
        v = td.load(x, [pid * (H * D) + offs], mask=mask, other=0)
        td.store(x, [pid * (H * D) + offs], v * 2.0, mask=mask)


def test_a_mask_of_arange_lanes_narrows_the_rows_a_store_reaches() -> None:
    """Padded to 4 rows of 2, masked to 3: each program keeps to its own 6 elements. Without
    the mask, row 3 of one program is row 0 of the next: refused."""
    x = np.arange(24, dtype=np.float32)
    padded_rows(x, 3, 2, 4)
    np.testing.assert_array_equal(x, 2 * np.arange(24))

    @td.tile_kernel
    def unmasked(x, H: td.constexpr, D: td.constexpr, PAD_H: td.constexpr):
        for pid in td.grid(x.shape[0] // (H * D)):
            offs = td.arange(0, PAD_H)[:, None] * D + td.arange(0, D)[None, :]
            td.store(x, [pid * (H * D) + offs], td.zeros((PAD_H, D), dtype=td.float32) + pid)

    with pytest.raises(td.TraceError, match="can give two of its programs the same elements"):
        unmasked(np.ones(24, np.float32), 3, 2, 4)


@td.tile_kernel
def swap_halves(x, D: td.constexpr, stride: td.constexpr):
    """Liger's rope in place: each program reads and writes both halves of its own row,
    `pid * stride + offs` and `pid * stride + offs + D // 2`."""
    for pid in td.grid(x.shape[0] // stride):
        offs = td.arange(0, D // 2)
        first = td.load(x, [pid * stride + offs])
        second = td.load(x, [pid * stride + offs + D // 2])
        td.store(x, [pid * stride + offs], second)
        td.store(x, [pid * stride + offs + D // 2], first)


def test_accesses_in_one_window_per_program_are_apart() -> None:
    """Both halves lie in [pid * D, pid * D + D): no other program reaches them. Rows D // 2
    apart would overlap the next program's first half: refused."""
    x = np.arange(24, dtype=np.float32)
    swap_halves(x, 8, 8)
    np.testing.assert_array_equal(x, np.arange(24).reshape(3, 2, 4)[:, ::-1].ravel())
    with pytest.raises(td.TraceError, match="in another program of the grid"):
        swap_halves(np.ones(24, np.float32), 8, 4)


@td.tile_kernel
def rows_by_stride(x, row_stride, n_cols, block: td.constexpr):
    """Liger's row kernels: a flat tensor, each program's row at `pid * row_stride` (a runtime
    int), `block` lanes masked to `n_cols`, doubled in place."""
    flat = x.view(-1)
    for pid in td.grid(x.shape[0]):
        cols = td.arange(0, block)
        v = td.load(flat, [pid * row_stride + cols], mask=cols < n_cols)
        td.store(flat, [pid * row_stride + cols], v * 2, mask=cols < n_cols)


@td.tile_kernel
def read_by_stride(x, row_stride):
    """The load's row at a runtime stride, the store's at the literal one."""
    flat = x.view(-1)
    for pid in td.grid(x.shape[0]):
        cols = td.arange(0, 8)
        v = td.load(flat, [pid * row_stride + cols], mask=cols < 7)
        td.store(flat, [pid * 7 + cols], v * 2, mask=cols < 7)


def test_int_arguments_of_racing_indices_are_traced_as_constants() -> None:
    """Where the race check cannot tell programs apart through runtime ints, it traces the
    kernel again with them as constants: rows 7 apart are apart; rows 3 apart overlap."""
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    for kernel, args in ((rows_by_stride, (7, 7, 8)), (read_by_stride, (7,))):
        y = x.copy()
        kernel(y, *args)
        np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(td.TraceError, match="can give two of its programs the same elements"):
        rows_by_stride(x.copy(), 3, 7, 8)
    with pytest.raises(td.TraceError, match="may write elements that the load at line"):
        read_by_stride(x.copy(), 3)


@td.tile_kernel
def strided_blocks(x, stride):
    """FlagGems' mv: a registered block size that host code reads sizes the grid, and the
    indices use a runtime int: each of the block's values traces with it as a constant."""
    n = x.shape[0]
    out = td.empty((n,), dtype=x.dtype)
    b = td.register_block_size(n)
    for pid in td.grid(td.cdiv(n, b)):
        offs = pid * b + td.arange(0, b)
        td.store(out, [offs * stride], td.load(x, [offs * stride], mask=offs < n) * 2.0,
                 mask=offs < n)
    return out


def test_a_grid_sized_by_a_read_block_size_specializes_its_int_arguments() -> None:
    """It leaked the tracer's internal StaticNeeded out of k.run (the default config's check
    traces another block size than the default trace)."""
    x = np.random.default_rng(2).standard_normal(37).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        for config, out in under_configs(strided_blocks, (x, 1), backend):
            np.testing.assert_array_equal(out, 2 * x, err_msg=str(config))


@td.tile_kernel
def deep_index(v, block: td.constexpr):
    """An index whose expression is a deep DAG (FlagGems' bitonic argsort feeds its store one):
    as a tree it has 3**40 nodes, which the race check walked (a hang) before it memoized."""
    for pid in td.grid(td.cdiv(v.shape[0], block)):
        lanes = td.arange(0, block)
        idx = lanes
        for _ in td.static_range(40):
            idx = idx + idx - idx
        rows = pid * block + idx
        td.store(v, [rows], td.load(v, [pid * block + lanes], mask=rows < v.shape[0]) * 2,
                 mask=rows < v.shape[0])


def test_the_race_check_of_a_deep_index_ends() -> None:
    x = np.arange(45, dtype=np.float32)
    deep_index(x, 16)
    np.testing.assert_array_equal(x, 2 * np.arange(45))


@td.tile_kernel
def polar(a, th, shift: td.constexpr):
    """FlagGems' polar stores through `out0, out1 = output[..., 0], output[..., 1]`: int
    indices that drop a dimension keep the views apart; with `shift`, out1 is column 0 from
    row 1 on, which the next program writes through out0."""
    n = a.shape[0] - shift
    output = td.zeros((*a.shape, 2), dtype=a.dtype)
    out0, out1, r, phi = output[:n, 0], output[shift:, 1 - shift], a[:n], th[:n]
    for t in td.tile(n):
        out0[t] = r[t] * td.cos(phi[t])
        out1[t] = r[t] * td.sin(phi[t])
    return output


def test_views_that_an_int_index_keeps_apart() -> None:
    a, th = np.random.default_rng(3).random((2, 37)).astype(np.float32)
    out = polar(a, th, 0)
    td.testing.assert_close(out[:, 0], a * np.cos(th), np.float32)
    td.testing.assert_close(out[:, 1], a * np.sin(th), np.float32)
    with pytest.raises(td.TraceError, match="may write elements that the store at line"):
        polar(a, th, 1)


@td.tile_kernel
def last_writes(x, out, k, block: td.constexpr, first: td.constexpr = 0):
    """FlagGems' radix sort: `if last_block and portion_id < n - 1:` stores from the last
    program only (an `and` in an `if` test is an `if` of its own); with `first`, from the
    first too, which the `and` does not keep apart."""
    n = x.shape[0]
    for pid in td.grid(td.cdiv(n, block)):
        offs = pid * block + td.arange(0, block)
        acc = td.sum(td.load(x, [offs], mask=offs < n))
        last_block = (pid == td.cdiv(n, block) - 1) | (pid < first)
        if last_block and k < 1:
            td.store(out, [0], acc)


def test_an_and_in_an_if_test_keeps_its_programs() -> None:
    x = np.arange(1, 38, dtype=np.int32)
    out = np.zeros(1, np.int64)
    last_writes(x, out, 0, 8)
    assert out[0] == x[32:].sum()
    with pytest.raises(td.TraceError, match="does not use grid dimension 'pid'"):
        last_writes(x, out, 0, 8, 1)


@td.tile_kernel
def grid_stride_copy(x, out, nc, hw: td.constexpr, p: td.constexpr, b: td.constexpr,
                     bump: td.constexpr):
    """FlagGems' upsample_nearest2d: programs (pid, nc0) stride over the planes, their offset
    carried and bumped by `p * hw` each trip (a constant the loop broadcasts to the tile);
    a bump other than the stride's lets programs meet (with values of their own: `+ nc0 *
    0.0`, as equal values would be one write)."""
    xs, os = x.view(-1), out.view(-1)
    for pid, nc0 in td.grid(td.cdiv(hw, b), p):
        idx = pid * b + td.arange(0, b)
        off = nc0 * hw + idx
        for _ in range(nc0, nc, p):
            td.store(os, [off], td.load(xs, [off], mask=idx < hw) + nc0 * 0.0, mask=idx < hw)
            off += bump * hw


def test_a_grid_stride_loop_with_a_bumped_offset() -> None:
    x = np.random.default_rng(5).standard_normal((6, 45)).astype(np.float32)
    out = np.zeros_like(x)
    grid_stride_copy(x, out, 6, 45, 4, 16, 4)
    np.testing.assert_array_equal(out, x)
    with pytest.raises(td.TraceError, match="can give two of its programs the same elements"):
        grid_stride_copy(x, out, 6, 45, 4, 16, 3)


@td.tile_kernel
def rows_per_program(x, programs: td.constexpr, rows: td.constexpr, reach: td.constexpr):
    """Liger's backward kernels: program p doubles rows [p * rows, min(p * rows + reach, n)) in
    place, in a `range` over runtime bounds."""
    n = x.shape[0]
    for p in td.grid(programs):
        row_start = p * rows
        for row in range(row_start, min(row_start + reach, n)):
            x[row, :] = x[row, :] * 2.0


@td.tile_kernel
def halves_by_divmod(x, s: td.constexpr):
    """Liger's mrope: program pid owns (pid // s, pid % s) and moves its second half onto its
    first."""
    for pid in td.grid(x.shape[0] * s):
        b, t = pid // s, pid % s
        d = td.arange(0, 4)
        td.store(x, [b, t, d], td.load(x, [b, t, d + 4]))


def test_programs_that_own_rows_by_counted_loops_or_divmod_pairs() -> None:
    x = np.random.default_rng(1).standard_normal((10, 3)).astype(np.float32)
    y = x.copy()
    rows_per_program(y, 3, 4, 4)
    np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(td.TraceError, match="may write elements that the load at line"):
        rows_per_program(x.copy(), 3, 4, 5)  # each window reaches the next program's first row
    z = np.arange(48, dtype=np.float32).reshape(2, 3, 8)
    want = z.copy()
    want[..., :4] = z[..., 4:]
    halves_by_divmod(z, 3)
    np.testing.assert_array_equal(z, want)


@td.tile_kernel
def store_at_a_carried_count(x, lens):
    """Each program counts its row's length in a loop and stores at that count: programs with
    equal lengths write one element (it passed unchecked)."""
    out = td.zeros((8,), td.float32)
    for r in td.grid(x.shape[0]):
        i = 0
        for _ in range(0, lens[r]):
            i += 1
        out[i] = x[r]
    return out


def test_a_store_index_carried_by_a_loop_is_refused() -> None:
    with pytest.raises(td.TraceError, match="computed from a value that a loop carries") as e:
        store_at_a_carried_count(np.arange(4, dtype=np.float32), np.full(4, 2, np.int32))
    assert "out[i] = x[r]" in str(e.value)


@td.tile_kernel
def bumped_rows(x, stride, rows: td.constexpr, reach: td.constexpr, programs: td.constexpr):
    """Liger's pointer bumps: a program's offset starts at its first row and steps by a
    runtime stride each trip of a loop over its rows, doubling them in place."""
    flat = x.view(-1)
    for p in td.grid(programs):
        row_start = p * rows
        off = row_start * stride
        cols = td.arange(0, 8)
        for _ in range(row_start, td.minimum(row_start + reach, x.shape[0])):
            v = td.load(flat, [off + cols], mask=cols < x.shape[1])
            td.store(flat, [off + cols], v * 2, mask=cols < x.shape[1])
            off += stride


def test_offsets_a_loop_steps_are_followed() -> None:
    """The check waits for the loop's body, then follows `off` as `stride * row`: rows 4 per
    program are apart, rows that reach into the next program's are refused at the store."""
    x = np.random.default_rng(2).standard_normal((10, 5)).astype(np.float32)
    y = x.copy()
    bumped_rows(y, 5, 4, 4, 3)
    np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(td.TraceError, match="can give two of its programs the same") as e:
        bumped_rows(x.copy(), 5, 4, 5, 3)
    assert "td.store(flat, [off + cols]" in str(e.value)  # the store's line


@td.tile_kernel
def varlen_rows(x, cu, out, D: td.constexpr):
    """vLLM mamba's varlen selective_state_update: program b's rows are [cu[b], cu[b + 1]),
    its pointers start at the loaded `bos` and step a row each trip."""
    for pid_b in td.grid(cu.shape[0] - 1):
        bos = td.load(cu + pid_b).to(td.int64)
        eos = td.load(cu + pid_b + 1).to(td.int64)
        offs = td.arange(0, D)
        x_ptr, out_ptr = x + bos * D, out + bos * D
        for _ in range(eos - bos):
            td.store(out_ptr + offs, td.load(x_ptr + offs) * 2.0)
            x_ptr += D
            out_ptr += D


@td.tile_kernel
def shared_start(x, cu, out, D: td.constexpr):
    """The same, every program from the one loaded start: they write the same rows."""
    for pid_b in td.grid(cu.shape[0] - 1):
        bos = td.load(cu).to(td.int64)
        offs = td.arange(0, D)
        out_ptr = out + bos * D
        for _ in range(td.load(cu + pid_b + 1).to(td.int64) - bos):
            td.store(out_ptr + offs, td.load(x + offs) * (pid_b + 1.0))
            out_ptr += D


def test_offsets_a_loop_steps_from_a_loaded_start_are_trusted() -> None:
    """A start loaded per program is trusted as a scatter's indices are (their contract); a
    start every program shares is not."""
    x = np.random.default_rng(3).standard_normal((7, 16)).astype(np.float32)
    cu = np.array([0, 2, 2, 7], np.int32)
    for backend in ("numpy", "triton-interpret"):
        out = np.zeros_like(x)
        varlen_rows.run(x, cu, out, 16, backend=backend)
        np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(td.TraceError, match="stepped by a loop from a start that does not "
                       "tell the programs along grid dimension 'pid_b' apart"):
        shared_start(x, cu, np.zeros_like(x), 16)


@td.tile_kernel
def recurrent_rows(x, share: bool):
    """flash-linear-attention's fused_recurrent: program b walks its T rows with pointers it
    bumps each trip of `td.range(0, T)` over the static T, backwards as with REVERSE=True
    (`share`: programs 2i and 2i + 1 start at the same row, and write the same rows)."""
    B, T, D = x.shape
    o = td.empty_like(x)
    for b in td.grid(B):
        start = b // 2 * T * D if share else (b * T + T - 1) * D
        p_x, p_o = x + start + td.arange(0, D), o + start + td.arange(0, D)
        h = td.zeros((D,), dtype=td.float32)
        for _ in td.range(0, T):
            h = h * 0.5 + td.load(p_x)
            td.store(p_o, h)
            p_x -= D if not share else -D
            p_o -= D if not share else -D
    return o


@td.tile_kernel
def pinned_rows(x):
    """Two offsets a loop steps in opposite directions: their sum stays at row b (computed
    per program, concrete.py; with the signs alike, programs b and b + 2 would meet)."""
    B, D = x.shape
    o = td.zeros_like(x)
    for b in td.grid(B):
        up, down = b * D, 0
        for _ in td.range(0, 4):
            td.store(o + up + down + td.arange(0, D), td.load(x + up + down + td.arange(0, D)))
            up += D
            down -= D
    return o


def test_pointers_a_static_td_range_bumps_are_followed() -> None:
    """td.range over a static bound that bumps pointers is a counted loop, whose steps the
    race check follows (it was a loop of one-element tiles, and refused, while the same loop
    over a runtime bound passed)."""
    x = np.random.default_rng(5).standard_normal((3, 7, 16)).astype(np.float32)
    want = np.zeros((3, 7, 16))
    h = np.zeros((3, 16))
    for t in range(6, -1, -1):
        h = h * 0.5 + x[:, t].astype(np.float64)
        want[:, t] = h
    for backend in ("numpy", "triton-interpret"):
        assert_close(recurrent_rows.run(x, False, backend=backend), want, np.float32)
    with pytest.raises(td.TraceError, match="stepped by a loop from a start that does not "
                       "tell the programs along grid dimension 'b' apart"):
        recurrent_rows(x, True)
    rows = x[0]
    np.testing.assert_array_equal(pinned_rows(rows), rows)


@td.tile_kernel
def shift_state(cs, idx, shift: td.constexpr, BN: td.constexpr, NP2: td.constexpr):
    """vLLM's causal_conv1d_update: program (b, pf) reads column 0 of cache line `idx[b]` and
    writes the line's (feature, token) block, through pointers from the loaded line; with
    `shift`, it reads the next line's column instead."""
    L, D, S = cs.shape
    for b, pf in td.grid(idx.shape[0], td.cdiv(D, BN)):
        line = td.load(idx + b).to(td.int64)
        feats = pf * BN + td.arange(0, BN)
        toks = td.arange(0, NP2)
        base = cs + line * (D * S) + feats * S
        col0 = td.load(base + shift * D * S, feats < D, 0.0)
        ptrs = base[None, :] + toks[:, None]
        m = (toks < S)[:, None] & (feats < D)[None, :]
        td.store(ptrs, td.load(ptrs, m, 0.0) + col0[None, :], m)


def test_a_cache_line_loaded_per_program_is_its_own() -> None:
    """A program reads what it writes through one loaded cache line: loaded slots are distinct
    (their contract, as a scatter's indices). Reading another line stays refused."""
    cs = np.random.default_rng(4).standard_normal((4, 45, 3)).astype(np.float32)
    idx = np.array([2, 0], np.int32)
    want = cs.copy()
    want[idx] += cs[idx][:, :, :1]
    for backend in ("numpy", "triton-interpret"):
        got = cs.copy()
        shift_state.run(got, idx, 0, 16, 4, backend=backend)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(td.TraceError, match="may write elements that the load at line"):
        shift_state(cs.copy(), idx, 1, 16, 4)


@td.tile_kernel
def guarded_shift(cs, cache_indices, batch, has_state, shift: td.constexpr,
                  BN: td.constexpr, NP2: td.constexpr):
    """vLLM's causal_conv1d_fwd: the sequence comes from `batch[pid]`, its cache line from
    `cache_indices[seq]` (loaded twice, as the author does: input and output coordinates), and
    column 0 is read only `if has_initial_state[seq]` (a runtime test on a loaded flag)."""
    L, D, S = cs.shape
    for pid, pf in td.grid(batch.shape[0], td.cdiv(D, BN)):
        seq = td.load(batch + pid).to(td.int64)
        line_in = td.load(cache_indices + seq).to(td.int64)
        feats = pf * BN + td.arange(0, BN)
        if td.load(has_state + seq).to(td.int1):
            col0 = td.load(cs + (line_in + shift) * (D * S) + feats * S, feats < D, 0.0)
        else:
            col0 = td.zeros((BN,), dtype=td.float32)
        line_out = td.load(cache_indices + seq).to(td.int64)
        toks = td.arange(0, NP2)
        ptrs = (cs + line_out * (D * S) + feats * S)[None, :] + toks[:, None]
        m = (toks < S)[:, None] & (feats < D)[None, :]
        td.store(ptrs, td.load(ptrs, m, 0.0) + col0[None, :], m)


def test_loaded_lines_through_loaded_sequences_and_guarded_reads() -> None:
    """A line loaded through a loaded sequence number, loaded twice, read under a test on a
    loaded flag: the slot stands for its chain of loads; a test is never taken on a slot."""
    cs = np.random.default_rng(5).standard_normal((4, 45, 3)).astype(np.float32)
    ci, batch, has = (np.array(v, np.int32) for v in ([2, 0, 3], [1, 0, 2], [1, 0, 1]))
    want = cs.copy()
    for seq in batch:
        if has[seq]:
            want[ci[seq]] += cs[ci[seq]][:, :1]
    for backend in ("numpy", "triton-interpret"):
        got = cs.copy()
        guarded_shift.run(got, ci, batch, has, 0, 16, 4, backend=backend)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(td.TraceError, match="may write elements that the load at line"):
        guarded_shift(cs.copy(), ci, batch, has, 1, 16, 4)  # reads the next line: refused


@td.tile_kernel
def retraced_loop_then_if_index(x, lens):
    """A counted loop traced twice (its carried `acc` widens from int to float), then a store
    at an index an `if` yields: the check must not wait on the first attempt's loop."""
    out = td.zeros((2,), td.float32)
    for r in td.grid(x.shape[0]):
        acc = 0
        for j in range(0, lens[r]):
            acc = acc + x[r, j]
        i = 0
        if acc > 0:
            i = 1
        out[i] = acc
    return out


def test_a_loop_traced_again_leaves_no_check_waiting() -> None:
    with pytest.raises(td.TraceError, match="computed from a value that a loop carries"):
        retraced_loop_then_if_index(np.ones((3, 4), np.float32), np.full(3, 4, np.int32))


@td.tile_kernel
def group_centered(x, cpg: td.constexpr, block: td.constexpr, pitch: td.constexpr = 0):
    """Liger's group_norm backward: program (b, g) sums its group's channels in one window
    loop, then writes them in a second, through a flat view at `b * C * H + c * H + offs`
    (`c` a counter, `offs` a column chunk masked to H)."""
    bsz, channels, hidden = x.shape
    flat, out = x.view(-1), td.empty_like(x)
    out_flat = out.view(-1)
    for b, g in td.grid(bsz, channels // cpg):
        s = 0.0
        for c in range(g * cpg, (g + 1) * cpg):
            s += td.sum(x[b, c, :])
        for c in td.range(g * cpg, (g + 1) * cpg):
            for off in range(0, hidden, block):  # column chunks, unrolled: one store each
                offs = off + td.arange(0, block)
                at = b * channels * hidden + c * (pitch or hidden) + offs
                td.store(out_flat, [at], td.load(flat, [at], mask=offs < hidden) - s,
                         mask=offs < hidden)
    return out


def test_window_loops_in_a_two_dimensional_grid() -> None:
    """The windows [g * cpg, (g + 1) * cpg) keep g's programs apart (b's are apart by the
    other term), and the counter's largest stop bounds its term. A row's chunks are stores
    at `b * C * H + c * H + [0, H)` together: each program's own."""
    x = np.random.default_rng(3).standard_normal((3, 6, 37)).astype(np.float32)
    sums = x.astype(np.float64).reshape(3, 2, -1).sum(-1)
    want = x - np.repeat(sums, 3, axis=1)[:, :, None]
    for block in (64, 16):  # one chunk a row, or three (their stores compared in the row)
        td.testing.assert_close(group_centered(x, 3, block), want, np.float32)
    with pytest.raises(td.TraceError, match="may write elements that the store at line"):
        group_centered(x, 3, 16, 36)  # rows 36 apart, 37 long: neighbours share an element


@td.tile_kernel
def shift_within_rows(x, stride: td.constexpr, by: td.constexpr):
    """Each program moves 4 lanes of its row `by` to the right, in place."""
    flat = x.view(-1)
    for p in td.grid(x.shape[0] // stride - 1):
        offs = td.arange(0, 4)
        td.store(flat, [p * stride + offs + by], td.load(flat, [p * stride + offs]))


def test_windows_count_every_lane() -> None:
    """`p * 8 + [0, 4)` read and `p * 8 + 6 + [0, 4)` written reach the next program's row:
    refused. The windows counted one lane of a `td.arange` (a silent race before)."""
    x = np.arange(48, dtype=np.float32)
    y = x.copy()
    shift_within_rows(y, 8, 4)  # [8p, 8p + 8): each program's own
    np.testing.assert_array_equal(y.reshape(6, 8)[:5, 4:], x.reshape(6, 8)[:5, :4])
    with pytest.raises(td.TraceError, match="may write elements that the load at line"):
        shift_within_rows(x.copy(), 8, 6)


@td.tile_kernel
def column_tiles(a, c, stride, n_cols, shift, BLOCK: td.constexpr):
    """Liger's swiglu over a 2-D grid of (row, column tile): a flat index `row * stride +
    cols`, each tile masked to `cols < n_cols`."""
    for row, col_tile in td.grid(a.shape[0] // stride, td.cdiv(n_cols, BLOCK)):
        cols = shift + col_tile * BLOCK + td.arange(0, BLOCK)
        mask = cols < n_cols
        at = row * stride + cols - shift
        td.store(c, [at], td.load(a, [at], mask=mask) * 2.0, mask=mask)


def test_a_mask_bounds_a_column_tile_s_flat_index() -> None:
    """The mask keeps `cols` below n_cols, so a ragged row's last tile does not reach the next
    row (separation.py `_bounded`): apart at n_cols = 129 in tiles of 32 (five tiles span
    160). Shifted down by a constant, the same bound lets it reach the next row: a race."""
    a = np.random.default_rng(5).standard_normal(5 * 129).astype(np.float32)
    for backend in BACKENDS:
        c = np.zeros_like(a)
        column_tiles.run(a, c, 129, 129, 0, 32, backend=backend)
        np.testing.assert_array_equal(c, 2 * a)
    with pytest.raises(td.TraceError, match="the same elements"):
        column_tiles(a, np.zeros_like(a), 129, 129, -40, 32)  # cols in [-40, 129): 169 a row


@td.tile_kernel
def guarded_heads(x, D: td.constexpr, heads: td.constexpr, grid_h: td.constexpr,
                  limit: td.constexpr):
    """Liger's llama4 rope: a grid over the larger of two head counts, each head's update
    guarded by `if h < heads`, in place, rows of heads * D."""
    for r, h in td.grid(x.shape[0] // (heads * D), grid_h):
        if h < limit:
            at = r * (heads * D) + h * D + td.arange(0, D)
            td.store(x, [at], td.load(x, [at]) * 2.0)


@td.tile_kernel
def early_heads(x, D: td.constexpr, heads: td.constexpr, grid_h: td.constexpr,
                limit: td.constexpr):
    """The same after `if h >= heads: return`."""
    for r, h in td.grid(x.shape[0] // (heads * D), grid_h):
        if h >= limit:
            return
        at = r * (heads * D) + h * D + td.arange(0, D)
        td.store(x, [at], td.load(x, [at]) * 2.0)


def test_an_if_on_a_grid_index_bounds_its_programs() -> None:
    """Without the guard, heads 3 and 4 of row r would write row r + 1's heads 0 and 1; the
    `if` keeps h below 3 (separation.py `_guard`), as does an early return. A guard one too
    loose races."""
    x = np.random.default_rng(6).standard_normal(4 * 3 * 16).astype(np.float32)
    for kernel in (guarded_heads, early_heads):
        y = x.copy()
        kernel(y, 16, 3, 5, 3)
        np.testing.assert_array_equal(y, 2 * x)
        with pytest.raises(td.TraceError, match="the same elements|reads in another program"):
            kernel(x.copy(), 16, 3, 5, 4)  # head 3 is row r + 1's head 0


@td.tile_kernel
def interleaved_pairs(x, D: td.constexpr, S, H: td.constexpr, fold: td.constexpr):
    """Liger's llama4 rope in place: (re, im) pairs at `base + 2d` and `base + 2d + 1`, its row
    rebuilt from the program as `(pid // S) * S + pid % S` (fold 1), or every two programs
    given one row (fold 2: a race)."""
    for pid, h in td.grid(x.shape[0] // (H * D), H):
        row = (pid // S) * S + pid % S if fold == 1 else (pid // 2) * 2
        base = row * (H * D) + h * D
        d = td.arange(0, D // 2)
        re = td.load(x, [base + d * 2])
        im = td.load(x, [base + d * 2 + 1])
        td.store(x, [base + d * 2], re * 2.0)
        td.store(x, [base + d * 2 + 1], im * 3.0)


def test_a_row_rebuilt_by_divmod_keeps_interleaved_accesses_apart() -> None:
    """Each program's positions `pid // S`, `pid % S` and `h` (evaluated in every program:
    separation.py `_computed_window`) are its own, so its windows [base, base + D) are too."""
    x = np.random.default_rng(7).standard_normal(6 * 3 * 16).astype(np.float32)
    y = x.copy()
    interleaved_pairs(y, 16, 3, 3, 1)
    np.testing.assert_array_equal(y, x * np.tile([2.0, 3.0], x.size // 2).astype(np.float32))
    with pytest.raises(td.TraceError, match="the same elements|in another program"):
        interleaved_pairs(x.copy(), 16, 3, 3, 2)


@td.tile_kernel
def load_outside_the_guard(x, D: td.constexpr, heads: td.constexpr, grid_h: td.constexpr):
    """The load runs in every program, the store only under `if h < heads`: program (r, 3)
    reads row r + 1's head 0, which program (r + 1, 0) writes."""
    for r, h in td.grid(x.shape[0] // (heads * D), grid_h):
        at = r * (heads * D) + h * D + td.arange(0, D)
        v = td.load(x, [at], mask=at < x.shape[0])
        if h < heads:
            td.store(x, [at], v * 2.0)


def test_a_guard_bounds_only_the_accesses_under_it() -> None:
    x = np.random.default_rng(15).standard_normal(4 * 3 * 16).astype(np.float32)
    with pytest.raises(td.TraceError, match="reads in another program"):
        load_outside_the_guard(x, 16, 3, 5)


@td.tile_kernel
def bump_label(X, Y, BLOCK: td.constexpr):
    """Liger's cross entropy through a flat pointer: each program reads its row's label column
    `row * n + y`, y loaded, and rewrites its row."""
    n_rows, n_cols = X.shape
    X_flat = X.view(-1)
    for row in td.grid(n_rows):
        off = row * n_cols
        x_y = td.load(X_flat, off + td.load(Y, row))
        for i in range(0, n_cols, BLOCK):
            cols = i + td.arange(0, BLOCK)
            v = td.load(X_flat, off + cols, mask=cols < n_cols)
            td.store(X_flat, off + cols, v - x_y, mask=cols < n_cols)


def test_a_loaded_column_of_a_flat_view_is_checked_on_the_data() -> None:
    """Only the data keeps `y` in the row: the race check leaves it to the NumPy backend,
    which records the programs' accesses on each run (a label past the row reaches the next
    program's). Scaled to a line, a loaded value is a slot the check compares itself
    (test_a_cache_line_loaded_per_program_is_its_own)."""
    X = np.random.default_rng(16).standard_normal((5, 37)).astype(np.float32)
    labels = np.array([1, 0, 36, 4, 9], np.int64)
    want = X - X[np.arange(5), labels][:, None]
    for backend in ("numpy", "triton-interpret"):
        got = X.copy()
        bump_label.run(got, labels, 16, backend=backend)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    labels[1] = 37 + 2  # row 1 reads row 2's column 2, which program 2 writes
    with pytest.raises(td.RaceError, match="the index is loaded from memory, so the race "
                       "check leaves it to the data"):
        bump_label(X.copy(), labels, 16)


@td.tile_kernel
def tuned_blocks(x, stride: td.constexpr):
    """Liger's autotuned BLOCK_N as a registered block size the host code reads: each program
    stores `pid * B + td.arange(0, B)` (apart when the stride is B, not when it is less)."""
    (n,) = x.shape
    out = td.empty_like(x)
    B = td.register_block_size(n)
    for pid in td.grid(td.cdiv(n, B)):
        offs = pid * (B if stride == 0 else stride) + td.arange(0, B)
        td.store(out, [offs], 2.0 * td.load(x, [offs], mask=offs < n), mask=offs < n)
    return out


def test_a_read_block_size_is_its_trace_s_value_in_the_race_check() -> None:
    """The default config's trace took B as the largest it may be (1024): refused over n=600."""
    x = np.random.default_rng(17).standard_normal(600).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        for config, out in under_configs(tuned_blocks, (x, 0), backend, samples=2):
            np.testing.assert_array_equal(out, 2 * x, err_msg=str(config))
    with pytest.raises(td.TraceError, match="can give two of its programs the same elements"):
        tuned_blocks(x, 16)


@td.tile_kernel
def flat_heads(X, sb, sh, sm, BM: td.constexpr):
    """Liger's fused_neighborhood_attention stores through a flat view of (B, H, S, D) at
    `(bh // H) * sb + (bh % H) * sh + rows * sm + cols`, the strides int arguments."""
    B, H, S, D = X.shape
    Y = td.empty_like(X)
    Xf, Yf = X.view(-1), Y.view(-1)
    for bh, tm in td.grid(B * H, td.cdiv(S, BM)):
        rows = tm * BM + td.arange(0, BM)
        cols = td.arange(0, 32)
        mask = (rows[:, None] < S) & (cols[None, :] < D)
        offs = (bh // H) * sb + (bh % H) * sh + rows[:, None] * sm + cols[None, :]
        td.store(Yf, [offs], td.load(Xf, [offs], mask=mask) * 2.0, mask=mask)
    return Y


@td.tile_kernel
def unrolled_blocks(V, n_tokens, D, NB: td.constexpr):
    """Liger's attn_res backward: a store unrolled by td.static_range through a flat view."""
    out = td.empty_like(V)
    Vf, Of = V.view(-1), out.view(-1)
    for tok in td.grid(V.shape[1]):
        cols = td.arange(0, 64)
        for i in td.static_range(0, NB):
            off = i * n_tokens * D + tok * D
            td.store(Of, [off + cols], 2.0 * td.load(Vf, [off + cols], mask=cols < D),
                     mask=cols < D)
    return out


@td.tile_kernel
def column_halves(x, starts, overlap: td.constexpr, loaded: td.constexpr):
    """Liger's fused_moe up-projection: two stores into column halves of one output, with a
    grid dimension over column blocks; its rows the grid's, or loaded (a token block's start:
    the column dimension alone keeps the stores apart)."""
    m, n = x.shape
    out = td.empty((m, 2 * n), dtype=x.dtype)
    left, right = out[:, :n + overlap], out[:, n:]
    for p, pid_n in td.grid(td.cdiv(m, 16), td.cdiv(n + overlap, 16)):
        rows = (td.load(starts, [p]) if loaded else p * 16) + td.arange(0, 16)
        cols = pid_n * 16 + td.arange(0, 16)
        v = td.load(x, [rows[:, None], cols[None, :]],
                    mask=(rows[:, None] < m) & (cols[None, :] < n))
        td.store(left, [rows[:, None], cols[None, :]], v,
                 mask=(rows[:, None] < m) & (cols[None, :] < n + overlap))
        td.store(right, [rows[:, None], cols[None, :]], -v,
                 mask=(rows[:, None] < m) & (cols[None, :] < n))
    return out


@td.tile_kernel
def one_role(freq, E: td.constexpr, who: td.constexpr):
    """Liger's fused_moe prefix sums: the program `pid == E` (here `pid >= who`) runs an
    unrolled loop of stores that the others skip."""
    out = td.zeros((E + 1,), dtype=td.int32)
    for pid in td.grid(E + 2):
        if pid >= who:
            for start in td.static_range(0, E, 4):
                offs = start + td.arange(0, 4)
                f = td.load(freq, [offs], mask=offs < E, other=0)
                td.store(out, [offs], td.cumsum(f, 0) - f + pid, mask=offs < E)
    return out


def test_accesses_the_symbolic_check_cannot_follow_are_decided_by_their_elements() -> None:
    """Each program's elements computed for the trace's shapes (frontend/concrete.py); each
    kernel's racing variant stays refused."""
    X = np.random.default_rng(22).standard_normal((2, 3, 37, 24)).astype(np.float32)
    sb, sh, sm, _ = (s // 4 for s in X.strides)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(flat_heads.run(X, sb, sh, sm, 16, backend=backend), 2 * X)
    with pytest.raises(td.TraceError, match="can give two of its programs the same elements"):
        flat_heads(X, sb, sh - 24, sm, 16)  # heads one row apart: they overlap
    V = np.random.default_rng(23).standard_normal((3, 37, 45)).astype(np.float32)
    np.testing.assert_array_equal(unrolled_blocks(V, 37, 45, 3), 2 * V)
    x = np.random.default_rng(24).standard_normal((37, 32)).astype(np.float32)
    starts = np.arange(0, 37, 16, dtype=np.int32)
    for loaded in (False, True):
        np.testing.assert_array_equal(column_halves(x, starts, 0, loaded),
                                      np.concatenate([x, -x], 1))
        with pytest.raises(td.TraceError, match="may write elements that the store"):
            column_halves(x, starts, 1, loaded)  # the left half reaches the right's column 0
    f = np.array([3, 1, 4, 1, 5], np.int32)
    np.testing.assert_array_equal(one_role(f, 5, 6), [6, 9, 10, 14, 6, 0])
    with pytest.raises(td.TraceError, match="does not use grid dimension 'pid'"):
        one_role(f, 5, 5)  # two programs run the stores


@td.tile_kernel
def butterfly(x, stages: td.constexpr):
    """torchao's Hadamard butterfly: per stage, each program stores its row to scratch and
    loads its partner lanes (`d ^ stride`, which the symbolic check cannot follow)."""
    b, h, d = x.shape
    out, temp = td.empty_like(x), td.empty_like(x).view(-1)  # (torchao's: strided, flat)
    for pb, ph in td.grid(b, h):
        lanes = td.arange(0, d)
        base = pb * (h * d) + ph * d
        v = td.load(x, [pb, ph, lanes])
        for stage in td.static_range(stages):
            td.store(temp, [base + lanes], v)
            partner = td.load(temp, [base + (lanes ^ (1 << stage))])
            v = td.where((lanes & (1 << stage)) == 0, v + partner, partner - v)
        td.store(out, [pb, ph, lanes], v)
    return out


def test_an_access_compared_with_many_computes_its_elements_once(monkeypatch) -> None:
    """An unrolled loop's stores and loads compare pairwise (quadratic in the stages); each
    access's elements are computed once for all its pairs (concrete.py `_elements`), which
    took torchao's inverse Hadamard transform's trace from 131 s to 17 s."""
    from tiledsl.frontend import concrete
    made = []
    real = concrete._Evaluator.elements
    monkeypatch.setattr(concrete._Evaluator, "elements",
                        lambda self, *a: made.append(1) or real(self, *a))
    x = np.random.default_rng(25).standard_normal((3, 5, 8)).astype(np.float32)
    want = x.astype(np.float64) @ np.array([[(-1) ** bin(i & j).count("1") for j in range(8)]
                                             for i in range(8)])
    np.testing.assert_allclose(butterfly(x, 3), want, rtol=1e-6, atol=1e-5)
    assert 0 < len(made) <= 2 * 3  # the 3 stores and 3 loads (9 pairs: 18 without the memo)


@td.tile_kernel
def rest_zeroed(x, B: td.constexpr):
    """mamba's ddAcs kernel: a row's first part written by one loop, the rest zeroed by a
    second that goes on from the offset the first left; rows named through `//` and `-`."""
    n, m = x.shape
    out = td.empty_like(x)
    flat = out.view(-1)
    for pid in td.grid(n):
        half = pid // 2
        row = half * 2 + (pid - half * 2)
        lanes = td.arange(0, B)
        off = row * m + 1 + lanes
        td.store(flat, [row * m], td.load(x, [row, 0]))
        hi = (pid % 3 + 1) * B
        for s in range(0, hi, B):
            v = td.load(x, [row, 1 + s + lanes], mask=1 + s + lanes < m)
            td.store(flat, [off], v * 2, mask=1 + s + lanes < m)
            off += B
        for s in range(hi, m - 1, B):
            td.store(flat, [off], td.zeros((B,), x.dtype), mask=1 + s + lanes < m)
            off += B
    return out


@pytest.mark.parametrize("m", [21, 5])
def test_a_loop_going_on_from_where_another_left_is_apart(m: int) -> None:
    """The second loop's offsets start from the first's last (`first + amount * trips`,
    concrete.py `_exit`); at m=5 it runs no trip in any program (it touches nothing)."""
    x = np.random.default_rng(26).standard_normal((7, m)).astype(np.float32)
    want = np.zeros_like(x)
    want[:, 0] = x[:, 0]
    for p in range(7):
        want[p, 1:1 + 4 * (p % 3 + 1)] = 2 * x[p, 1:1 + 4 * (p % 3 + 1)]
    np.testing.assert_array_equal(rest_zeroed(x, 4), want)


@td.tile_kernel
def persistent_rows(X, P: td.constexpr, step: td.constexpr):
    """Liger's dyt: a grid over (column block, worker), each worker taking rows `range(worker,
    M, P)` through a flat view, the columns masked to the row."""
    M, N = X.shape
    Y = td.empty_like(X)
    Xf, Yf = X.view(-1), Y.view(-1)
    for pid0, worker in td.grid(td.cdiv(N, 16), P):
        col = pid0 * 16 + td.arange(0, 16)
        for row in range(worker, M, step):
            x = td.load(Xf, [row * N + col], mask=col < N)
            td.store(Yf, [row * N + col], 2.0 * x, mask=col < N)
    return Y


def test_a_counted_loop_s_trips_are_computed_too() -> None:
    X = np.random.default_rng(25).standard_normal((37, 45)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(persistent_rows.run(X, 4, 4, backend=backend), 2 * X)
    with pytest.raises(td.TraceError, match="can give two of its programs the same elements"):
        persistent_rows(X, 4, 3)  # worker 3's rows 3, 6, ... are worker 0's too


@td.tile_kernel
def cat_slots(a, b, out, BLOCK: td.constexpr, racing: td.constexpr):
    """FlagGems' cat: one program row per input slot; the third is a placeholder of size 0,
    so its index divides by 0 where its mask keeps no lane (`racing`: the placeholder writes
    one element in every program)."""
    post, size_out = a.shape[2], out.shape[1]

    def body(pid_x, x, dim_size_in, dim_offset, total):
        idx = pid_x * BLOCK + td.arange(0, BLOCK)
        mask = idx < total
        pre_idx = idx // (dim_size_in * post)
        dim_idx = (idx // post) % dim_size_in
        out_idx = pre_idx * size_out * post + (dim_idx + dim_offset) * post + idx % post
        td.store(out + out_idx, td.load(x + idx, mask=mask), mask=mask)

    for pid_x, pid_y in td.grid(td.cdiv(max(a.numel(), b.numel()), BLOCK), 3):
        if pid_y == 0:
            body(pid_x, a, a.shape[1], 0, a.numel())
        elif pid_y == 1:
            body(pid_x, b, b.shape[1], a.shape[1], b.numel())
        elif racing:
            td.store(out + 0, 1.0)
        else:
            body(pid_x, a, 0, 0, 0)
            td.store(out + td.arange(0, BLOCK), td.zeros((BLOCK,), td.float32),
                     mask=td.arange(0, BLOCK) < 0)


def test_a_store_that_keeps_no_lane_writes_nothing() -> None:
    """A mask false in every program's lanes (FlagGems' placeholder slots) touches nothing:
    the check once crashed on it (an empty element list), and refused its `// 0` index."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((3, n, 7)).astype(np.float32) for n in (5, 4))
    out = np.zeros((3, 9, 7), np.float32)
    cat_slots(a, b, out, 64, False)
    np.testing.assert_array_equal(out, np.concatenate([a, b], axis=1))
    with pytest.raises(td.TraceError, match="the same elements|writes too"):
        cat_slots(a, b, out, 64, True)


@td.tile_kernel
def recomputed_rows(x, BLOCK: td.constexpr, moved: td.constexpr):
    """FlagGems' flash attention recomputes `row_idx = row_start + tl.arange(0, BLOCK_M)` in
    its key loops: a carried value every trip leaves as it was, so the store after the loop
    indexes by the value from before it (`moved`: the loop changes it, which the check does
    not follow)."""
    n = x.shape[0]
    out = td.zeros_like(x)
    for pid in td.grid(td.cdiv(n, BLOCK)):
        row_idx = pid * BLOCK + td.arange(0, BLOCK)
        acc = td.zeros((BLOCK,), dtype=td.float32)
        for _ in td.range(0, 3):
            row_idx = pid * BLOCK + td.arange(0, BLOCK)
            if moved:
                row_idx = row_idx // 2
            acc += td.load(x + row_idx, mask=row_idx < n, other=0.0)
        td.store(out + row_idx, acc, mask=row_idx < n)
    return out


def test_a_value_a_loop_recomputes_unchanged_is_the_value_before_it() -> None:
    x = np.arange(37, dtype=np.float32)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(recomputed_rows.run(x, 16, 0, backend=backend), 3 * x)
    with pytest.raises(td.TraceError, match="a loop carries"):
        recomputed_rows(x, 16, 1)


@td.tile_kernel
def expert_starts(cnt, start, out, only_first: bool):
    """SGLang's ep_scatter_1: every program writes the same exclusive cumsum, then reads back
    its own expert's start (with `only_first`, one program writes and the others read)."""
    for e in td.grid(cnt.shape[0]):
        o = td.arange(0, 4)
        c = td.load(cnt + o)
        if only_first:
            if e == 0:
                td.store(start + o, td.cumsum(c) - c)
        else:
            td.store(start + o, td.cumsum(c) - c)
        td.store(out + e, td.load(start + e))


def test_a_store_every_program_makes_alike_may_be_read_back() -> None:
    cnt = np.array([3, 1, 4, 1], np.int32)
    for backend in ("numpy", "triton-interpret"):
        start, out = np.zeros(4, np.int32), np.zeros(4, np.int32)
        expert_starts.run(cnt, start, out, False, backend=backend)
        np.testing.assert_array_equal(out, [0, 3, 4, 8])
    with pytest.raises(td.TraceError, match="may read elements that the store at line"):
        expert_starts(cnt, np.zeros(4, np.int32), np.zeros(4, np.int32), True)


@td.tile_kernel
def paged_rows(lens, out, W: td.constexpr, B: td.constexpr):
    """SGLang's flashmla kv indices: blocks of B lanes past a row of W, kept in the row only by
    a mask on each row's loaded length."""
    for pid, i in td.grid(lens.shape[0], 3):
        n = td.load(lens + pid)
        offs = td.arange(0, B) + i * B
        td.store(out + pid * W + offs, offs, mask=offs < n)  # <- here


def test_a_store_bounded_by_a_loaded_count_names_the_load() -> None:
    err = trace_error(td.TraceError, paged_rows, np.array([3, 5], np.int32),
                      np.zeros(40, np.int32), 8, 4)
    assert "from values loaded from memory (a count or offset the caller passes" in msg(err)
    assert "disjoint=True" in err.hint


@td.tile_kernel
def two_halves(x, rows, out):
    """Two stores at a loaded row that overlap in their middle lanes."""
    for i in td.grid(rows.shape[0]):
        r = td.load(rows + i)
        offs = td.arange(0, 8)
        td.store(out + r * 12 + offs, td.load(x + i * 8 + offs))
        td.store(out + r * 12 + 4 + offs, td.load(x + i * 8 + offs))  # <- here


def test_two_stores_at_loaded_offsets_that_may_meet_hint_the_word() -> None:
    err = trace_error(td.TraceError, two_halves, f32(3, 8), np.array([2, 0, 1], np.int32),
                      np.zeros(36, np.float32))
    assert "may write elements that the store at line" in msg(err)
    assert "disjoint=True" in err.hint
