"""Arguments and constants that used to end in raw NumPy tracebacks: ndarray subclasses
(np.matrix is viewed as a plain array, a np.memmap is written in place, a masked array is an
ArgumentError), an output larger than host memory (an ArgumentError naming the line), and the
math functions of Python constants (folded with the NumPy backend's own rules)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support import gpu_backend, run_on

import tiledsl as td


@td.tile_kernel
def rows_twice(x, idx):
    """2 * x.reshape(-1)[idx]: a gather from a view (a matrix's reshape stays 2-D)."""
    (m,) = idx.shape
    flat = x.reshape(-1)
    out = td.empty((m,), dtype=x.dtype)
    for tm in td.tile(m):
        out[tm] = flat[idx[tm]] * 2
    return out


@td.tile_kernel
def double_in_place(x):
    m, n = x.shape
    for tm, tn in td.tile(m, n):
        x[tm, tn] = x[tm, tn] * 2


@td.tile_kernel
def square_of(x, n: int):
    out = td.empty((n, n), dtype=td.float64)
    for tm, tn in td.tile(n, n):
        out[tm, tn] = td.zeros((tm, tn), dtype=td.float64) + x[0]
    return out


UNARY = ["exp", "exp2", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs", "log2", "log1p",
         "expm1", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "floor", "ceil",
         "round", "trunc", "sign"]
NUMPY = {"rsqrt": lambda c: 1 / np.sqrt(c), "sigmoid": lambda c: 1 / (1 + np.exp(-c)),
         "erf": np.vectorize(math.erf), "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
         "round": np.rint}


@td.tile_kernel
def math_of_constants(x, c):
    """Every math function of the Python constant c (a compile-time float): each folds."""
    (n,) = x.shape
    out = td.empty((len(UNARY), n), dtype=td.float64)
    for t in td.tile(n):
        for i, name in enumerate(UNARY):
            out[i, t] = x[t] + getattr(td, name)(c)
    return out


def test_ndarray_subclasses() -> None:
    x = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    with pytest.warns(PendingDeprecationWarning):  # NumPy's, for np.matrix
        matrix = np.matrix(x)
    idx = np.array([34, 0, 12])
    np.testing.assert_array_equal(rows_twice(matrix, idx), 2 * x.reshape(-1)[idx])  # a raw ValueError
    with pytest.raises(td.ArgumentError, match="argument 'x' is a masked array"):
        rows_twice(np.ma.masked_array(x, mask=x > 0), idx)


def test_memmap_is_written_in_place(tmp_path) -> None:
    x = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)
    mm = np.memmap(tmp_path / "x.dat", dtype=np.float32, mode="w+", shape=x.shape)
    mm[:] = x
    double_in_place(mm)
    mm.flush()
    np.testing.assert_array_equal(np.fromfile(tmp_path / "x.dat", np.float32).reshape(5, 7),
                                  2 * x)


@pytest.mark.parametrize("backend", ["numpy", "spatial"])
def test_output_larger_than_memory_is_an_argument_error(backend: str) -> None:
    with pytest.raises(td.ArgumentError, match=r"takes 8\.0 TiB, more than this machine") as e:
        square_of.run(np.ones(1), 1 << 20, backend=backend)
    assert "td.empty((n, n)" in str(e.value) and "square_of" in str(e.value)


def test_math_of_python_constants_folds() -> None:
    c = 0.75
    out = math_of_constants.run(np.zeros(3), td.constexpr(c))  # td.erf(c) crashed the fold
    expect = [(NUMPY[name] if name in NUMPY else getattr(np, name))(c) for name in UNARY]
    np.testing.assert_allclose(out[:, 0], expect, rtol=1e-12)


@td.tile_kernel
def shifted_by(x, b, k):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * k + b
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_zero_d_arrays_are_scalar_arguments(backend: str) -> None:
    """torch passes a scalar parameter as a 0-d tensor (Liger's poly_norm bias): a 0-d array is
    a runtime scalar of its dtype, whose value the Triton launch passes (it passed the array,
    which Triton took for a pointer)."""
    x = np.arange(5, dtype=np.float32)
    out = run_on(shifted_by, (x, np.array(0.25, np.float32), np.array(3, np.int64)), backend)
    np.testing.assert_array_equal(out, x * 3 + 0.25)


def test_a_zero_d_device_tensor_is_a_scalar_argument() -> None:
    """A 0-d torch CUDA tensor or CuPy array is a scalar too (the first GPU run of the test
    above found it traced as a tensor: "tensor 'k' must be indexed")."""
    class DeviceScalar:  # what the specs read of a CUDA array: its interface, shape and dtype
        __cuda_array_interface__: dict = {}
        shape: tuple = ()
        dtype = np.dtype(np.int64)

    assert shifted_by.specs.of("k", DeviceScalar()) == ("scalar", "i64", False)


def test_run_takes_torch_cpu_tensors_on_the_cpu_backends() -> None:
    """`k.run(t, backend=...)` of torch CPU tensors runs them as NumPy views and hands torch
    tensors back; the GPU backend says what takes them."""
    torch = pytest.importorskip("torch")
    x = torch.arange(3.0)
    for backend in ("numpy", "triton-interpret"):
        out = shifted_by.run(x, 0.5, 2, backend=backend)
        assert isinstance(out, torch.Tensor)
        np.testing.assert_array_equal(out.numpy(), x.numpy() * 2 + 0.5)
    with pytest.raises(td.ArgumentError, match="argument 'x' is a torch.Tensor") as e:
        shifted_by.run(x, 0.5, 2, backend="triton")
    assert "k(*args) takes torch" in e.value.hint and "np.from_dlpack(t)" in e.value.hint
