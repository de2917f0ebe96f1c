"""Arithmetic on bool tiles follows NumPy 2: `+` is or, `*` is and, `//` and `%` compute in
int8, `abs` is the identity, and `-` (binary and unary), unary `+` and `td.sign` are refused
as NumPy raises TypeError on them."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td


@td.tile_kernel
def bool_math(a, b):
    (n,) = a.shape
    out = td.empty((5, n), dtype=td.float32)
    for t in td.tile(n):
        x, y = a[t], b[t]
        out[0, t] = (x + y).astype(td.float32)
        out[1, t] = (x * y).astype(td.float32)
        out[2, t] = (x // y).astype(td.float32)
        out[3, t] = (x % y + abs(x)).astype(td.float32)
        out[4, t] = (x + True).astype(td.float32)
    return out


@td.tile_kernel
def bool_minus(a, b):
    (n,) = a.shape
    out = td.empty((n,), dtype=td.float32)
    for t in td.tile(n):
        out[t] = (a[t] - b[t]).astype(td.float32)
    return out


@td.tile_kernel
def bool_negate(a, plus: bool):
    (n,) = a.shape
    out = td.empty((n,), dtype=td.float32)
    for t in td.tile(n):
        out[t] = (+a[t] if plus else -a[t]).astype(td.float32)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_bool_arithmetic_is_numpys(backend: str) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random(37) < 0.5, rng.random(37) < 0.5
    with np.errstate(divide="ignore"):
        expect = np.stack([a + b, a * b, a // b, a % b + abs(a), a + True]).astype(np.float32)
    if backend != "numpy":
        pytest.importorskip("triton")
    np.testing.assert_array_equal(bool_math.run(a, b, backend=backend), expect)
    assert (expect[0] == 2).sum() == 0 and expect[0].sum() > 0  # or, not a sum of 0s and 1s


def test_bool_minus_and_negation_are_dtype_errors() -> None:
    a = np.array([True, False, True])
    with pytest.raises(td.DTypeError, match=r"'-' is not defined on bools") as e:
        bool_minus(a, a)
    assert "a[t] - b[t]" in str(e.value) and "bool_minus" in str(e.value)
    with pytest.raises(td.DTypeError, match=r"unary '-' is not defined on bools"):
        bool_negate(a, False)
    with pytest.raises(td.DTypeError, match=r"unary '\+' is not defined on bools"):
        bool_negate(a, True)
