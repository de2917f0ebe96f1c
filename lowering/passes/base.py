"""What a pass is: a small named transformation of a kernel's IR, applied in place."""

from __future__ import annotations

from typing import Protocol

from tiledsl.ir.core import Function


class Pass(Protocol):
    name: str  # kebab-case, as in pipeline listings and golden file names

    def run(self, fn: Function) -> None: ...
