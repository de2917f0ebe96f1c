"""libdevice under Triton's interpreter: the functions the math library's rules call
(math_rules.py), computed by NumPy.

Triton binds `triton.language.extra.libdevice` to CUDA's (or HIP's) library when it compiles a
kernel; its interpreter has none (`extern_elementwise` is not supported in interpreter mode),
so an interpreted kernel's calls would fail. While one runs (interpret.interpreted_stdlib),
the module's functions are these, on the interpreter's NumPy arrays: the NumPy backend's
functions (elementwise.py) in the operand's dtype, as libdevice computes float32 in float32.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

NUMPY: dict[str, Callable[..., np.ndarray]] = {
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh,
    "log1p": np.log1p, "expm1": np.expm1, "rint": np.rint, "trunc": np.trunc,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "log10": np.log10,
    "cbrt": np.cbrt, "hypot": np.hypot, "copysign": np.copysign, "fmod": np.fmod,
    "pow": np.power,
}


def _on_arrays(fn: Callable[..., np.ndarray]) -> Callable[..., Any]:
    """`fn` as a function of the interpreter's tensors (all of one float dtype) and Python
    numbers (`libdevice.pow(2.0, x)`), in the tensors' dtype."""
    def call(*args: Any, **_: Any) -> Any:
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle
        tensors = [a for a in args if hasattr(a, "handle")]
        dtype = np.asarray(tensors[0].handle.data).dtype
        data = [np.asarray(a.handle.data) if hasattr(a, "handle") else dtype.type(a)
                for a in args]  # (copied to one shape: np.power of a scalar, or a broadcast
        data = [np.array(d) for d in np.broadcast_arrays(*data)]  # 0.5, is NaN at -inf)
        out = np.asarray(fn(*data)).astype(dtype, copy=False)
        shaped = next(a for a in tensors if np.shape(a.handle.data) == out.shape)
        return tl.tensor(TensorHandle(out, tensors[0].dtype.scalar), shaped.type)
    return call


def install() -> None:
    """Make libdevice's functions NumPy's (interpret.py restores the module afterwards)."""
    from triton.language.extra import libdevice
    for name, fn in NUMPY.items():
        setattr(libdevice, name, _on_arrays(fn))
