"""Every elementwise operator and math function of the language, on every CPU backend under the
default and a sampled config, against NumPy in float64, element by element: random data of a
ragged size, special values (signed zeros, infinities, NaN, zero divisors) and the cases where a
naive lowering differs from NumPy (`1.0 // 0.1` is 9.0, `inf // 2.0` is NaN, `(-8.0) ** 3` is
-512)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tiledsl as td

N = 301  # not a multiple of any block size
BACKENDS = ["numpy", "triton-interpret", "spatial"]
DTYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16}
# Per element: |out - ref| <= TOL * max(|ref|, 1). f16 results are rounded to f16 (2**-11);
# f64 passes at 1e-14 (tanh is Cephes' rational function on Triton, about 1 ulp): 1e-13 leaves
# room for a GPU's libdevice.
TOL = {"f64": 1e-13, "f32": 4e-6, "f16": 2e-3}


def _erf(v: np.ndarray) -> np.ndarray:
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(v)


# name -> (the kernel's expression of tiles a and b, NumPy's in float64)
OPS: dict[str, tuple[Callable[[Any, Any], Any], Callable[[np.ndarray, np.ndarray], Any]]] = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "floordiv": (lambda a, b: a // b, np.floor_divide),
    "mod": (lambda a, b: a % b, np.mod),
    "pow": (lambda a, b: a ** b, np.power),
    "pow_literal_2": (lambda a, b: a ** 2, lambda a, b: a ** 2.0),
    "pow_literal_3": (lambda a, b: a ** 3, lambda a, b: a ** 3.0),
    "pow_literal_-2": (lambda a, b: a ** -2, lambda a, b: np.power(a, -2.0)),
    "pow_literal_0.5": (lambda a, b: a ** 0.5, lambda a, b: np.power(a, 0.5)),
    "rpow": (lambda a, b: 2.0 ** a, lambda a, b: np.power(2.0, a)),
    "neg": (lambda a, b: -a, lambda a, b: -a),
    "maximum": (lambda a, b: td.maximum(a, b), np.maximum),
    "minimum": (lambda a, b: td.minimum(a, b), np.minimum),
    "where": (lambda a, b: td.where(a > b, a, b * 2.0), lambda a, b: np.where(a > b, a, b * 2)),
    "exp": (lambda a, b: td.exp(a), lambda a, b: np.exp(a)),
    "exp2": (lambda a, b: td.exp2(a), lambda a, b: np.exp2(a)),
    "log": (lambda a, b: td.log(a), lambda a, b: np.log(a)),
    "sqrt": (lambda a, b: td.sqrt(a), lambda a, b: np.sqrt(a)),
    "rsqrt": (lambda a, b: td.rsqrt(a), lambda a, b: 1.0 / np.sqrt(a)),
    "tanh": (lambda a, b: td.tanh(a), lambda a, b: np.tanh(a)),
    "sigmoid": (lambda a, b: td.sigmoid(a), lambda a, b: 1.0 / (1.0 + np.exp(-a))),
    "erf": (lambda a, b: td.erf(a), lambda a, b: _erf(a)),
    "abs": (lambda a, b: td.abs(a), lambda a, b: np.abs(a)),
}


def _kernel(expr: Callable[[Any, Any], Any]) -> td.TileKernel:
    @td.tile_kernel
    def elementwise(x, y):
        n, = x.shape
        out = td.empty((n,), dtype=x.dtype)
        for t in td.tile(n):
            out[t] = expr(x[t], y[t])
        return out
    return elementwise


KERNELS = {name: _kernel(expr) for name, (expr, _) in OPS.items()}


def inputs(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = 3.0 * rng.standard_normal(N)
    y = np.round(3.0 * rng.standard_normal(N))  # integer exponents, for negative bases
    y[::3] += 0.5
    special = [(0.0, 3.0), (-0.0, 3.0), (np.inf, 2.5), (-np.inf, 3.0), (-np.inf, 2.5),
               (np.nan, 1.0), (1.0, np.nan), (2.0, 0.0), (-0.0, 0.0), (1.0, 0.1), (-8.0, 3.0),
               (-8.0, 1.5), (7.5, -2.5), (-7.5, 2.5), (5.0, -3.0)]
    x[:len(special)], y[:len(special)] = zip(*special)
    return x.astype(dtype), y.astype(dtype)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("op", list(OPS))
def test_elementwise_op_matches_numpy(op: str, dtype: str, backend: str) -> None:
    if backend == "triton-interpret":
        pytest.importorskip("torch")
        pytest.importorskip("triton")
    x, y = inputs(DTYPES[dtype])
    kernel = KERNELS[op]
    space = kernel.config_space(x, y, backend=backend)
    for config in (space.default(), *space.sample(1, seed=len(op))):
        check_op(op, dtype, x, y, kernel.run(x, y, backend=backend, config=config))


def check_op(op: str, dtype: str, x: np.ndarray, y: np.ndarray, result: Any) -> None:
    with np.errstate(all="ignore"):
        ref = np.asarray(OPS[op][1](x.astype(np.float64), y.astype(np.float64)), np.float64)
        out = np.asarray(result).astype(np.float64)
    if op == "pow_literal_0.5":  # NumPy: nan for x ** 0.5, inf for x ** array(0.5)
        ref[x == -np.inf] = out[x == -np.inf]
    if dtype == "f16":  # the reference rounded as the output is
        with np.errstate(all="ignore"):
            ref = ref.astype(np.float16).astype(np.float64)
    special = ~np.isfinite(ref)
    wrong = np.flatnonzero(special & ~((out == ref) | (np.isnan(out) & np.isnan(ref))))
    assert not wrong.size, (f"{op} at {wrong[:5]}: x={x[wrong[:5]]}, y={y[wrong[:5]]} gave "
                            f"{out[wrong[:5]]}, NumPy {ref[wrong[:5]]}")
    finite = ~special
    err = np.abs(out - ref)[finite] / np.maximum(np.abs(ref[finite]), 1.0)
    worst = int(np.flatnonzero(finite)[np.argmax(err)])
    assert err.max() <= TOL[dtype], (f"{op}: error {err.max():.2g} at x={x[worst]}, y={y[worst]}:"
                                     f" {out[worst]} vs NumPy {ref[worst]}")


def test_small_integer_powers_are_multiplies() -> None:
    """`x ** 3` is x * x * x in the Triton source, `x ** 0.5` a square root, and only a
    power read from a tile calls the exp2/log2 helper."""
    x, y = inputs(np.float32)
    cube = KERNELS["pow_literal_3"].source(x, y, target="triton")
    assert "x_tile * x_tile * x_tile" in cube and "pow" not in cube
    assert "tl.sqrt(x_tile)" in KERNELS["pow_literal_0.5"].source(x, y, target="triton")
    assert "libdevice.pow(x_tile, y_tile)" in KERNELS["pow"].source(x, y, target="triton")


@td.tile_kernel
def row_extremes(x):
    m, n = x.shape
    big = td.empty((m,), dtype=x.dtype)
    small = td.empty((m,), dtype=x.dtype)
    for tm in td.tile(m):
        hi = td.full((tm,), -float("inf"), dtype=x.dtype)
        lo = td.full((tm,), float("inf"), dtype=x.dtype)
        for tn in td.tile(n):
            v = x[tm, tn]
            hi = td.maximum(hi, td.max(v, axis=1))
            lo = td.minimum(lo, v.min(axis=1))
        big[tm] = hi
        small[tm] = lo
    return big, small


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_max_and_min_propagate_nan(dtype: str, backend: str) -> None:
    """A NaN anywhere in a row makes its max and min NaN, as in NumPy, under every config."""
    if backend == "triton-interpret":
        pytest.importorskip("torch")
        pytest.importorskip("triton")
    x = np.random.default_rng(3).standard_normal((37, 75)).astype(DTYPES[dtype])
    x[[2, 20, 36], [0, 74, 40]] = np.nan
    x[5, 3] = np.inf
    space = row_extremes.config_space(x, backend=backend)
    for config in [space.default(), *space.sample(3, seed=0)]:
        big, small = row_extremes.run(x, backend=backend, config=config)
        np.testing.assert_array_equal(big, x.max(axis=1), err_msg=str(config))
        np.testing.assert_array_equal(small, x.min(axis=1), err_msg=str(config))


@td.tile_kernel
def every_helper(x, y):
    m, _ = x.shape
    out = td.empty((m,), dtype=x.dtype)
    for tm in td.tile(m):
        a = x[tm, :]
        b = y[tm, :]
        v = td.maximum(a ** b, a // b) + td.minimum(a % b, a ** 3) + td.tanh(a) + a ** 0.5
        out[tm] = td.max(v, axis=1) + td.min(v, axis=1)
    return out


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_the_helpers_compile_for_hopper(dtype: str) -> None:
    """The generated helpers (pow, float floordiv and mod, NaN-propagating max and min) lower to
    PTX for sm_90, not only on the interpreter."""
    pytest.importorskip("triton")
    x = np.ones((50, 70), DTYPES[dtype])
    (report,) = every_helper.compile(x, x, arch="sm_90")
    assert report.problem is None
    assert "max.NaN." in report.ptx and "min.NaN." in report.ptx  # f16 reductions use f16x2


def test_the_interpreter_keeps_numpy_warnings_to_itself() -> None:
    """NaN, inf and poisoned masked lanes make NumPy warn inside Triton's interpreter; a GPU
    says nothing, and neither does the interpreter backend."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    x, y = inputs(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KERNELS["log"].run(x, y, backend="triton-interpret")
        row_extremes.run(np.full((37, 75), np.nan, np.float32), backend="triton-interpret")


