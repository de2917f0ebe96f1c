"""Tensors the kernel's code reaches without taking them as arguments: a module's parameters
(attorch's `LayerNorm.forward` hands `self.weight` to its launch), a global tensor. Each is a
hidden argument of the trace, after the kernel's own, and every call passes the object it
is then (its contents as they are: an optimizer's in-place update is seen), converted for the
backend (runtime/runner.py). The trace keeps the object: a module's parameter rebound to
another tensor traces again (a module is keyed by its state, frontend/reads.py); an attribute of
another object rebound is not seen, as a change inside a global is not. A package, a custom op
and Thunder take only the kernel's arguments, and refuse such a trace.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from tiledsl import dtypes
from tiledsl.errors import TraceError
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor
from tiledsl.ir.core import Value
from tiledsl.ir.types import TensorType


def is_foreign_tensor(v: Any, zero_d: bool = False) -> bool:
    """Whether `v` is an array of the user's (a torch tensor, a NumPy array), not a proxy; of
    one dimension or more, unless `zero_d` (a launch takes a 0-d tensor as its memory: Liger's
    PolyNorm's `nn.Parameter(torch.tensor(1.0))` bias)."""
    torch = sys.modules.get("torch")
    least = 0 if zero_d else 1
    return isinstance(v, np.ndarray) and v.ndim >= least or \
        torch is not None and isinstance(v, torch.Tensor) and v.dim() >= least


def capture(v: Any, name: str) -> Tensor:
    """The kernel's proxy of array `v`, a hidden argument (the same one each time it meets the
    same object)."""
    tr = current()
    for obj, t in tr.captured:
        if obj is v:
            return t
    dtype = dtypes.from_any(str(v.dtype).rsplit(".", 1)[-1])
    if dtype is None:
        tr.fail(TraceError, f"'{name}' reaches the kernel as a {v.dtype} tensor it does not "
                "take as an argument, of a dtype tiledsl has no counterpart of")
    value = Value(TensorType(tuple(int(n) for n in v.shape), dtype), f"{name}_captured")
    strides = _layout(v)
    if strides is not None:
        tr.layouts[value] = strides
    t = Tensor(value, name)
    tr.captured.append((v, t))
    return t


def _layout(v: Any) -> tuple[int, ...] | None:
    from tiledsl.runtime.arg_specs import layout  # (the runtime's rule, for arguments too)
    return layout(v)
