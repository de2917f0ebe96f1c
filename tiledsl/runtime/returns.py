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
  arguments, so such numbers are fixed per trace. An element may itself be a list or tuple of
  elements, written "[...]" or "(...)": mamba3's step returns `Out, [state, k, v, V]`, which
  is "tuple:tensor,[tensor,tensor,tensor,tensor]". The trace's outputs are the tensors alone,
  in order (depth first).
"""
from __future__ import annotations

import re
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
    if isinstance(value, (list, tuple)):
        inner = ",".join(_element(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return TENSOR


def flat(result: Any) -> list[Any]:
    """The elements of a returned tuple with its nested lists and tuples spliced in."""
    out: list[Any] = []
    for r in result:
        out.extend(flat(r) if isinstance(r, (list, tuple)) else [r])
    return out


def form(result: Any) -> tuple[list[Any], str]:
    """The tensors of `result` (what the kernel body returned) and the form of its return."""
    if result is None:
        return [], "none"
    if not isinstance(result, (tuple, list)):
        return [result], "single"
    parts = [_element(r) for r in result]
    tensors = [r for r in flat(result) if _element(r) == TENSOR]
    return tensors, "tuple" if all(p == TENSOR for p in parts) else "tuple:" + ",".join(parts)


def elements(returns: str) -> list[str] | None:
    """The elements of a tuple form that lists them (each "tensor", "None", a number, or a
    nested "[...]" / "(...)"), else None. A form that does not parse is a ValueError."""
    if not returns.startswith("tuple:"):
        return None
    parts, depth, start, text = [], 0, len("tuple:"), returns + ","
    for i in range(start, len(text)):
        c = text[i]
        depth += (c in "[(") - (c in "])")
        if depth < 0:
            raise ValueError(f"unbalanced brackets in the return form {returns!r}")
        if c == "," and depth == 0:
            parts.append(returns[start:i])
            start = i + 1
    if depth or any(not p for p in parts):
        raise ValueError(f"malformed return form {returns!r}")
    return parts


def outputs_needed(returns: str) -> int | None:
    """How many outputs a form returns; None for "tuple" (any number)."""
    if returns in ("none", "single"):
        return {"none": 0, "single": 1}[returns]
    parts = elements(returns)
    return None if parts is None else sum(_count(p) for p in parts)


_ELEMENT = re.compile(r"tensor|None|bool:(True|False)|int:-?[0-9]+|float:[-+.0-9a-z]+")


def _count(part: str) -> int:
    """The tensors element `part` holds; a ValueError if it is none of the elements."""
    if part[:1] in "[(" and part[-1:] == {"[": "]", "(": ")"}[part[0]]:
        inner = elements("tuple:" + part[1:-1]) if part[1:-1] else []
        return sum(_count(p) for p in inner or ())
    if not _ELEMENT.fullmatch(part):
        raise ValueError(f"{part!r} is not an element of a return form")
    return part == TENSOR


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
    return tuple(_unpacked(p, tensors) for p in parts)


def _unpacked(part: str, tensors: Any) -> Any:
    if part[:1] in "[(":
        inner = [_unpacked(p, tensors) for p in elements("tuple:" + part[1:-1]) or ()] \
            if part[1:-1] else []
        return inner if part[0] == "[" else tuple(inner)
    return next(tensors) if part == TENSOR else _value(part)


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
    items = flat(result) if isinstance(result, (tuple, list)) else [result]
    return [r for r in items if r is not None and not is_number(r)]


def map_tensors(result: Any, f: Any) -> Any:
    """A call's result with `f` applied to each tensor: nested lists and tuples kept, None and
    numbers as they are (a call on torch tensors hands its NumPy outputs back as torch's)."""
    if isinstance(result, (list, tuple)):
        return type(result)(map_tensors(r, f) for r in result)
    return result if result is None or is_number(result) else f(result)
