"""The language's semantics on the NumPy backend: loops, carried values, dtypes, edges, outputs."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from tiledsl.testing import assert_close

RNG = np.random.default_rng(0)
CONFIGS = [td.Config((2, 4)), td.Config((8, 1)), td.Config((64, 32)), td.Config((1, 32))]


def rand(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def helper_scale(v, s):  # an ordinary Python helper called from a kernel
    return v * s


@td.tile_kernel
def stats(x):
    """Several carried names at once, a Python-number initial value, a plain Python loop."""
    m, n = x.shape
    total = td.empty((m,), dtype=td.float32)
    biggest = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        s = 0.0
        big = td.full((tm,), -float("inf"))
        for tn in td.tile(n):
            v = x[tm, tn]
            for _ in range(2):  # unrolled while tracing: adds v twice
                s = s + td.sum(v, axis=1)
            big = td.maximum(big, v.max(axis=-1))
        total[tm] = helper_scale(s, 0.5)
        biggest[tm] = big
    return total, biggest


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_multiple_carried_values_and_outputs(config: td.Config) -> None:
    x = rand(37, 29) - 3.0  # all negative: an unmasked 0 would win the max
    total, biggest = stats.run(x, config=config)
    assert_close(total, x.astype(np.float64).sum(1), np.float32)
    assert_close(biggest, x.max(1), np.float32)


@td.tile_kernel
def scale_in_place(x, alpha):
    for t in td.tile(x.shape[0]):
        x[t] = x[t] * alpha


def test_outputs_written_into_arguments() -> None:
    x = rand(101)
    expected = x.astype(np.float64) * 2.5
    assert scale_in_place.run(x, 2.5, config=td.Config((16,))) is None
    assert_close(x, expected, np.float32)


@td.tile_kernel
def summary(x, out):
    """Stores at constant and grid-scalar int indices: one element per store."""
    for _ in td.grid(1):
        out[0] = td.sum(x[:])
        out[1] = td.max(x[:])


@td.tile_kernel
def row_sums(x, out):
    for b in td.grid(x.shape[0]):
        out[b] = td.sum(x[b, :])


@pytest.mark.parametrize("backend", ["numpy", "spatial"])
def test_stores_at_int_indices_write_the_output(backend: str) -> None:
    """All-int indices once made the NumPy backend write into a copy (the output stayed
    untouched); the spatial backend's functional run, one program per PE, hit the same path."""
    x = rand(37)
    out = np.full(2, np.nan, np.float32)
    summary.run(x, out, backend=backend)
    assert_close(out, np.array([x.astype(np.float64).sum(), x.max()]), np.float32)
    y = rand(5, 23)
    sums = np.full(5, np.nan, np.float32)
    row_sums.run(y, sums, backend=backend)
    assert_close(sums, y.astype(np.float64).sum(1), np.float32)


@td.tile_kernel
def positions(x):
    (n,) = x.shape
    idx = td.empty((n,), dtype=td.int32)
    begin = td.empty((n,), dtype=td.int32)
    size = td.empty((n,), dtype=td.int32)
    for t in td.tile(n):
        idx[t] = t.index
        begin[t] = t.begin
        size[t] = t.size
    return idx, begin, size


