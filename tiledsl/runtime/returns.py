"""What a kernel call returns, built from its trace's outputs: nothing, one tensor, or a tuple.

A trace records the form of the kernel's `return` as a string (`Traced.returns`, a package's
manifest `returns`):
- "none": `return` alone, or no return (the kernel writes into its arguments);
- "single": one tensor;
- "tuple": a tuple (or list) of tensors;
- "tuple:" and the elements, comma-separated, when the tuple holds something besides tensors:
  "tensor", "None", or a number the trace computed, "int:1024", "float:1e-06", "bool:True".
  `return o, None` is "tuple:tensor,None". An optional output the caller did not ask for
  (flash-linear-attention's `return o, final_state` with `final_state = None`; vLLM's
  `return out, None, rstd`) comes back as None in its place, as from the Python it was ported
  from; a number (Liger's forwards return `y, x, rstd, BLOCK_SIZE, num_warps` for their
  backward) comes back as that number. A trace is made for one set of shapes and compile-time
  arguments, so such numbers are fixed per trace. The trace's outputs are the tensors alone,
  in order.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TENSOR, NONE = "tensor", "None"
NUMBERS: dict[str, type] = {"bool": bool, "int": int, "float": float}


def is_number(value: Any) -> bool:
    """Whether a returned element is a Python number (not a tensor, not None)."""
    return type(value) in (bool, float) or isinstance(value, int)  # int: also a traced size


def _element(value: Any) -> str:
    if value is None:
        return NONE
    if is_number(value):
        kind = type(value).__name__ if type(value) in (bool, float) else "int"
        return f"{kind}:{NUMBERS[kind](value)!r}"
    return TENSOR


def form(result: Any) -> tuple[list[Any], str]:
    """The tensors of `result` (what the kernel body returned) and the form of its return."""
    if result is None:
        return [], "none"
    if not isinstance(result, (tuple, list)):
        return [result], "single"
    items = list(result)
    parts = [_element(r) for r in items]
    tensors = [r for r, p in zip(items, parts) if p == TENSOR]
    return tensors, "tuple" if len(tensors) == len(items) else "tuple:" + ",".join(parts)


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
    return tuple(next(tensors) if p == TENSOR else _value(p) for p in parts)


def _value(part: str) -> Any:
    """The None or number an element other than "tensor" stands for."""
    if part == NONE:
        return None
    kind, _, text = part.partition(":")
    return (text == "True") if kind == "bool" else NUMBERS[kind](text)


def tensors(result: Any) -> list[Any]:
    """The tensors of a call's result (`pack`'s inverse, Nones and numbers dropped)."""
    if result is None:
        return []
    items = result if isinstance(result, tuple) else (result,)
    return [r for r in items if r is not None and not is_number(r)]
