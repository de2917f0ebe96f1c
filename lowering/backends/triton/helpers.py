"""The small `@triton.jit` functions generated kernels call where Triton has no operation with
NumPy's semantics: Python's floor division and modulo, NumPy's power, NaN-propagating max and
min reductions, and a tanh the interpreter can run. Only those a kernel uses are emitted, at the
top of its module (codegen.py)."""

from __future__ import annotations

HELPERS = {
    "_tanh": '''
@triton.jit
def _tanh(x):
    # tanh from exp (libdevice is unavailable to the interpreter); a series near 0 keeps the
    # relative error small where 1 - 2 / (exp(2x) + 1) would cancel.
    a = tl.abs(x)
    big = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    a2 = a * a
    small = a * (1.0 - a2 * (1.0 / 3.0 - a2 * (2.0 / 15.0 - a2 * (17.0 / 315.0))))
    t = tl.where(a < 0.125, small, big)
    return tl.where(x < 0, -t, t)
''',
    "_pow": '''
@triton.jit
def _pow(x, y):
    # x ** y with C's (and NumPy's) rules: a negative base keeps its sign under odd integer
    # powers and gives NaN under non-integer ones (but -inf gives inf or 0); x ** 0 and
    # 1 ** y are 1. Nested wheres, not `&` of masks: the interpreter cannot `&` a scalar y's
    # mask with x's.
    r = tl.exp2(y * tl.log2(tl.abs(x)))
    odd = tl.floor(y * 0.5) * 2.0 != y
    fractional = tl.where(x == -float("inf"), r, float("nan"))
    r = tl.where(x < 0, tl.where(tl.floor(y) == y, tl.where(odd, -r, r), fractional), r)
    return tl.where(y == 0, 1.0, tl.where(x == 1.0, 1.0, r))
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