@td.tile_kernel
def torch_spelled_mlp(x, w1, w2, b):
    """torch's and Triton's names: td.dot(acc=), td.addmm, td.matmul, td.relu, td.silu and
    `.cast` (Triton's `.to`)."""
    m, k = x.shape
    n = w1.shape[1]
    out = td.empty((m, n), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        a1 = td.zeros((tm, tn), dtype=td.float32)
        a2 = td.zeros((tm, tn), dtype=td.float32)
        for tk in td.tile(k):
            a1 = td.dot(x[tm, tk], w1[tk, tn], acc=a1)
            a2 = td.addmm(a2, x[tm, tk], w2[tk, tn])
        a3 = td.matmul(x[tm, :], w1[:, tn])
        out[tm, tn] = (td.relu(a1) + td.silu(a2 + b[tn].cast(td.float32)) - a3).cast(x.dtype)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_torch_spellings_of_matmul_relu_silu_and_cast(backend: str) -> None:
    from support import under_configs
    rng = np.random.default_rng(3)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float16) for s in ((23, 16), (16, 19), (16, 19)))
    b = rng.standard_normal(19).astype(np.float16)
    h1, h2 = x.astype(np.float64) @ w1, x.astype(np.float64) @ w2 + b
    ref = np.maximum(h1, 0) + h2 / (1 + np.exp(-h2)) - h1
    for _, out in under_configs(torch_spelled_mlp, (x, w1, w2, b), backend, samples=1):
        td.testing.assert_close(out, ref, np.float16)
    if backend == "triton-interpret":  # acc + a @ b is Triton's tl.dot(a, b, acc)
        src = torch_spelled_mlp.source(x, w1, w2, b, target="triton")
        assert src.count("tl.dot(") == 3 and src.count(", a1)") + src.count(", a2)") == 2, src
