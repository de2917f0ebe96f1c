"""Integer semantics that follow NumPy on every backend: sums of ints do not wrap, an integer
tile to a Python int power stays an exact integer, and comparisons with a Python float do not
round the integers first."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import run_on, under_configs

BACKENDS = ["numpy", "triton-interpret", "spatial"]


@td.tile_kernel
def row_totals(x):
    m, n = x.shape
    out = td.empty((m,), dtype=td.int64)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.int64)
        for tn in td.tile(n):
            acc += td.sum(x[tm, tn], axis=1)
        out[tm] = acc
    return out


@td.tile_kernel
def powers(x):
    n, = x.shape
    cube = td.empty((n,), dtype=x.dtype)
    square = td.empty((n,), dtype=x.dtype)
    one = td.empty((n,), dtype=x.dtype)
    for t in td.tile(n):
        v = x[t]
        cube[t] = v ** 3
        square[t] = v ** 2
        one[t] = v ** 0
    return cube, square, one


@td.tile_kernel
def compare_with_floats(x):
    n, = x.shape
    eq = td.empty((n,), dtype=td.bool_)
    gt = td.empty((n,), dtype=td.bool_)
    le = td.empty((n,), dtype=td.bool_)
    for t in td.tile(n):
        v = x[t]
        eq[t] = v == 16777216.0
        gt[t] = v > 16777216.5
        le[t] = v <= -2.5
    return eq, gt, le


@pytest.mark.parametrize("backend", BACKENDS)
def test_sums_of_ints_are_int64_and_never_wrap(backend: str) -> None:
    x = np.random.default_rng(0).integers(2**29, 2**30, size=(21, 45)).astype(np.int32)
    want = x.sum(axis=1, dtype=np.int64)  # about 45 * 2**29.5: far past int32
    for _config, out in under_configs(row_totals, (x,), backend):
        assert np.array_equal(out, want)


def test_the_sum_of_small_ints_and_bools_is_int64() -> None:
    for dtype in ("i8", "i16", "i32", "i1"):
        text = row_totals.source(np.ones((4, 5), dtype=np.dtype(
            {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i1": np.bool_}[dtype])),
            target="ir")
        assert f'kind = "sum"}} : tile<B0xi64>' in text, text


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_int_tile_to_an_int_power_is_exact(backend: str) -> None:
    x = np.random.default_rng(1).integers(-1500, 1500, size=77).astype(np.int32)
    x[:3] = [16777217, -46341, 0]  # cubes that wrap in int32, as NumPy's do
    cube, square, one = powers.run(x, backend=backend)
    with np.errstate(over="ignore"):
        assert np.array_equal(cube, x ** 3) and np.array_equal(square, x ** 2)
    assert np.array_equal(one, np.ones_like(x)) and cube.dtype == np.int32


def test_an_int_tile_to_a_negative_power_is_an_error() -> None:
    @td.tile_kernel
    def inverse(x):
        n, = x.shape
        out = td.empty((n,), dtype=td.float32)
        for t in td.tile(n):
            out[t] = x[t] ** -1
        return out

    with pytest.raises(td.DTypeError, match="negative power -1"):
        inverse(np.arange(1, 9, dtype=np.int32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_comparisons_with_python_floats_do_not_round_the_ints(backend: str) -> None:
    x = np.random.default_rng(2).integers(-10, 10, size=45).astype(np.int32)
    x[:4] = [16777217, 16777216, 16777215, -3]  # 16777217 rounds to 16777216.0 in float32
    eq, gt, le = compare_with_floats.run(x, backend=backend)
    wide = x.astype(np.float64)
    assert np.array_equal(eq, wide == 16777216.0)
    assert np.array_equal(gt, wide > 16777216.5)
    assert np.array_equal(le, wide <= -2.5)


@td.tile_kernel
def plus_functions_of_numbers(x, k: int):
    """x plus td functions of Python numbers (constants and the int argument k)."""
    (n,) = x.shape
    ints = td.empty((3, n), dtype=td.int64)
    floats = td.empty((n,), dtype=td.float64)
    for t in td.tile(n):
        v = x[t]
        ints[0, t] = v + td.minimum(-7, 2)
        ints[1, t] = v + td.where(v > 3, -7, 2)
        ints[2, t] = v + td.abs(k)
        floats[t] = v + td.exp(1)
    return ints, floats


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_td_function_of_numbers_is_a_typed_scalar(backend: str) -> None:
    """As NumPy 2's functions of Python numbers return NumPy scalars (int64, float64), which
    are strong: `x_u8 + np.minimum(-7, 2)` is int64 (it wrapped to 249 in uint8 here)."""
    x = np.random.default_rng(6).integers(0, 256, size=77).astype(np.uint8)
    ints, floats = run_on(plus_functions_of_numbers, (x, -300), backend)
    want = [x + np.minimum(-7, 2), x + np.where(x > 3, -7, 2), x + np.abs(-300)]
    assert all(w.dtype == np.int64 for w in want) and (x + np.exp(1)).dtype == np.float64
    np.testing.assert_array_equal(ints, np.stack(want))
    np.testing.assert_array_equal(floats, x + np.exp(1))
    if backend == "triton-interpret":  # the casts of constants compile for the GPU
        assert plus_functions_of_numbers.warm(x, -300, arch="sm_90") == 1


@td.tile_kernel
def plus_square(x, n: int):
    (m,) = x.shape
    out = td.empty((m,), dtype=td.int64)
    for t in td.tile(m):
        out[t] = x[t] + n * n
    return out


@pytest.mark.parametrize("n", [100_000, 3_000_000_000, -3_000_000_000])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_python_int_argument_computes_in_int64(backend: str, n: int) -> None:
    """A Python int argument is an int64 whatever its value. Triton's JIT passes one that fits
    in 32 bits as an i32, and its interpreter held one in [2**31, 2**32) as a uint32: `n * n`
    wrapped at 32 bits there (100000**2 came out as 1410065408)."""
    x = np.random.default_rng(5).integers(-10**6, 10**6, size=77)
    for _, out in under_configs(plus_square, (x, n), backend):
        np.testing.assert_array_equal(out, x + n * n)


def test_an_int_argument_that_fits_32_bits_compiles_for_the_gpu() -> None:
    """The launch passes it as an i32 (the JIT's choice), which the kernel widens."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    x = np.arange(77, dtype=np.int64)
    assert plus_square.warm(x, 100_000, arch="sm_90") == 1
    assert "tl.cast(n, tl.int64)" in plus_square.source(x, 100_000, target="triton")


def test_an_int_argument_given_as_a_constant_compiles() -> None:
    """torch.compile's Inductor launches a triton_op's kernel with a static int argument as a
    constant, a plain Python int inside the kernel: `n.to(tl.int64)` failed there to compile
    ("'int' object has no attribute 'to'", seen on an H200)."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from lowering.backends.triton.loader import load
    x = np.arange(77, dtype=np.int64)
    fn = load(plus_square.source(x, 5, target="triton"), interpret=False).plus_square_kernel
    names = [p.name for p in fn.params]
    signature = {n: "constexpr" if n == "n" or n.startswith("BLOCK") else "*i64" for n in names}
    constants = {n: 5 if n == "n" else 128 for n in names if signature[n] == "constexpr"}
    compiled = triton.compile(ASTSource(fn, signature, constexprs=constants),
                              target=GPUTarget("cuda", 90, 32))
    assert "ld.global" in compiled.asm["ptx"]


def test_a_filled_tile_has_its_dtype() -> None:
    """`td.zeros((t,), dtype=td.int32)` is an int32 tile, not a weak number: int16 values added
    to it give int32 (it was int16, and a comparison with it was made in int64)."""
    @td.tile_kernel
    def widen(x):
        out = td.empty(x.shape, dtype=td.int32)
        for t in td.tile(x.shape[0]):
            out[t] = (td.zeros((t,), dtype=td.int32) + x[t]) * 2000
        return out

    x = np.array([30, -30, 7], np.int16)  # 60000 wraps in int16
    np.testing.assert_array_equal(widen(x), x.astype(np.int32) * 2000)


triton = pytest.importorskip("triton")
tl = triton.language


@triton.jit
def _c_division(x_ptr, y_ptr, f_ptr, g_ptr, u_ptr, v_ptr, r_ptr, q_ptr, fr_ptr, ur_ptr, uq_ptr,
                py_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    x, y = tl.load(x_ptr + o), tl.load(y_ptr + o)
    tl.store(r_ptr + o, x % y)
    tl.store(q_ptr + o, x // y)
    tl.store(fr_ptr + o, tl.load(f_ptr + o) % tl.load(g_ptr + o))
    u, v = tl.load(u_ptr + o), tl.load(v_ptr + o)
    tl.store(ur_ptr + o, u % v)
    tl.store(uq_ptr + o, u // v)
    tl.store(py_ptr + o, o * 0 + (-7 // 2) + (-7 % 3))  # Python numbers: Python's (-4 + 2)


@td.tile_kernel
def c_division(x, y, f, g, u, v):
    """FlagGems' remainder and floor_divide: Triton's `%` and `//` in a @triton.jit body."""
    outs = [td.empty_like(a) for a in (x, x, f, u, u, x)]
    _c_division[(1,)](x, y, f, g, u, v, *outs, N=x.shape[0])
    return tuple(outs)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_triton_bodies_divide_as_c(backend: str) -> None:
    """Triton's integer `//` and `%` round toward zero (LLVM's sdiv and srem), and a float `%`
    is fmod (the dividend's sign); unsigned ones and Python numbers are floor's; tiledsl's own
    kernels keep Python's (above)."""
    x = np.array([7, -7, 7, -7, 6, -6, 0, 5], np.int32)
    y = np.array([-3, 3, 3, -3, -3, 3, -2, 8], np.int32)
    f = np.array([5.5, -5.5, 5.5, -5.5, 1.0, -0.0, 3.0, 7.25], np.float32)
    g = np.array([-2.0, 2.0, 2.0, -2.0, 3.0, 1.0, -0.5, 2.0], np.float32)
    u, v = np.array([7, 9, 200, 3, 0, 255, 8, 100], np.uint8), np.full(8, 3, np.uint8)
    r, q, fr, ur, uq, py = run_on(c_division, (x, y, f, g, u, v), backend)
    np.testing.assert_array_equal(r, np.fmod(x, y))
    np.testing.assert_array_equal(q, np.trunc(x / y).astype(np.int32))
    np.testing.assert_array_equal(fr, np.fmod(f, g))
    np.testing.assert_array_equal(np.signbit(fr), np.signbit(np.fmod(f, g)))
    np.testing.assert_array_equal(ur, u % v)
    np.testing.assert_array_equal(uq, u // v)
    np.testing.assert_array_equal(py, np.full(8, -2))
    if backend == "triton-interpret":  # Triton's own operators, tiledsl's corrections left dead
        source = c_division.source(x, y, f, g, u, v, target="triton")
        assert "= x_tile % y_tile" in source and "= x_tile // y_tile" in source


@triton.jit
def _scalar_division(o_ptr, n, h, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(o_ptr + o, o * 0 + n // 2 + 10 * (n % 3) + 100 * ((h + 1) // 2) + 1000 * (h % 4))


@td.tile_kernel
def scalar_division(x, n):
    """Runtime int scalars, as Triton's int32: the kernel's argument `n`, and an int the host
    code computes (`h`), given to parameters not annotated tl.constexpr."""
    out = td.empty((8,), dtype=td.int32)
    _scalar_division[(1,)](out, n, 3 - x.shape[0], N=8)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_triton_bodies_divide_runtime_scalars_as_c(backend: str) -> None:
    got = run_on(scalar_division, (np.zeros(12, np.int32), -7), backend)
    np.testing.assert_array_equal(got, np.full(8, -3 + 10 * -1 + 100 * -4 + 1000 * -1))


@triton.jit
def _store_casts(i_ptr, b_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(i_ptr + offs, x, mask=offs < n)  # Triton's store casts to the pointer's type
    tl.store(b_ptr + offs, x, mask=offs < n)
    tl.store(i_ptr + n + offs, 1.0, mask=offs < 1)


@td.tile_kernel
def store_casts(x):
    """FlagGems' int `ones` stores 1.0 into int32 memory: in a @triton.jit body a store casts
    its value to the pointer's dtype, as Triton's (toward zero; nonzero is True)."""
    n = x.shape[0]
    ints = td.empty((n + 1,), dtype=td.int32)
    flags = td.empty((n,), dtype=td.bool_)
    _store_casts[(1,)](ints, flags, x, n, BLOCK=8)
    return ints, flags


def test_a_triton_store_casts_to_the_pointer_s_dtype() -> None:
    x = np.array([2.7, -2.7, 0.0, 0.4, -0.6], np.float32)
    for backend in ("numpy", "triton-interpret"):
        ints, flags = store_casts.run(x, backend=backend)
        np.testing.assert_array_equal(ints, [2, -2, 0, 0, 0, 1])
        np.testing.assert_array_equal(flags, x != 0)
