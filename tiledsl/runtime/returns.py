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
- "subclass:N", alone or as an element: a torch tensor subclass host code made around kernel
  tensors (frontend/tensor_subclasses.py), rebuilt from its inner tensors by `REBUILDS[N]` of
  this process (so a package or a custom op refuses it).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TENSOR, NONE = "tensor", "None"
NUMBERS: dict[str, type] = {"bool": bool, "int": int, "float": float}


@dataclass(frozen=True, eq=False)
class Rebuild:
    """How a returned tensor subclass is made again from its inner tensors (torch's
    `__tensor_unflatten__`), with what its `__tensor_flatten__` gave while tracing."""
    cls: type
    names: tuple[str, ...]
    ctx: Any
    size: tuple[int, ...]
    stride: tuple[int, ...]

    def __call__(self, tensors: Sequence[Any]) -> Any:
        import torch
        from tiledsl.interop.arrays import from_numpy  # (16-bit floats through their bits)
        inner = {n: t if isinstance(t, torch.Tensor) else
                 from_numpy(t, torch.empty(0)) if hasattr(t, "__array_interface__") else
                 torch.from_dlpack(t) for n, t in zip(self.names, tensors)}
        return self.cls.__tensor_unflatten__(inner, self.ctx, self.size, self.stride)


REBUILDS: list[Rebuild] = []  # "subclass:N" -> REBUILDS[N]


def is_subclass(value: Any) -> bool:
    """Whether `value` is a torch tensor subclass with torch's `__tensor_flatten__`."""
    return hasattr(type(value), "__tensor_flatten__") and hasattr(value, "stride")


def _subclass(value: Any) -> str:
    names, ctx = value.__tensor_flatten__()
    REBUILDS.append(Rebuild(type(value), tuple(names), ctx, tuple(value.size()),
                            tuple(value.stride())))
    return f"subclass:{len(REBUILDS) - 1}"


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
    return _subclass(value) if is_subclass(value) else TENSOR


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
        return _inner([result]), _subclass(result) if is_subclass(result) else "single"
    parts = [_element(r) for r in result]
    tensors = _inner([r for r in flat(result) if r is not None and not is_number(r)])
    return tensors, "tuple" if all(p == TENSOR for p in parts) else "tuple:" + ",".join(parts)


def _inner(items: list[Any]) -> list[Any]:
    """`items` with each tensor subclass replaced by its inner tensors."""
    return [x for r in items for x in (inner_tensors(r) if is_subclass(r) else [r])]


def inner_tensors(value: Any) -> list[Any]:
    """A tensor subclass's inner tensors, as its `__tensor_flatten__` names them."""
    return [getattr(value, n) for n in value.__tensor_flatten__()[0]]


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
    if returns.startswith("subclass:"):
        return _count(returns)
    parts = elements(returns)
    return None if parts is None else sum(_count(p) for p in parts)


_ELEMENT = re.compile(r"tensor|None|bool:(True|False)|int:-?[0-9]+|float:[-+.0-9a-z]+|"
                      r"subclass:[0-9]+")


def _count(part: str) -> int:
    """The tensors element `part` holds; a ValueError if it is none of the elements."""
    if part[:1] in "[(" and part[-1:] == {"[": "]", "(": ")"}[part[0]]:
        inner = elements("tuple:" + part[1:-1]) if part[1:-1] else []
        return sum(_count(p) for p in inner or ())
    if not _ELEMENT.fullmatch(part):
        raise ValueError(f"{part!r} is not an element of a return form")
    if part.startswith("subclass:"):
        return len(_rebuild(part).names)
    return part == TENSOR


def _rebuild(part: str) -> Rebuild:
    """The Rebuild a "subclass:N" element names; a ValueError where this process has none."""
    n = int(part.partition(":")[2])
    if n >= len(REBUILDS):
        raise ValueError(f"{part!r} names no tensor subclass of this process")
    return REBUILDS[n]


def pack(outputs: Sequence[Any], returns: str) -> Any:
    """What `k(*args)` returns for the trace's `outputs` (the tensors, in order)."""
    if returns == "none":
        return None
    if returns == "single":
        return outputs[0]
    if returns.startswith("subclass:"):
        return _unpacked(returns, iter(outputs))
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
    if part.startswith("subclass:"):
        rebuild = _rebuild(part)
        return rebuild([next(tensors) for _ in rebuild.names])
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
    return result if result is None or is_number(result) or is_subclass(result) else f(result)
