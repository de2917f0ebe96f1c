"""Helpers to compare kernel outputs with float64 NumPy references, with tolerances per dtype."""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl import dtypes

# Relative error ||out - ref|| / ||ref|| allowed for an output of each dtype.
TOLERANCE: dict[str, float] = {
    "f64": 1e-12,
    "f32": 2e-5,
    "f16": 5e-3,
    "bf16": 3e-2,
    # fp8 outputs, rounded once: the rms relative rounding error is u / sqrt(3) with u = 2**-4
    # (e4m3) and 2**-3 (e5m2), 0.036 and 0.072; Helion's fp8 attention checks against 0.1
    "f8e4m3": 0.1,
    "f8e5m2": 0.2,
    "i8": 0.0,
    "i16": 0.0,
    "i32": 0.0,
    "i64": 0.0,
    "u8": 0.0,
    "u16": 0.0,
    "u32": 0.0,
    "u64": 0.0,
    "i1": 0.0,
}


def tolerance(dtype: Any) -> float:
    d = dtypes.from_any(dtype)
    if d is None:
        raise ValueError(f"no tolerance for dtype {dtype!r}")
    return TOLERANCE[d.short]


def relative_error(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| in float64 (the absolute error when ref is all zeros)."""
    o = np.asarray(out).astype(np.float64)
    r = np.asarray(ref).astype(np.float64)
    if o.shape != r.shape:
        raise AssertionError(f"shape mismatch: output {o.shape} vs reference {r.shape}")
    if not np.all(np.isfinite(o) == np.isfinite(r)):
        return float("inf")
    finite = np.isfinite(r)
    diff = float(np.linalg.norm((o - r)[finite]))
    norm = float(np.linalg.norm(r[finite]))
    return diff / norm if norm > 0 else diff


def as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def assert_close(out: Any, ref: Any, dtype: Any = None, *, factor: float = 1.0) -> None:
    """Assert each output matches its reference within the tolerance of `dtype` (the inputs'
    dtype; by default the output's). Integer and bool outputs (positions, counts) must be
    exact whatever `dtype` says."""
    outs, refs = as_tuple(out), as_tuple(ref)
    if len(outs) != len(refs):
        raise AssertionError(f"{len(outs)} outputs but {len(refs)} references")
    for i, (o, r) in enumerate(zip(outs, refs)):
        if o is None or r is None:  # an optional output left out (tiledsl/runtime/returns.py)
            if o is not r:
                raise AssertionError(f"output {i} is {'None' if o is None else 'an array'}, "
                                     f"its reference {'None' if r is None else 'an array'}")
            continue
        kind = np.asarray(o).dtype
        tol = 0.0 if kind.kind in "iub" else tolerance(kind if dtype is None else dtype) * factor
        err = relative_error(o, r)
        if not err <= tol:
            raise AssertionError(f"output {i}: relative error {err:.3g} exceeds {tol:.3g}")
