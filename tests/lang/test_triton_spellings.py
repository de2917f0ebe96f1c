"""Triton's and torch's spellings that ported kernels keep: module constants made with
`td.constexpr` (Liger's casting modes), the builtins `min`/`max` on runtime scalars,
`td.range` (tl.range), reductions with `dim=`/`keepdim=`, `v.size(d)`, and `tl.dot` into a
zeros accumulator outside any loop."""

from __future__ import annotations

import numpy as np
import pytest
from support import gpu_backend, run_on

import tiledsl as td

BACKENDS = ["numpy", "triton-interpret", gpu_backend()]
MODE_DOUBLE = td.constexpr(1)  # as Liger writes `_CASTING_MODE_LLAMA = tl.constexpr(0)`
SCALE = td.constexpr(0.5)


@td.tile_kernel
def spellings(x, mode: td.constexpr, group: td.constexpr):
    m, n = x.shape
    out = td.empty((m,), dtype=td.float32)
    kept = td.empty((m, 1), dtype=td.float32)
    for r in td.grid(m):
        v = x[r, :]
        if mode == MODE_DOUBLE:  # a constexpr compares as its value
            v = v * 2.0
        width = min(m - r, group)  # the builtin on a runtime scalar: td.minimum
        total = 0.0
        for c in td.range(1, n, num_stages=2):  # a loop in the Triton code, not unrolled
            total += x[r, c]
        out[r] = v.sum(dim=0) * SCALE + width + max(total, 0.0)
    for tm in td.tile(m):
        w = x[tm, :]
        kept[tm, :] = w.view(w.size(0), n).mean(dim=1, keepdim=True)
    return out, kept


def _expected(x: np.ndarray, mode: int, group: int) -> tuple[np.ndarray, np.ndarray]:
    x64 = x.astype(np.float64)
    v = x64 * 2.0 if mode == 1 else x64
    rows = np.arange(x.shape[0])
    out = v.sum(1) * 0.5 + np.minimum(x.shape[0] - rows, group) + np.maximum(x64[:, 1:].sum(1), 0)
    return out, x64.mean(1, keepdims=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", [0, 1])
def test_ported_spellings_compute_as_written(backend: str, mode: int) -> None:
    x = np.random.default_rng(0).standard_normal((7, 13)).astype(np.float32)
    out, kept = run_on(spellings, (x, mode, 3), backend)
    expected, mean = _expected(x, mode, 3)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kept, mean, rtol=1e-5, atol=1e-6)


def test_td_range_over_ints_is_a_loop() -> None:
    src = spellings.source(np.ones((7, 13), np.float32), 1, 3, target="triton")
    assert "for c_iter in range(" in src and "tl.minimum(" in src


@td.tile_kernel
def one_block_dot(a, b):
    out = td.empty((a.shape[0], b.shape[1]), dtype=td.float32)
    for i in td.grid(1):
        acc = td.zeros((a.shape[0], b.shape[1]), dtype=td.float32)
        acc = td.dot(a[:, :], b[:, :], acc=acc, allow_tf32=False)  # no loop: acc's a scalar
        out[:, :] = acc
    return out


def test_a_dot_into_zeros_outside_a_loop() -> None:
    """The accumulator is written as the scalar 0.0, which tl.dot cannot take as its acc."""
    pytest.importorskip("triton")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 16, 16)).astype(np.float32)
    out = one_block_dot.run(a, b, backend="triton-interpret")
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert one_block_dot.compile(a, b, arch="sm_90")[0].registers > 0
    assert 'input_precision="ieee"' in one_block_dot.source(a, b, target="triton")


@td.tile_kernel
def transposed_dots(a, b):
    """Triton before 2.1's `tl.dot(q, k, trans_b=True)` (flash-attn's flash_attn_triton.py)."""
    out = td.empty((a.shape[1], b.shape[0]), dtype=td.float32)
    for i in td.grid(1):
        out[:, :] = td.dot(a[:, :], b[:, :], trans_a=True, trans_b=True)
    return out


def test_dot_of_transposed_operands_spelled_as_triton_before_2_1() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((8, 16))
    np.testing.assert_allclose(transposed_dots(a, b.astype(np.float32)),
                               a.T.astype(np.float64) @ b.T, rtol=1e-5, atol=1e-5)


