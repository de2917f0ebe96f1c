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
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        return False
    try:
        return not finite or math.isfinite(v)
    except OverflowError:  # an int past what a float holds (10**400): not finite as a float
        return False
