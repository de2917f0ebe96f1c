"""The small `@triton.jit` functions generated kernels call where Triton has no operation with
NumPy's semantics: Python's floor division and modulo, NumPy's power, NaN-propagating max and
min reductions, argmax and argmin that pick the first NaN and the first lane on ties, and a
tanh the interpreter can run (one for float32, one for float64). Only those a kernel uses are
emitted, at the top of its module (codegen.py)."""

from __future__ import annotations

from typing import Any

HELPERS = {
    "_tanh": '''
@triton.jit
def _tanh(x):
    # tanh from exp (libdevice is unavailable to the interpreter); a series near 0 keeps the
    # relative error small where 1 - 2 / (exp(2x) + 1) would cancel.
    a = tl.abs(x)
    big = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    a2 = a * a
    small = x * (1.0 - a2 * (1.0 / 3.0 - a2 * (2.0 / 15.0 - a2 * (17.0 / 315.0))))
    return tl.where(a < 0.125, small, tl.where(x < 0, -big, big))  # small keeps -0.0
''',
    "_tanh_f64": '''
@triton.jit
def _tanh_f64(x):
    # float64 tanh as Cephes computes it (about 1 ulp): a rational function below 0.625, where
    # 1 - 2 / (exp(2x) + 1) would cancel; _tanh's short series is for float32 only.
    a = tl.abs(x)
    big = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    s = a * a
    p = (-9.64399179425052238628e-1 * s - 9.92877231001918586564e1) * s
    p = p - 1.61468768441708447952e3
    q = ((s + 1.12811678491632931402e2) * s + 2.23548839060100448583e3) * s
    q = q + 4.84406305325125486048e3
    small = x * (1.0 + s * (p / q))  # a product keeps -0.0
    return tl.where(a < 0.625, small, tl.where(x < 0, -big, big))
''',
    "_floordiv": '''
@triton.jit
def _floordiv(a, b):
    # Python's floor division (Triton's // truncates toward zero on integers).
    q = a // b
    return tl.where((a % b != 0) & ((a < 0) != (b < 0)), q - 1, q)
''',
    "_max_nan": '''
@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "_min_nan": '''
@triton.jit
def _min_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "_argmax_nan": '''
@triton.jit
def _argmax_nan(a, ia, b, ib):
    # NumPy's argmax: the first NaN, else the larger value, the first lane on ties
    first = ia < ib
    take_a = (a > b) | ((a == b) & first) | ((a != a) & ((b == b) | first))
    return tl.where(take_a, a, b), tl.where(take_a, ia, ib)
''',
    "_argmin_nan": '''
@triton.jit
def _argmin_nan(a, ia, b, ib):
    # NumPy's argmin: the first NaN, else the smaller value, the first lane on ties
    first = ia < ib
    take_a = (a < b) | ((a == b) & first) | ((a != a) & ((b == b) | first))
    return tl.where(take_a, a, b), tl.where(take_a, ia, ib)
''',
    "_floordiv_f": '''
@triton.jit
def _floordiv_f(a, b):
    # NumPy's (and Python's) float floor division, from the remainder as NumPy computes it:
    # 1.0 // 0.1 is 9.0 (floor(1.0 / 0.1) would be 10.0) and inf // 2.0 is NaN.
    m = a % b  # C's fmod for floats: the sign of a
    d = (a - m) / b
    d = tl.where(m != 0, tl.where((b < 0) != (m < 0), d - 1.0, d), d)
    f = tl.floor(d)
    f = tl.where(d - f > 0.5, f + 1.0, f)
    return tl.where(b == 0, a / b, tl.where(d == 0, 0.0 * (a / b), f))
''',
    "_mod_f": '''
@triton.jit
def _mod_f(a, b):
    # NumPy's (and Python's) float modulo: fmod, moved to the sign of the divisor.
    m = a % b
    return tl.where(m != 0, tl.where((b < 0) != (m < 0), m + b, m), m)
''',
    "_mod": '''
@triton.jit
def _mod(a, b):
    # Python's modulo: the result takes the sign of the divisor.
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
''',
}


def small_power(base: str, n: Any) -> str | None:
    """Inline `base ** n` for a constant n in {-2, -1, 1, 2, 3, 4}: multiplies, as one would
    write by hand (exact where a power rounds, and no special cases for negative
    bases); for n = 0.5, a square root, as NumPy's `x ** 0.5` computes it (so (-inf) ** 0.5 is
    NaN). `base` is parenthesized if it needs to be; None for any other n."""
    if isinstance(n, bool) or not isinstance(n, (int, float)):
        return None
    if n == 0.5:
        return f"tl.sqrt({base})"
    if n not in (-2, -1, 1, 2, 3, 4):
        return None
    product = " * ".join([base] * abs(int(n)))
    return product if n > 0 else f"1.0 / ({product})"


# Modules a kernel's rules may need besides triton and triton.language: imported at the top of
# its module when a rule adds the name to the kernel's helpers.
IMPORTS = {"libdevice": "from triton.language.extra import libdevice"}