def test_constexpr_computes_as_its_value() -> None:
    c = td.constexpr(3)
    assert (c == 3, c + 1, 1 + c, c * 2.0, -c, 7 // c, 2 ** c) == (True, 4, 4, 6.0, -3, 2, 8)
    assert not td.constexpr(0) and hash(c) == hash(3)


def test_unknown_keywords_are_errors() -> None:
    @td.tile_kernel
    def bad(x):
        out = td.empty_like(x)
        for r in td.grid(x.shape[0]):
            out[r] = x[r, :].sum(dims=0)
        return out

    with pytest.raises(td.TraceError, match="unexpected keyword argument 'dims'"):
        bad(np.ones((2, 3), np.float32))


@td.tile_kernel
def optional_tensor(x, y, beta: float):
    """Helion's `if beta != 0.0 and y is not None`: the compile-time operand decides."""
    out = td.zeros_like(x)
    for t in td.tile(x.shape[0]):
        v = x[t].float()
        if beta != 0.0 and y is not None:
            v = v + beta * y[t]
        if y is None or beta > 1.0:
            v = td.amax(v[:, None], dim=1) * 2
        out[t] = v
    return out


def test_a_runtime_and_with_a_compile_time_operand() -> None:
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(optional_tensor(x, x, 0.5), x + 0.5 * x)
    np.testing.assert_array_equal(optional_tensor(x, x, 2.0), (x + 2 * x) * 2)
    np.testing.assert_array_equal(optional_tensor(x, None, 2.0), x * 2)


@td.tile_kernel
def triton_names(x, block: td.constexpr):
    """Triton's hints and small shape functions, and torch's `dim=` and `.t()`, kept as a
    ported body writes them."""
    m, n = x.shape
    td.static_assert(block == n, "one block holds a row")
    out = td.empty((n, m), x.dtype)
    ranked = td.empty((m, n), td.int32)
    for r in td.grid(m):
        cols = td.max_contiguous(td.multiple_of(td.arange(0, block), block), block)
        row = td.ravel(td.expand_dims(td.load(x, [r, cols]), 0))
        ranked[r, :] = td.argsort(row, dim=0)
        td.debug_barrier()
    for tm, tn in td.tile(m, n):
        xt, nought = td.broadcast(td.trans(x[tm, tn]), td.zeros((1, 1), x.dtype))
        out[tn, tm] = xt + x[tm, tn].t() + nought * td.broadcast_to(td.ones((1, tm), x.dtype),
                                                                      xt.shape)
    squashed = td.empty((m, n), x.dtype)
    for tm, tn in td.tile(m, n):  # tl.cast, ptr.dtype.element_ty, libdevice's tanh
        v = td.cast(td.math.tanh(x[tm, tn]), td.float16)
        squashed[tm, tn] = td.cast(v, squashed.dtype.element_ty) + td.cast(
            td.cast(v, td.int16, bitcast=True) & 0, td.float32)
    return out, ranked, squashed


@pytest.mark.parametrize("backend", BACKENDS)
def test_triton_hints_and_shape_names(backend: str) -> None:
    x = np.random.default_rng(6).standard_normal((5, 8)).astype(np.float32)
    out, ranked, squashed = run_on(triton_names, (x, 8), backend)
    np.testing.assert_array_equal(out, 2 * x.T)
    np.testing.assert_array_equal(ranked, np.argsort(x, axis=1, kind="stable"))
    td.testing.assert_close(squashed, np.tanh(x.astype(np.float64)), np.float16)


def test_triton_names_without_a_counterpart_say_what_to_write() -> None:
    @td.tile_kernel
    def by_program_id(x):
        pid = td.program_id(0)
        x[pid] = 0.0

    with pytest.raises(td.TraceError, match=r"for pid in td\.grid\(n_programs\)"):
        by_program_id(np.ones(4, np.float32))
    with pytest.raises(td.TraceError, match="td.static_assert failed: one block holds a row"):
        triton_names(np.ones((2, 8), np.float32), 16)
    assert td.math.fma is td.fma and td.math.exp2 is td.exp2  # tl.math's names
    with pytest.raises(AttributeError, match="td.math has no 'cyl_bessel_i0'"):
        td.math.cyl_bessel_i0
    assert td.math.tanh is td.tanh  # libdevice's names too
    with pytest.raises(AttributeError, match=r"did you mean td\.barrier"):
        td.barier
    with pytest.raises(td.DTypeError, match="Triton's modes are 'rtne' and 'rtz'"):
        run_on(td.tile_kernel(_cast_rtna), (np.ones(3, np.float32),), "numpy")


def _cast_rtna(x):
    for t in td.tile(x.shape[0]):
        x[t] = td.cast(x[t], td.float16, fp_downcast_rounding="rtna")


@td.tile_kernel
def k_loop(a, b, rolled: td.constexpr):
    """Triton's matmul K loop, `for k in range(cdiv(K, BK))` over a K from the shapes."""
    out = td.empty((a.shape[0], b.shape[1]), td.float32)
    for tm in td.tile(a.shape[0]):
        acc = td.zeros((tm, b.shape[1]), td.float32)
        trips = td.cdiv(a.shape[1], 16)
        for k in (td.range(0, trips) if rolled == 1 else td.static_range(trips) if rolled == 2
                  else range(0, trips)):
            cols = k * 16 + td.arange(0, 16)
            acc += td.load(a, [tm.index[:, None], cols[None, :]], mask=cols[None, :] < a.shape[1]) \
                @ td.load(b, [cols[:, None], td.arange(0, 16)[None, :]], mask=cols[:, None] < a.shape[1])
        out[tm, :] = acc
    return out


def test_a_long_unrolled_range_warns() -> None:
    """A Python range inside the grid unrolls; past 16 trips that warns and names td.range,
    which keeps the loop (td.static_range says the unrolling is meant)."""
    a = np.random.default_rng(14).standard_normal((16, 300)).astype(np.float32)
    b = np.random.default_rng(15).standard_normal((300, 16)).astype(np.float32)
    with pytest.warns(td.TileDSLWarning, match=r"unrolled 19 times .* td\.range") as w:
        unrolled = k_loop(a, b, 0)
    assert "test_triton_spellings.py" in w[0].filename
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", td.TileDSLWarning)
        for rolled in (1, 2):
            np.testing.assert_allclose(k_loop(a, b, rolled), unrolled, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(unrolled, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


@td.tile_kernel
def scaled_rows(X, Alpha):
    """Liger's `alpha = tl.load(alpha_ptr)`: a scalar pointer's element; FlagGems' trace
    writes one with `tl.store(out_ptr, v)`."""
    out = td.empty_like(X)
    total = td.empty((1,), dtype=td.float32)
    for r in td.grid(X.shape[0]):
        out[r, :] = X[r, :] * td.load(Alpha).to(td.float32)
    for _ in td.grid(1):
        td.store(total, td.sum(X[0, :]))
    return out, total


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_load_or_store_with_no_index_reaches_a_one_element_tensor(backend: str) -> None:
    x = np.random.default_rng(20).standard_normal((5, 7)).astype(np.float32)
    out, total = run_on(scaled_rows, (x, np.array([0.5], np.float32)), backend)
    np.testing.assert_array_equal(out, x * 0.5)
    td.testing.assert_close(total, x[:1].sum(1), np.float32)
    if backend == "numpy":
        out, _ = scaled_rows(x, np.array([0.5, 2.0], np.float32))  # a pointer's first
        np.testing.assert_array_equal(out, x * 0.5)
        out, _ = scaled_rows(x, np.float32(0.5))  # a 0-d argument: the load is its value
        np.testing.assert_array_equal(out, x * 0.5)  # (Liger's poly_norm bias)



@td.tile_kernel
def sum_into(x, out):
    """FlagGems' `sum(x, out=torch.empty(()))`: a 0-d array argument the body writes is memory
    (a 0-d tensor), one it only reads a runtime scalar."""
    out.zero_()
    for r in td.grid(x.shape[0]):
        td.atomic_add(out, td.sum(x[r, :]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_0d_array_argument_the_body_writes_is_memory(backend: str) -> None:
    x = np.random.default_rng(21).standard_normal((5, 7)).astype(np.float32)
    out = np.array(7.0, np.float32)
    assert run_on(sum_into, (x, out), backend) is None
    td.testing.assert_close(out, x.astype(np.float64).sum(), np.float32)
    if backend == "numpy":
        with pytest.raises(td.ArgumentError, match="'out' is written by the kernel"):
            sum_into(x, np.float32(0.0))  # a NumPy scalar is no memory

        @td.tile_kernel
        def fill_from(x, value):  # FlagGems' fill_tensor: the value's address, its strides
            assert value.stride() == () and value.data_ptr() % 16 == 0
            out = td.empty_like(x)
            for r in td.grid(x.shape[0]):
                out[r, :] = x[r, :] * 0 + td.load(value)
            return out

        np.testing.assert_array_equal(fill_from(x, np.array(1.5, np.float32)), x * 0 + 1.5)

        @td.tile_kernel
        def into_computed(x):
            for _ in td.grid(1):
                total = td.sum(x[0, :])
                td.store(total, total)

        with pytest.raises(td.TraceError, match="takes a tensor argument") as e:
            into_computed(x)
        assert "not memory" in e.value.hint


@td.tile_kernel
def flag_gems_spellings(x, counts):
    """FlagGems' argmax, count_nonzero and isin: `tl.max(..., return_indices=True)`,
    `inp.type.element_ty`, dtype predicates (`is_int()` a method, as td's `is_int` is a
    property), `tl.int1` and `tl.atomic_add(ptr, v)`."""
    m, n = x.shape
    top = td.empty((m,), dtype=x.type.element_ty)
    where = td.empty((m,), dtype=td.int32)
    for r in td.grid(m):
        v = x[r, :]
        if x.dtype.is_floating() and not x.dtype.is_fp16() and not x.dtype.is_int():
            best, at = td.max(v, axis=0, return_indices=True)
        else:
            best, at = td.min(v, axis=0, return_indices=True)
        top[r] = best
        where[r] = at
        td.atomic_add(counts, td.sum((v > 0).to(td.int1).to(td.int32), axis=0))
    return top, where


def test_flag_gems_spellings() -> None:
    x = np.random.default_rng(29).standard_normal((5, 37)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        counts = np.zeros(1, np.int32)
        top, where = flag_gems_spellings.run(x, counts, backend=backend)
        np.testing.assert_array_equal(top, x.max(1))
        np.testing.assert_array_equal(where, x.argmax(1))
        assert counts[0] == (x > 0).sum()


_MAX_INT8_VAL = td.constexpr(127)  # a module's constant, as FlagGems and Liger write them


@td.tile_kernel
def bit_spellings(x, out, BLOCK: td.constexpr):
    """FlagGems' bitonic sort and dropout: `x.to(dtype, bitcast=True)`, `x.numel`,
    `dtype.primitive_bitwidth`, `tl.where` on an int condition, a module constexpr as other=."""
    for _ in td.grid(1):
        cols = td.arange(0, BLOCK)
        v = td.load(x, [cols], mask=cols < x.shape[0], other=_MAX_INT8_VAL)
        bits = v.to(td.uint8, bitcast=True)
        td.static_assert(v.numel == BLOCK and v.numel() == BLOCK)
        td.static_assert(v.dtype.primitive_bitwidth == 8)
        td.store(out, [cols], td.where(bits & 1, v, 0))


def test_bit_spellings() -> None:
    x = np.arange(-3, 3, dtype=np.int8)
    for backend in ("numpy", "triton-interpret"):
        out = np.zeros(8, np.int8)
        bit_spellings.run(x, out, 8, backend=backend)
        full = np.concatenate([x, [127, 127]]).astype(np.int8)
        np.testing.assert_array_equal(out, np.where(full.view(np.uint8) & 1, full, 0))


@td.tile_kernel
def strided_rows(x, programs: td.constexpr, BLOCK: td.constexpr, short: td.constexpr = 0):
    """FlagGems' and Liger's persistent row loops, a row's lanes masked: `for row in
    range(pid, n_rows, tl.num_programs(0))` (a step `short` of the grid lets programs meet).
    The race check saw the mask as an index when it looked again after the loop."""
    n_rows, n_cols = x.shape
    for pid in td.grid(programs):
        for row in range(pid, n_rows, td.num_programs(0) - short):
            cols = td.arange(0, BLOCK)
            v = td.load(x, [row, cols], mask=cols < n_cols)
            td.store(x, [row, cols], v * 2.0, mask=cols < n_cols)


def test_num_programs_is_the_grid_s_size() -> None:
    x = np.random.default_rng(31).standard_normal((13, 7)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        y = x.copy()
        strided_rows.run(y, 4, 8, backend=backend)
        np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(td.TraceError, match="in another program of the grid"):
        strided_rows(x.copy(), 4, 8, 1)

    @td.tile_kernel
    def outside(x):
        n = td.num_programs(0)
        for t in td.tile(n):
            x[t] = 0.0

    with pytest.raises(td.TraceError, match="td.num_programs\\(\\) is called outside a grid"):
        outside(x)


def get_dtype_min(dtype):
    """FlagGems' utils: `dtype.value` unwraps a constexpr dtype."""
    dtype_ = dtype.value
    return -3.4e38 if dtype_.is_floating() else -2**31


@td.tile_kernel
def amax_rows(inp, dim: td.constexpr, BLOCK: td.constexpr):
    """FlagGems' amax over `dim` of a 3-D tensor, its pointer strides from `x.stride()` (those
    of a host view of the input too), `keep_dims=` and `out.squeeze(dim=...)`."""
    view = inp.transpose(dim, 2)  # the reduced dimension last, as dim_compress moves it
    s = view.stride()
    a, b, n = view.shape
    out = td.empty((a, b, 1) if dim == 2 else (a, 1, b), dtype=inp.dtype)
    assert inp.dim() == 3 and inp.is_contiguous() and view.is_contiguous() == (dim == 2)
    assert inp.element_size() == inp.itemsize == inp.dtype.itemsize == 4
    flat = out.squeeze(dim=(2, 1) if dim == 2 else 1)
    row_stride = flat.stride(0).to(td.int64)  # FlagGems' `x.stride(0).to(tl.int64)`
    for i, j in td.grid(a, b):
        cols = td.arange(0, BLOCK)
        v = td.load(inp + i * s[0] + j * s[1] + cols * s[2], mask=cols < n,
                    other=get_dtype_min(inp.dtype))
        m = td.max(v[None, :], axis=1, keep_dims=True)
        td.store(flat + i * row_stride + j * flat.stride(1) + td.arange(0, 1)[:, None], m)
    return out


def test_flag_gems_host_strides_and_squeeze() -> None:
    x = np.random.default_rng(37).standard_normal((4, 5, 6)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        for dim in (1, 2):
            out = amax_rows.run(x, dim, 8, backend=backend)
            np.testing.assert_array_equal(out, x.max(axis=dim, keepdims=True))


@td.tile_kernel
def flag_gems_math_names(seed, n: td.constexpr, BLOCK: td.constexpr):
    """FlagGems' randn, isclose and silu spellings: tl.pair_uniform_to_normal on
    uint_to_uniform_float words, libdevice's finitef and rint, tl.fdiv and tl.math.div_rn,
    tl.range(..., step=) and tl.static_range(n, step=)."""
    z = td.empty((2, n), td.float32)
    f = td.empty((n,), td.bool_)
    q = td.empty((n,), td.float32)
    for _ in td.grid(1):
        offs = td.arange(0, BLOCK)
        w = td.randint4x(seed, offs)
        a, b = td.pair_uniform_to_normal(td.uint_to_uniform_float(w[0]),
                                         td.uint_to_uniform_float(w[1]))
        td.store(z + offs, a, mask=offs < n)
        td.store(z + n + offs, b, mask=offs < n)
        v = td.where(offs % 3 == 0, float("inf"), offs.to(td.float32))
        td.store(f + offs, td.math.finitef(v) & td.isfinite(v), mask=offs < n)
        acc = td.zeros((BLOCK,), td.float32)
        for _j in td.range(0, BLOCK, step=BLOCK // 2):
            acc += td.fdiv(offs, 4)
        for _j in td.static_range(4, step=2):
            acc += td.math.div_rn(offs.to(td.float32), 2.0)
        td.store(q + offs, acc + td.math.rint(offs * 0.5), mask=offs < n)
    return z, f, q


def test_flag_gems_math_names() -> None:
    normals = np.stack(td.philox.normal(*(td.philox.uniform(w) for w in
                                          td.philox.words(5, np.arange(37))[:2])))
    for backend in ("numpy", "triton-interpret"):
        z, f, q = flag_gems_math_names.run(5, 37, 64, backend=backend)
        np.testing.assert_allclose(z, normals, rtol=1e-6, atol=1e-6)  # td.randn's, on the CPU
        np.testing.assert_array_equal(f, np.arange(37) % 3 != 0)
        np.testing.assert_array_equal(q, np.arange(37) * 1.5 + np.rint(np.arange(37) * 0.5))
    assert td.float8e5 is td.float8_e5m2 and td.float8e4nv is td.float8_e4m3fn


def test_a_triton_call_on_the_grid_line_does_not_hide_the_body_s_error() -> None:
    """Host code may call triton.cdiv on the grid's line; an error in the body is its own
    (it was reported as "triton.cdiv is a Triton function" at the grid line)."""
    triton = pytest.importorskip("triton")

    @td.tile_kernel
    def block_pointers(x, BLOCK: td.constexpr):
        out = td.zeros_like(x)
        for pid in td.grid(triton.cdiv(x.shape[0], BLOCK)):
            p = td.make_block_ptr(base=x, shape=x.shape, strides=(1,), offsets=(pid * BLOCK,),
                                  block_shape=(BLOCK,), order=(0,))
            td.store(out + pid * BLOCK + td.arange(0, BLOCK), td.load(p))
        return out

    with pytest.raises(td.OutOfBoundsError, match="index 37 is out of bounds") as e:
        block_pointers(np.ones(37, np.float32), 16)  # (no boundary_check: lanes past the end)
    assert e.value.loc.source_line().startswith("td.store(out + pid * BLOCK")


@td.tile_kernel
def zero_d_cast(x):
    """FlagGems' dot: `out = torch.empty([])`, then `out.to(x.dtype)` in host code."""
    out = td.empty([], dtype=td.float32)
    for _ in td.grid(1):
        td.store(out, td.sum(td.load(x + td.arange(0, 8)).to(td.float32)))
    return out.to(x.dtype)


def test_a_zero_d_host_cast() -> None:
    x = np.arange(8, dtype=np.float16)
    for backend in ("numpy", "triton-interpret"):
        out = zero_d_cast.run(x, backend=backend)
        assert out.shape == () and out.dtype == np.float16 and out == 28


@td.tile_kernel
def flag_gems_host_idioms(x, dim, rtol, atol, start, end):
    """FlagGems' wrappers, now host code: `isinstance(dim, int)` of an int argument,
    `float(end) - float(start)`, `(rtol == 0) and (atol == 0)` on arguments, and
    torch.finfo / torch.result_type on the kernel's dtypes (a td dtype to torch's names)."""
    if isinstance(dim, int):
        dim = [dim]
    dim = [d % x.ndim for d in dim]
    zero_tol = (rtol == 0) and (atol == 0)
    span = float(end) - float(start)
    big = td.finfo(x.dtype).max
    out = td.empty(x.shape, dtype=td.result_type(x, 1.0))
    for tm in td.tile(x.shape[0]):
        v = x[tm, :]
        out[tm, :] = td.where(zero_tol, v, td.minimum(v * span, big)) + dim[0]
    return out


def test_flag_gems_host_idioms() -> None:
    x = np.random.default_rng(41).standard_normal((5, 6)).astype(np.float16)
    for backend in ("numpy", "triton-interpret"):
        same = flag_gems_host_idioms.run(x, -1, 0.0, 0.0, 1, 3, backend=backend)
        np.testing.assert_array_equal(same, x + 1)
        scaled = flag_gems_host_idioms.run(x, 0, 0.1, 0.0, 1.0, 3.5, backend=backend)
        td.testing.assert_close(scaled, x.astype(np.float64) * 2.5, np.float16)
    assert td.iinfo(td.int8).max == 127 and td.finfo(td.bfloat16).bits == 16


@td.tile_kernel
def masked_rows(logits, indices=None):
    """xgrammar's apply_token_bitmask_inplace wrapper: rows from `indices` when it is a
    tensor (`isinstance(indices, torch.Tensor)` of the kernel's tensor is True), else all."""
    import torch
    if isinstance(indices, list) or isinstance(indices, torch.Tensor):
        num_rows = indices.shape[0]
    else:
        num_rows = logits.shape[0]
    for r in td.grid(num_rows):
        row = td.load(indices + r) if indices is not None else r
        logits[row, :] = -float("inf")


def test_a_kernel_tensor_is_a_torch_tensor_to_isinstance() -> None:
    pytest.importorskip("torch")
    logits = np.random.default_rng(42).standard_normal((5, 7)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        got = logits.copy()
        masked_rows.run(got, np.array([3, 0], np.int32), backend=backend)
        want = logits.copy()
        want[[3, 0]] = -np.inf
        np.testing.assert_array_equal(got, want)


@td.constexpr
def accum_type(dt):
    """FlagGems' `@tl.constexpr def get_scan_accum_type(...)`: a helper run while tracing."""
    return td.float32 if (dt.is_fp16() or dt.is_bf16()) else dt


@td.tile_kernel
def flash_prologue(x, is_causal, wl, wr, BLOCK: td.constexpr):
    """FlagGems' flash_api prologue on int arguments, `and` of a runtime test and a Python
    comparison; a constexpr-decorated helper in the grid."""
    if is_causal:
        wr = 0
    is_causal = wl < 0 and wr == 0
    out = td.empty(x.shape, dtype=td.float32)
    for pid in td.grid(td.cdiv(x.shape[0], BLOCK)):
        offs = pid * BLOCK + td.arange(0, BLOCK)
        acc_dtype: td.constexpr = accum_type(x.type.element_ty)
        v = td.load(x + offs, mask=offs < x.shape[0]).to(acc_dtype)
        td.store(out + offs, v + td.where(is_causal, 1.0, 0.0), mask=offs < x.shape[0])
    return out


def test_flag_gems_prologue_and_constexpr_helpers() -> None:
    x = np.arange(37, dtype=np.float16)
    for backend in ("numpy", "triton-interpret"):
        for causal, wl, wr, plus in ((True, -1, -1, 1), (False, -1, -1, 0), (True, 3, 2, 0)):
            out = flash_prologue.run(x, causal, wl, wr, 16, backend=backend)
            assert out.dtype == np.float32
            np.testing.assert_array_equal(out, x.astype(np.float32) + plus)


@td.tile_kernel
def halved_transpose(x):
    """torchao's spellings: `y.trans(1, 0)` on a tile and `tl.div_rn` at the top level."""
    out = td.empty_like(x)
    for pid in td.grid(1):
        o = td.arange(0, 4)
        v = td.load(x + o[:, None] * 4 + o[None, :])
        td.store(out + o[:, None] * 4 + o[None, :], td.div_rn(v.trans(1, 0), 3.0))
    return out


def test_tile_trans_method_div_rn_and_a_scalar_indexed_as_a_vector() -> None:
    x = np.random.default_rng(43).standard_normal((4, 4)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_allclose(halved_transpose.run(x, backend=backend), x.T / 3,
                                   rtol=1e-6)

    @td.tile_kernel
    def program_id_as_vector(s):
        for pid in td.grid(2):
            td.store(s + pid[:, None], 1.0)

    with pytest.raises(td.ShapeError, match="too many indices for a 0-D tile") as err:
        program_id_as_vector(np.zeros(4, np.float32))
    assert "a scalar (a program id" in err.value.hint
    torch = pytest.importorskip("torch")

    @td.tile_kernel
    def unknown_view(x):
        return x.view(torch.float8_e4m3fnuz)

    with pytest.raises(td.DTypeError, match="tiledsl has no dtype torch.float8_e4m3fnuz"):
        unknown_view(np.zeros(4, np.uint8))


@td.constexpr_function
def _twice(n):  # type: ignore[no-untyped-def]
    return 2 * n


@td.tile_kernel
def library(x, k, BLOCK: td.constexpr):
    """Triton's standard library as kernels call it: interleave, cat, flip, xor_sum, umulhi,
    swizzle2d, histogram, view, sqrt_rn, and the compile-time assume / static_print /
    constexpr_function."""
    n = x.shape[0]
    out = td.empty((7, _twice(BLOCK)), dtype=td.float32)
    ints = td.empty((4, BLOCK), dtype=td.int32)
    for pid in td.grid(1):
        td.static_print("tracing library with BLOCK", BLOCK)
        td.assume(n > 0)
        lanes = td.arange(0, BLOCK)
        a = td.load(x + lanes, mask=lanes < n, other=0.0)
        b = a * 10.0
        out[0, :] = td.interleave(a, b)
        out[1, :] = td.cat(a, b, can_reorder=True)
        out[2, :] = td.cat(td.flip(a), td.flip(b, 0), can_reorder=True)
        out[3, :] = td.view(td.join(a, b), _twice(BLOCK))
        out[4, :] = td.cat(td.sqrt_rn(td.abs(a)), b, can_reorder=True)
        i, j = td.swizzle2d(lanes // 4, lanes % 4, BLOCK // 4, 4, 3)
        out[5, :] = td.cat(i.to(td.float32), j.to(td.float32), can_reorder=True)
        bits = (lanes * 40503 + 977) % 65536 + k
        ints[0, :] = td.full((BLOCK,), 0, td.int32) + td.xor_sum(bits, 0)
        ints[1, :] = td.umulhi(bits * 40503, (bits + 7) * 65599)
        ints[2, :] = td.umulhi(bits.to(td.uint32) * 40503, bits.to(td.uint32) + 7).to(td.int32)
        out[6, :] = td.cat(a, a, can_reorder=True)
        ints[3, :] = td.histogram(bits % 20 - 2, BLOCK, mask=lanes < n)  # -2..17: some outside
    return out, ints


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_tritons_library_functions(backend: str) -> None:
    x = np.random.default_rng(82).standard_normal(13).astype(np.float32)
    out, ints = library.run(x, 11, 16, backend=backend)
    a = np.zeros(16)
    a[:13] = x
    b = a * 10
    np.testing.assert_allclose(out[0], np.stack([a, b], -1).reshape(-1), rtol=1e-6)
    np.testing.assert_allclose(out[1], np.concatenate([a, b]), rtol=1e-6)
    np.testing.assert_allclose(out[2], np.concatenate([a[::-1], b[::-1]]), rtol=1e-6)
    np.testing.assert_allclose(out[3], out[0], rtol=1e-6)
    np.testing.assert_allclose(out[4][:16], np.sqrt(np.abs(a)), rtol=1e-6)
    ij = np.arange(16)
    ii, jj = ij // 4, ij % 4  # Triton's swizzle2d, in NumPy
    lin = ii * 4 + jj
    gid, size_g = lin // 12, np.minimum(4 - lin // 12 * 3, 3)
    np.testing.assert_array_equal(out[5], np.concatenate([gid * 3 + lin % 12 % size_g,
                                                          lin % 12 // size_g]))
    bits = (np.arange(16, dtype=np.int64) * 40503 + 977) % 65536 + 11
    assert (ints[0] == np.bitwise_xor.reduce(bits.astype(np.int32))).all()
    s32 = lambda v: ((v + 2**31) % 2**32 - 2**31).astype(np.int64)  # noqa: E731
    want = (s32(bits * 40503) * s32((bits + 7) * 65599)) >> 32
    np.testing.assert_array_equal(ints[1], s32(want))
    want_u = ((bits * 40503) % 2**32) * (bits + 7) >> 32
    np.testing.assert_array_equal(ints[2], s32(want_u))
    values = (bits % 20 - 2)[:13]
    np.testing.assert_array_equal(ints[3], np.bincount(values[values >= 0], minlength=20)[:16])


@td.tile_kernel
def gathered(x, idx, axis: int):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm in td.tile(m):  # ragged rows: the masked lanes' indices are never used
        out[tm, :] = td.gather(x[tm, :], idx[tm, :], axis)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial"])
def test_tl_gather_within_a_tile(backend: str) -> None:
    rng = np.random.default_rng(83)
    x = rng.standard_normal((37, 16)).astype(np.float32)
    idx = rng.integers(0, 16, (37, 16)).astype(np.int32)
    np.testing.assert_array_equal(gathered.run(x, idx, 1, backend=backend),
                                  np.take_along_axis(x, idx, 1))
    rows = rng.integers(0, 16, (16, 16)).astype(np.int64)  # one tile of 16 rows: axis 0
    cfg = td.Config(block_sizes=(16,))
    np.testing.assert_array_equal(gathered.run(x[:16], rows, 0, backend=backend, config=cfg),
                                  np.take_along_axis(x[:16], rows, 0))


def test_tl_gather_refuses_an_index_outside_the_axis() -> None:
    x = np.ones((8, 16), np.float32)
    idx = np.zeros((8, 16), np.int32)
    idx[5, 3] = 16
    with pytest.raises(td.OutOfBoundsError, match="index 16 is out of range for an axis of 16"):
        gathered(x, idx, 1)


@td.tile_kernel
def flag_gems_pointwise_idioms(x, y, reduction, weight):
    """FlagGems' pointwise wrappers: torch's tensor predicates, `is_non_overlapping_and_dense`
    of a view, `if <int or float argument>: return`, `cumsum(axis=)`; in the body,
    `x.type.scalar` and `.logical_and` / `.logical_or`."""
    import torch
    assert x.is_floating_point() and not y.is_floating_point() and x.is_cuda
    assert x.layout == torch.strided and not x.is_quantized and not x.is_complex()
    assert torch.ops.aten.is_non_overlapping_and_dense(x.T)
    assert not torch.ops.aten.is_non_overlapping_and_dense(x[:, :2])
    if reduction == 0:  # an int argument: traced per value
        return x
    if weight < 0.5:  # a Python float in host code, too
        return x * 2
    out = torch.empty(y.shape, dtype=torch.bool, device=y.device)
    steps = y.cumsum(axis=0)
    for t in td.tile(y.shape[0]):
        v = y[t]
        both = v.to(td.bool_).logical_and(steps[t] > 3) if v.type.scalar.is_int() else v
        out[t] = both.logical_or(v == 2)
    return out


def test_flag_gems_pointwise_idioms() -> None:
    x = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    y = np.array([0, 2, 1, 3, 0, 5], np.int32)
    want = ((y != 0) & (np.cumsum(y) > 3)) | (y == 2)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(flag_gems_pointwise_idioms.run(x, y, 0, 0.9,
                                                                     backend=backend), x)
        np.testing.assert_array_equal(flag_gems_pointwise_idioms.run(x, y, 1, 0.25,
                                                                     backend=backend), 2 * x)
        np.testing.assert_array_equal(flag_gems_pointwise_idioms.run(x, y, 1, 0.9,
                                                                     backend=backend), want)


def _as_tensor(v):
    import torch
    return v if isinstance(v, torch.Tensor) else torch.tensor(v)


def _pick_helper():
    return _as_tensor


@td.tile_kernel
def flag_gems_host_views_and_calls(x, s, w: td.constexpr):
    """FlagGems' glu halves with torch.chunk, its where wraps scalars with torch.tensor(s)
    through map() and a lambda, and its generated wrappers are called as `get()(x)`: functions
    reached so are the kernel's too (isinstance sees a kernel tensor as a torch.Tensor)."""
    import torch
    a, b = torch.chunk(x, 2, dim=-1)
    first, rest, _ = x.split([1, 4, x.shape[1] - 5], 1)
    tail = x.narrow(0, -2, 2)
    xs, ss = map(_as_tensor, (x, s))
    (ws,) = list(map(lambda v: v if isinstance(v, torch.Tensor) else torch.tensor(v), (w,)))
    same = _pick_helper()(x)
    out = torch.empty_like(a)
    for tm, tn in td.tile(out.shape):
        out[tm, tn] = a[tm, tn] * b[tm, tn] + rest[tm, tn] - first[tm, 0][:, None] \
            + td.load(ss) + td.load(ws) + 0 * (xs[tm, tn + 4] - same[tm, tn + 4])
    return out, tail


def test_flag_gems_host_views_and_calls() -> None:
    x = np.random.default_rng(7).standard_normal((3, 8)).astype(np.float32)
    x64 = x.astype(np.float64)
    want = x64[:, :4] * x64[:, 4:] + x64[:, 1:5] - x64[:, :1] + 1.5 + 0.25
    for backend in ("numpy", "triton-interpret"):
        out, tail = flag_gems_host_views_and_calls.run(x, 1.5, 0.25, backend=backend)
        td.testing.assert_close(out, want, np.float32)
        np.testing.assert_array_equal(tail, x[-2:])



def test_flag_gems_randperm_prologue() -> None:
    """FlagGems' randperm: `assert n <= _MAX_INT64_VAL` of Triton's own `tl.constexpr` and an
    int argument; its `torch.randint(..., device=x.device)` draws on every call."""
    import torch
    tl = pytest.importorskip("triton").language
    big = tl.constexpr(2**63 - 1)

    @td.tile_kernel
    def iota(n):
        assert n <= big, "n is too large"
        return torch.arange(n, dtype=torch.int64)

    @td.tile_kernel
    def keys(x):
        return torch.randint(-128, 127, [x.shape[0]], dtype=torch.int8, device=x.device)

    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(iota.run(5, backend=backend), np.arange(5))
    drawn = keys(np.zeros(300, np.float32))  # drawn per call (lang/host_random.py)
    assert drawn.dtype == np.int8 and drawn.min() >= -128 and drawn.max() < 127
