"""torch's `torch._prims_common.elementwise_dtypes(*args, type_promotion_kind=...)` on a kernel's
tensors and tile values, in host code (SUBSTITUTES, frontend/td_names.py).

FlagGems' pointwise operators decide their computation and result dtypes with it
(`flag_gems.utils.type_utils.type_promotion`). torch's function accepts only torch's tensors and
Python numbers, so each kernel tensor or tile value stands in as an empty tensor on torch's
`meta` device of the same dtype and of the same rank, zero or more (torch ranks 0-d tensors
below the others), and a Python-number tile value as a number of its kind. The answer is then
torch's own, for every promotion kind, in torch's dtypes as torch gives them.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from tiledsl.frontend.host_scalars import HostScalar
from tiledsl.frontend.td_names import SUBSTITUTES
from tiledsl.frontend.values import Tensor, TileValue

_FUNCTIONS = frozenset({"elementwise_dtypes"})


def _stand_in(torch: Any, a: Any) -> Any:
    """What torch's type promotion is given for `a`: a meta tensor of its dtype and rank, or a
    Python number of the kind of a weak (Python number's) tile value or an `.item()`."""
    if isinstance(a, HostScalar):
        a = a.tensor
        return (False if a.dtype.name == "bool" else 0.0 if a.dtype.is_float else 0)
    if isinstance(a, TileValue) and a.weak:
        return 0.0 if a.dtype.is_float else (False if a.dtype.name == "bool" else 0)
    if isinstance(a, (Tensor, TileValue)):
        return torch.empty((0,) * len(a.shape) if len(a.shape) else (),
                           dtype=getattr(torch, a.dtype.name), device="meta")
    return a


def promotion_call(fn: Any) -> Callable[..., Any] | None:
    """What a kernel calls for torch._prims_common's `elementwise_dtypes`, else None."""
    if getattr(fn, "__module__", None) != "torch._prims_common" or \
            getattr(fn, "__name__", None) not in _FUNCTIONS:
        return None
    torch = sys.modules["torch"]

    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*(_stand_in(torch, a) for a in args),
                  **{k: _stand_in(torch, v) for k, v in kwargs.items()})
    return call


SUBSTITUTES.insert(0, promotion_call)  # (before torch_calls.dtype_arguments, which is torch's)
