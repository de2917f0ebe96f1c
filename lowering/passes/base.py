"""What a pass is: a small named transformation of a kernel's IR, applied in place."""

from __future__ import annotations

import math
from typing import Protocol

from tiledsl.ir.core import Function
from tiledsl.ir.types import TileType


class Pass(Protocol):
    name: str  # kebab-case, as in pipeline listings and golden file names

    def run(self, fn: Function) -> None: ...


def approx_numel(t: TileType) -> float:
    """Elements of a tile, a symbolic block size counting as large (to tell a row from a tile
    before the block sizes are known)."""
    return math.prod(d if isinstance(d, int) else 1 << 20 for d in t.shape)