@pytest.mark.parametrize("block", [1, 4, 16, 64])
def test_tile_index_begin_size(block: int) -> None:
    n = 37
    idx, begin, size = positions.run(rand(n), config=td.Config((block,)))
    ar = np.arange(n)
    assert np.array_equal(idx, ar)
    assert np.array_equal(begin, ar // block * block)
    assert np.array_equal(size, np.minimum(block, n - ar // block * block))


@td.tile_kernel
def int_ops(a, b):
    (n,) = a.shape
    q = td.empty((n,), dtype=td.int32)
    r = td.empty((n,), dtype=td.int32)
    bits = td.empty((n,), dtype=td.int32)
    sel = td.empty((n,), dtype=td.int32)
    for t in td.tile(n):
        x, y = a[t], b[t]
        q[t] = x // y
        r[t] = x % y
        bits[t] = (x & y) | (~x ^ y)
        sel[t] = td.where((x > 0) & (y < 0), x, -y)
    return q, r, bits, sel


def test_integer_semantics_follow_python() -> None:
    a = RNG.integers(-50, 50, 61).astype(np.int32)
    b = RNG.integers(1, 9, 61).astype(np.int32) * RNG.choice([-1, 1], 61).astype(np.int32)
    q, r, bits, sel = int_ops.run(a, b, config=td.Config((8,)))
    assert np.array_equal(q, a // b) and np.array_equal(r, a % b)
    assert np.array_equal(bits, (a & b) | (~a ^ b))
    assert np.array_equal(sel, np.where((a > 0) & (b < 0), a, -b))


@td.tile_kernel
def mixed(x, h):
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    sums = td.empty((m,), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        v = h[tm, tn] * 2.0  # a weak float keeps h's dtype (float16)
        out[tm, tn] = x[tm, tn] + v.astype(td.float32)
    for tm in td.tile(m):
        sums[tm] = td.sum(h[tm, :], axis=1)  # float16 sums accumulate and return float32
    for tm, tn in td.tile(m, n):  # a select of two numbers stays weak: float16 here
        masked = h[tm, tn] + td.where(x[tm, tn] > 0.5, 0, -1.0e4)
        td.static_assert(masked.dtype == td.float16 and td.where(True, 1, 2).dtype == td.int64)
        out[tm, tn] = out[tm, tn] + masked.astype(td.float32)
    return out, sums


def test_weak_numbers_and_16_bit_accumulation() -> None:
    x, h = rand(13, 70), rand(13, 70, dtype=np.float16)
    assert "mul %" in mixed.source(x, h) and ": tile<B0xB1xf16>" in mixed.source(x, h)
    out, sums = mixed.run(x, h, config=td.Config((4, 32, 8, 4, 16)))
    masked = h.astype(np.float64) + np.where(x > 0.5, 0, -1.0e4)
    assert_close(out, x.astype(np.float64) + 2.0 * h.astype(np.float64) + masked, np.float16)
    assert sums.dtype == np.float32
    assert_close(sums, h.astype(np.float64).sum(1), np.float32)


@td.tile_kernel
def reductions(x):
    m, n = x.shape
    mean = td.empty((m,), dtype=td.float32)
    every = td.empty((1,), dtype=td.float32)
    lo = td.empty((m, 1), dtype=td.float32)
    for tm in td.tile(m):
        v = x[tm, :]
        mean[tm] = td.mean(v, axis=1)
        lo[tm, :] = td.min(v, axis=1, keepdims=True)
    for one in td.tile(1):
        tot = 0.0
        for tm in td.tile(m):
            tot += td.sum(td.mean(x[tm, :], axis=1) * 0.0 + 1.0)  # counts in-range rows
        every[one] = tot
    return mean, every, lo


@pytest.mark.parametrize("config", [td.Config((4, 1, 4)), td.Config((32, 1, 64)),
                                    td.Config((1, 1, 2))],
                         ids=str)
def test_reductions_are_exact_on_partial_tiles(config: td.Config) -> None:
    x = rand(37, 23) + 5.0  # all positive: an unmasked 0 would win the min
    mean, every, lo = reductions.run(x, config=config)
    assert_close(mean, x.astype(np.float64).mean(1), np.float32)
    assert every[0] == 37.0
    assert_close(lo, x.min(1, keepdims=True), np.float32)


@td.tile_kernel
def transpose_outer(x, y):
    (m,) = x.shape
    (n,) = y.shape
    out = td.empty((n, m), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        outer = x[tm][:, None] * y[tn][None, :]
        out[tn, tm] = outer.T
    return out


def test_broadcast_and_transpose() -> None:
    x, y = rand(19), rand(45)
    out = transpose_outer.run(x, y, config=td.Config((8, 16)))
    assert_close(out, np.outer(y, x), np.float32)


@td.tile_kernel
def bf16_matmul(a, b):
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn))
        for tk in td.tile(k):
            acc += td.dot(a[tm, tk], b[tk, tn])
        out[tm, tn] = acc
    return out


def test_16_bit_dot_accumulates_in_float32() -> None:
    a, b = rand(33, 130, dtype=ml_dtypes.bfloat16), rand(130, 17, dtype=ml_dtypes.bfloat16)
    out = bf16_matmul.run(a, b, config=td.Config((16, 16, 32)))
    assert out.dtype == np.float32
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert td.testing.relative_error(out, ref) < 1e-6  # products of bf16 are exact in float32


@td.tile_kernel
def grid_and_nested_tiles(x):
    b, m, n = x.shape
    out = td.empty((b,), dtype=td.float32)
    for i in td.grid(b):
        acc = 0.0
        for tm, tn in td.tile(m, n):  # two sequential loops, one carried value
            acc += td.sum(x[i, tm, tn])
        out[i] = acc
    return out


def test_grid_scalars_and_multi_dimensional_inner_loops() -> None:
    x = rand(5, 9, 14)
    for config in [td.Config((4, 8)), td.Config((16, 1)), td.Config((1, 16))]:
        assert_close(grid_and_nested_tiles.run(x, config=config),
                     x.astype(np.float64).sum((1, 2)), np.float32)


@td.tile_kernel
def rebinds_its_argument(x, eps: float):
    """Liger-Kernel's RMSNorm writes `eps = eps.to(X_row_dtype)` in its grid: each program's
    local (liveness.py), accepted since nothing reads `eps` after the loop."""
    out = td.empty_like(x)
    for r in td.grid(x.shape[0]):
        eps = eps.to(td.float32)
        row = x[r, :].to(td.float32)
        out[r, :] = row * td.rsqrt(td.sum(row * row) / x.shape[1] + eps)
    return out


@td.tile_kernel
def batches(x):
    """FlagGems' cat wrapper merged with its kernel: a host `while` over batches binds `n`
    before each grid that rebinds it, so no value of the grid's `n` is read after it."""
    out = td.zeros_like(x)
    i = 0
    while i < 2:
        n = x.shape[0]
        for p in td.grid(n):
            n = x[p] * 2.0
            out[p] = out[p] + n + i
        i += 1
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_name_rebound_in_a_grid_is_each_programs_local(backend: str) -> None:
    x = rand(7, 13)
    x64 = x.astype(np.float64)
    expected = x64 / np.sqrt((x64 * x64).mean(1, keepdims=True) + 0.5)
    assert_close(rebinds_its_argument.run(x, 0.5, backend=backend), expected, np.float32)
    v = np.arange(1, 6, dtype=np.float32)
    np.testing.assert_array_equal(batches.run(v, backend=backend), 4 * v + 1)


@td.tile_kernel
def host_tensors(x):
    (n,) = x.shape
    zeros = td.zeros((n,))
    sevens = td.full((n, 2), 7, dtype=td.int32)
    for t in td.tile(n):
        zeros[t] = zeros[t] + x[t]
    return zeros, sevens


def test_host_allocations_are_initialized() -> None:
    x = rand(10)
    zeros, sevens = host_tensors(x)
    assert_close(zeros, x, np.float32)
    assert sevens.dtype == np.int32 and (sevens == 7).all()


def test_traces_once_per_signature() -> None:
    k = stats
    before = len(k.caches.traces)
    k(rand(5, 6))
    k(rand(5, 6))
    assert len(k.caches.traces) == before + 1
    k(rand(5, 7))
    assert len(k.caches.traces) == before + 2


@td.tile_kernel
def compare_literals(x):
    n, = x.shape
    out = td.empty((n,), dtype=td.int8)
    for t in td.tile(n):
        v = x[t]
        out[t] = (v < 300).astype(td.int8) + (v > -200).astype(td.int8) + \
            (v == 300).astype(td.int8) + (v != 2**40).astype(td.int8)
    return out


@td.tile_kernel
def times_three(x, k: int):
    n, = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for t in td.tile(n):
        out[t] = x[t] + k * 3
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial"])
def test_python_ints_follow_numpy_2_at_the_edges_of_a_dtype(backend: str) -> None:
    """A Python int outside an int8 tile's range compares exactly (NumPy 2: int8 < 300 is
    True everywhere), never after a wrap to 44; an int argument is an int64 (k * 3 does not
    wrap at 2**31)."""
    if backend == "triton-interpret":
        pytest.importorskip("torch")
    x = np.array([-128, -100, 0, 44, 45, 100, 127], np.int8)
    np.testing.assert_array_equal(compare_literals.run(x, backend=backend), np.full(7, 3))
    y = np.arange(5, dtype=np.int64)
    for k in (2**31 - 1, 2**31, -(2**33)):
        np.testing.assert_array_equal(times_three.run(y, k, backend=backend), y + 3 * k)


def test_arithmetic_with_a_python_int_out_of_range_is_an_error() -> None:
    @td.tile_kernel
    def add_300(x):
        n, = x.shape
        out = td.empty((n,), dtype=x.dtype)
        for t in td.tile(n):
            out[t] = td.where(x[t] > 0, x[t] + 1, 0) + 300
        return out

    with pytest.raises(td.DTypeError, match=r"add_300.*the Python integer 300 is out of range "
                       r"for int8 in '\+' \(NumPy raises OverflowError\)"):
        add_300(np.arange(5, dtype=np.int8))
    np.testing.assert_array_equal(add_300(np.arange(5, dtype=np.int16)),
                                  np.array([300, 302, 303, 304, 305]))


@td.tile_kernel
def below_k(x, k: int):
    n, = x.shape
    out = td.empty((n,), dtype=td.int8)
    scaled = td.empty((n,), dtype=td.int32)
    for t in td.tile(n):
        out[t] = (x[t] < k).astype(td.int8)
        scaled[t] = t.index * k
    return out, scaled


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial"])
def test_an_int_argument_is_never_cut_to_a_narrower_tile(backend: str) -> None:
    """Comparisons with an int argument are exact (x_int8 < 300); arithmetic with a value out
    of the tile's range is an ArgumentError at the call, where NumPy raises OverflowError."""
    if backend == "triton-interpret":
        pytest.importorskip("torch")
    x = np.array([50, 60, 70, 100, -128], np.int8)
    out, scaled = below_k.run(x, 300, backend=backend)
    np.testing.assert_array_equal(out, np.ones(5))
    np.testing.assert_array_equal(scaled, np.arange(5) * 300)
    out, _ = below_k.run(x, 60, backend=backend)
    np.testing.assert_array_equal(out, [1, 0, 0, 0, 1])
    with pytest.raises(td.ArgumentError, match=r"below_k.*argument 'k' is 4294967301, out of the "
                       r"range of int32(.|\n)*t.index \* k"):
        below_k.run(x, 2**32 + 5, backend=backend)


def test_an_int_computed_from_arguments_is_checked_too() -> None:
    @td.tile_kernel
    def shift(x, k: int):
        n, = x.shape
        out = td.empty((n,), dtype=x.dtype)
        for t in td.tile(n):
            out[t] = x[t] + (k * 3 - 1)
        return out

    x = np.arange(4, dtype=np.int16)
    np.testing.assert_array_equal(shift(x, 100), x + 299)
    with pytest.raises(td.ArgumentError, match=r"a value computed from int arguments is 32768, "
                       r"out of the range of int16(.|\n)*k \* 3 - 1"):
        shift(x, 10923)  # 10923 * 3 - 1 = 32768, one past int16's largest


KERNEL_FILE = '''
import tiledsl as td


@td.tile_kernel
def edited(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * 2.0
    return out
'''


def test_a_kernel_keeps_the_source_it_was_decorated_with(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """As Triton's @jit: editing the file while a program runs (a long tune) must not change
    a kernel that has not traced yet, nor its result-cache key."""
    import importlib
    import linecache

    from autotune import cache
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "edited_kernel.py").write_text(KERNEL_FILE)
    k = importlib.import_module("edited_kernel").edited
    x = np.random.default_rng(0).standard_normal(13).astype(np.float32)
    before = cache.key(td.tile_kernel(k.fn), [x], "numpy").text  # a fresh kernel: traces here
    (tmp_path / "edited_kernel.py").write_text(KERNEL_FILE.replace("* 2.0", "* 3.0"))
    linecache.checkcache()
    assert_close(k(x), 2.0 * x.astype(np.float64), np.float32)
    assert cache.key(k, [x], "numpy").text == before


def test_a_kernel_defined_where_no_file_holds_it_fails_at_first_use() -> None:
    namespace: dict = {"td": td}
    exec(KERNEL_FILE, namespace)  # noqa: S102 - the point: a kernel with no source file
    with pytest.raises(td.TraceError, match="cannot read the source of kernel 'edited'"):
        namespace["edited"](np.ones(4, np.float32))


@td.tile_kernel
def sizes_as_sequences(x):
    """Sizes as one list or tuple, as Helion writes them: a tuple of tiles comes back, even for
    one size; `block_size=` still fixes a block."""
    b, m, n = x.shape
    rows = td.empty((b, m), dtype=td.float32)
    for (i,) in td.grid(x.shape[:1]):
        for (tm,) in td.tile([m]):
            acc = td.zeros((tm,), dtype=td.float32)
            for (tn,) in td.tile((n,), block_size=8):
                acc += td.sum(x[i, tm, tn], axis=1)
            rows[i, tm] = acc
    twice = td.empty(x.shape, dtype=x.dtype)
    for tb, tm, tn in td.tile(x.shape):
        twice[tb, tm, tn] = x[tb, tm, tn] * 2
    return rows, twice


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_sizes_as_a_list_a_tuple_or_a_shape(backend: str) -> None:
    x = rand(3, 13, 21)
    space = sizes_as_sequences.config_space(x, backend=backend)
    for config in space.sample(2, seed=1):
        assert len(config.block_sizes) == 4  # tm, and tb, tm, tn: not the fixed tn
        rows, twice = sizes_as_sequences.run(x, config=config, backend=backend)
        assert_close(rows, x.astype(np.float64).sum(2), np.float32)
        assert_close(twice, 2 * x.astype(np.float64), np.float32)


@td.tile_kernel
def torch_spelled_shapes(x, p):
    """`td.*_like` of tensors and of tile values, a tile value's `.shape` as a shape,
    `x.numel()`, `x.size(d)` / `x.size()` and `v.masked_fill`, as torch's users write them."""
    m, n = x.size()
    zeros = td.zeros_like(x)  # host: new tensors like x
    halves = td.full_like(x, 0.5, dtype=td.float64)
    rows = td.empty((x.size(0),), dtype=td.float32)
    for tm in td.tile(m):
        acc = td.zeros(x[tm, 0].shape, dtype=td.float32)
        acc = acc + td.ones_like(acc)
        for tn in td.tile(x.size(-1)):
            v = x[tm, tn]
            w = td.full_like(v, 2) + td.zeros_like(v, dtype=td.float16) + td.empty_like(v)
            acc += (v.masked_fill(v > p[tm, tn], -1.0) * w).sum(axis=1)
        rows[tm] = acc / x.numel()
    return rows, zeros, halves


def test_a_tensor_size_pickles_as_its_int() -> None:
    """`x.size` (callable as torch's `x.size(d)`) may size a shape that traces carry to tuning
    workers: it pickles as the plain element count."""
    import pickle
    from tiledsl.lang.torch_names import TensorSize
    size = TensorSize((3, 4))
    assert size(1) == 4 and type(pickle.loads(pickle.dumps(size))) is int
    assert pickle.loads(pickle.dumps(size)) == 12


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_torch_spellings_of_shapes_and_like_allocations(backend: str) -> None:
    from support import under_configs
    x, p = rand(13, 29), rand(13, 29)
    ref = (1 + np.where(x > p, -1.0, x.astype(np.float64)).sum(1) * 2) / x.size
    for config, (rows, zeros, halves) in under_configs(torch_spelled_shapes, (x, p), backend,
                                                       samples=1):
        assert_close(rows, ref, np.float32)
        assert zeros.dtype == np.float32 and not zeros.any()
        assert halves.dtype == np.float64 and (halves == 0.5).all()


@td.tile_kernel
def row_spans(x):
    """torch's `v.amax(dim)` and `v.amin(dim, keepdim=True)` (Helion's jagged kernels)."""
    m, n = x.shape
    top = td.empty((m,), dtype=x.dtype)
    above_min = td.empty((m,), dtype=x.dtype)
    for tm in td.tile(m):
        v = x[tm, :]
        top[tm] = v.amax(dim=1)
        above_min[tm] = td.sum(v - v.amin(1, keepdim=True), axis=1)
    return top, above_min


def test_amax_and_amin() -> None:
    x = rand(13, 29)
    top, above_min = row_spans(x)
    np.testing.assert_array_equal(top, x.max(1))
    np.testing.assert_allclose(above_min, (x - x.min(1, keepdims=True)).sum(1), rtol=1e-5)
