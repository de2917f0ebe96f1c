"""A td function of numbers returns a typed scalar, as NumPy 2's functions do.

In NumPy 2 a Python number is weak (`x_u8 + 3` stays uint8, `x_u8 + (-7)` raises), but a
function of Python numbers returns a NumPy scalar of the default dtype of its kind, which is
strong: `np.minimum(-7, 2)` is `np.int64(-7)`, so `x_u8 + np.minimum(-7, 2)` is int64 (no
range check, no wrap); `np.sqrt(2.0)` is float64 and `np.exp(2)` float64 (so `x_f32 *
np.sqrt(2.0)` is float64); `np.maximum(True, False)` is `np.bool_`. The td functions follow:
their result from weak operands only (Python numbers, int and float arguments) is strong,
int64, float64 or bool. Python's own operators on those (`k * 2`, `-k`) stay weak, as in
NumPy, where they are Python arithmetic.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from tiledsl import dtypes
from tiledsl.frontend.values import TileValue, cast

F = TypeVar("F", bound=Callable[..., Any])


def numpy_scalar_result(fn: F) -> F:
    """Wraps a td function: a weak result (all its operands were weak) becomes strong, in
    NumPy's default dtype of its kind."""
    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        return strong(out) if isinstance(out, TileValue) and out.weak else out
    return wrapped  # type: ignore[return-value]


def strong(v: TileValue) -> TileValue:
    """`v` as a typed value: int64 for an int, float64 for a float, bool for a bool."""
    d = v.dtype
    default = dtypes.bool_ if d.is_bool else dtypes.int64 if d.is_int else dtypes.float64
    return TileValue(cast(v, default).value, weak=False)
