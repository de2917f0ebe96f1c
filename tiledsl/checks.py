"""Predicates for validating values users pass in (options, architecture fields): Python and
NumPy numbers count, bools do not (True is an int in Python, never a block size or a rate)."""

from __future__ import annotations

import math
import numbers
from typing import Any


def is_int(v: Any) -> bool:
    """An int (or a NumPy integer), not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def is_number(v: Any, finite: bool = False) -> bool:
    """An int or a float (or a NumPy one), not a bool; with `finite`, not inf or NaN."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and \
        (not finite or math.isfinite(v))
