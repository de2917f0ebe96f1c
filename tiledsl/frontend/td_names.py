"""The functions of the `td.` namespace by name, filled in by tiledsl/__init__.py once it has
imported them, for the modules that map another library's name to tiledsl's
(lang/torch_calls.py, frontend/foreign_calls.py, frontend/helpers.py) without importing the package they are part
of."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, Callable

FUNCTIONS: dict[str, Callable[..., Any]] = {}

# Triton's functions whose meaning in a @triton.jit body differs from td's of that name
# (`tl.topk` gives values alone, td's and torch's values and positions): lang/triton_names.py
TRITON_ONLY: dict[str, Callable[..., Any]] = {}


class _TritonLanguage(ModuleType):
    """`triton.language` as a @triton.jit body reads it (frontend/helpers.py): td, except the
    names in TRITON_ONLY."""

    def __getattr__(self, name: str) -> Any:
        found = TRITON_ONLY.get(name)
        return found if found is not None else getattr(sys.modules["tiledsl"], name)


TRITON_LANGUAGE = _TritonLanguage("tiledsl (as triton.language)")

# Maps from another library's callables to what a kernel calls instead, or None (the first
# that answers wins): lang/torch_calls.py's `host_call` (torch.empty(m, n, dtype=x.dtype)).
SUBSTITUTES: list[Callable[[Any], Callable[..., Any] | None]] = []


def of_torch(fn: Any) -> bool:
    """Whether `fn` is torch's own: its module is `torch` or `torch.*` (not torchao's or
    torchvision's, whose functions a kernel traces as any library's)."""
    module = getattr(fn, "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


def substitute(fn: Any) -> Any:
    """What a kernel calls for `fn(...)` where `fn` is not a Python function: a td function in
    its place (SUBSTITUTES), else `fn`."""
    for lookup in SUBSTITUTES:
        found = lookup(fn)
        if found is not None:
            return found
    return fn
