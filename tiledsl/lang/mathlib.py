"""The math library: the functions Triton users reach through libdevice, with NumPy's meaning.

Each is one elementwise op of the IR (ir/ops.py), except `td.pow` (the `**` op) and
`td.clamp` (`td.minimum(td.maximum(x, lo), hi)`, so NaN propagates and `lo > hi` gives `hi`,
as `np.clip`; where the bounds meet x at a zero of the other sign, NumPy gives the bound's
zero and a GPU -0 for the minimum: their sign is not specified). Integer operands of the float functions compute in float32 (as `td.exp`; Python ints
in float64, as `np.exp(2)`: tiledsl/frontend/numpy_scalars.py); 16-bit floats compute in float32 and
round once. `td.floor`, `td.ceil`, `td.round` and `td.trunc`
return an integer tile as it is (as NumPy 2); `td.round` rounds half to even (`np.round`,
libdevice's `rint`). `td.isnan` and `td.isinf` are bool (False for integers).
"""

from __future__ import annotations

from typing import Any

from tiledsl import dtypes
from tiledsl.errors import DTypeError, TraceError
from tiledsl.frontend.numpy_scalars import numpy_scalar_result
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, binary, cast, coerce, common_dtype, to_value, unary


def _unary(name: str, numpy_name: str) -> Any:
    @numpy_scalar_result
    def fn(x: Any) -> TileValue:
        current(f"td.{name}()")
        return unary(name, x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise `np.{numpy_name}` (16-bit floats compute in float32)."
    return fn


log2 = _unary("log2", "log2")
log1p = _unary("log1p", "log1p")
expm1 = _unary("expm1", "expm1")
sin = _unary("sin", "sin")
cos = _unary("cos", "cos")
tan = _unary("tan", "tan")
asin = _unary("asin", "arcsin")
acos = _unary("acos", "arccos")
atan = _unary("atan", "arctan")
sinh = _unary("sinh", "sinh")
cosh = _unary("cosh", "cosh")
asinh = _unary("asinh", "arcsinh")
acosh = _unary("acosh", "arccosh")
atanh = _unary("atanh", "arctanh")
log10 = _unary("log10", "log10")
cbrt = _unary("cbrt", "cbrt")


def _rounding(name: str, doc: str) -> Any:
    @numpy_scalar_result
    def fn(x: Any) -> TileValue:
        tr = current(f"td.{name}()")
        v = to_value(x)
        if v.dtype.is_bool:
            tr.fail(DTypeError, f"td.{name}() of a bool tile", hint="cast it first: "
                    f"td.{name}(x.astype(td.float32))")
        return v if v.dtype.is_int else unary(name, v)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc + " An integer tile is returned as it is."
    return fn


floor = _rounding("floor", "The largest integer <= x, elementwise (`np.floor`).")
ceil = _rounding("ceil", "The smallest integer >= x, elementwise (`np.ceil`).")
round = _rounding("round", "x rounded to the nearest integer, half to even (`np.round`, "  # noqa: A001
                  "libdevice's `rint`).")
trunc = _rounding("trunc", "x rounded toward zero, elementwise (`np.trunc`).")


def _float_test(name: str) -> Any:
    def fn(x: Any) -> TileValue:
        current(f"td.{name}()")
        v = to_value(x)
        if not v.dtype.is_float:
            v = cast(v, dtypes.float32)  # never NaN nor infinite (NumPy: all False)
        return TileValue(current().emit(name, [v.value])[0])
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise `np.{name}`, a bool tile."
    return fn


isnan = _float_test("isnan")
isinf = _float_test("isinf")


def isfinite(x: Any) -> TileValue:
    """Elementwise `np.isfinite` (torch's `isfinite`, libdevice's `finitef` and `isfinited`):
    neither NaN nor infinite, a bool tile."""
    current("td.isfinite()")
    return ~(isnan(x) | isinf(x))


@numpy_scalar_result
def sign(x: Any) -> TileValue:
    """-1, 0 or 1 by the sign of x, in x's dtype (`np.sign`: NaN stays NaN, -0.0 gives 0.0)."""
    current("td.sign()")
    return unary("sign", x)


@numpy_scalar_result
def atan2(y: Any, x: Any) -> TileValue:
    """The angle of the point (x, y), elementwise (`np.arctan2(y, x)`)."""
    current("td.atan2()")
    return binary("atan2", y, x)


def _binary(name: str, doc: str) -> Any:
    @numpy_scalar_result
    def fn(x: Any, y: Any) -> TileValue:
        current(f"td.{name}()")
        return binary(name, x, y)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc + " Integer operands compute in float32, 16-bit floats in float32."
    return fn


hypot = _binary("hypot", "sqrt(x**2 + y**2) without overflow, elementwise (`np.hypot`).")
copysign = _binary("copysign", "x's magnitude with y's sign, elementwise (`np.copysign`).")
fmod = _binary("fmod", "The remainder of x / y with x's sign, elementwise (`np.fmod`; `%` "
               "takes y's sign, as Python's).")


@numpy_scalar_result
def pow(x: Any, y: Any) -> TileValue:  # noqa: A001 (mirrors numpy.pow)
    """`x ** y` (`np.pow`)."""
    current("td.pow()")
    return binary("pow", x, y)


@numpy_scalar_result
def fma(x: Any, y: Any, z: Any) -> TileValue:
    """x * y + z rounded once (a fused multiply-add; the NumPy backend computes 16- and
    32-bit floats in float64, whose products are exact)."""
    tr = current("td.fma()")
    tvs = [to_value(v) for v in (x, y, z)]
    dtype, weak = common_dtype(tvs)
    ops, _ = coerce(tvs, dtype if dtype.is_float else dtypes.float32)
    return TileValue(tr.emit("fma", [o.value for o in ops])[0], weak)


@numpy_scalar_result
def clamp(x: Any, lo: Any = None, hi: Any = None, **bounds: Any) -> TileValue:
    """x limited to [lo, hi], elementwise (`np.clip`): `td.minimum(td.maximum(x, lo), hi)`.
    Either bound may be left out, and torch's keywords name them (`torch.clamp(v, min=0)`);
    Triton's `tl.clamp(x, lo, hi, propagate_nan=...)` too (a NaN in x stays NaN)."""
    tr = current("td.clamp()")
    unknown = set(bounds) - {"min", "max", "propagate_nan"}  # (Triton's: a NaN wins anyway)
    if unknown:
        tr.fail(TraceError, f"td.clamp() got unexpected keywords {sorted(unknown)}",
                hint="td.clamp(x, lo, hi), or torch's min= and max=")
    lo = bounds.get("min", lo)
    hi = bounds.get("max", hi)
    if lo is None and hi is None:
        tr.fail(TraceError, "td.clamp() needs a lower bound, an upper bound or both")
    out = x if lo is None else binary("maximum", x, lo)
    return out if hi is None else binary("minimum", out, hi)


__all__ = ["acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "clamp",
           "copysign", "cos", "cosh", "expm1", "floor", "fma", "fmod", "hypot", "isfinite", "isinf",
           "isnan",
           "log10", "log1p", "log2", "pow", "round", "sign", "sin", "sinh", "tan", "trunc"]
