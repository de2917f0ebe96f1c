"""What a kernel call returns, built from its trace's outputs: nothing, one tensor, or a tuple.

A trace records the form of the kernel's `return` as a string (`Traced.returns`, a package's
manifest `returns`):
- "none": `return` alone, or no return (the kernel writes into its arguments);
- "single": one tensor;
- "tuple": a tuple (or list) of tensors;
- "tuple:" and the elements, comma-separated, each "tensor" or "None", when the tuple holds a
  None: `return o, None` is "tuple:tensor,None". An optional output the caller did not ask for
  (flash-linear-attention's `return o, final_state` with `final_state = None`; vLLM's
  `return out, None, rstd`) comes back as None in its place, as from the Python it was ported
  from. The trace's outputs are the tensors alone, in order.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TENSOR, NONE = "tensor", "None"


def form(result: Any) -> tuple[list[Any], str]:
    """The tensors of `result` (what the kernel body returned) and the form of its return."""
    if result is None:
        return [], "none"
    if not isinstance(result, (tuple, list)):
        return [result], "single"
    items = list(result)
    if all(r is not None for r in items):
        return items, "tuple"
    return ([r for r in items if r is not None],
            "tuple:" + ",".join(NONE if r is None else TENSOR for r in items))


def elements(returns: str) -> list[str] | None:
    """The elements of a tuple form with a None ("tensor" or "None"), else None."""
    return returns[len("tuple:"):].split(",") if returns.startswith("tuple:") else None


def outputs_needed(returns: str) -> int | None:
    """How many outputs a form returns; None for "tuple" (any number)."""
    if returns in ("none", "single"):
        return {"none": 0, "single": 1}[returns]
    parts = elements(returns)
    return None if parts is None else parts.count(TENSOR)


def pack(outputs: Sequence[Any], returns: str) -> Any:
    """What `k(*args)` returns for the trace's `outputs` (the tensors, in order)."""
    if returns == "none":
        return None
    if returns == "single":
        return outputs[0]
    parts = elements(returns)
    if parts is None:
        return tuple(outputs)
    tensors = iter(outputs)
    return tuple(None if p == NONE else next(tensors) for p in parts)


def tensors(result: Any) -> list[Any]:
    """The tensors of a call's result (`pack`'s inverse, Nones dropped)."""
    if result is None:
        return []
    items = result if isinstance(result, tuple) else (result,)
    return [r for r in items if r is not None]
