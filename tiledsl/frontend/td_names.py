"""The functions of the `td.` namespace by name, filled in by tiledsl/__init__.py once it has
imported them, for the modules that map another library's name to tiledsl's
(lang/torch_calls.py, frontend/foreign_calls.py) without importing the package they are part
of."""

from __future__ import annotations

from typing import Any, Callable

FUNCTIONS: dict[str, Callable[..., Any]] = {}
