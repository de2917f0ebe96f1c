"""NumPy rules of `tile.id` and `tile.block_size` (tiledsl/frontend/block_sizes.py): a range's runtime
state (`RangeRT`) has each program's `begin` and the config's block, so a tile's index along
its loop is `begin // block`."""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy.executor import Executor, rule
from lowering.backends.numpy.memory import RangeRT
from tiledsl.ir.core import Op


@rule("tile.id")
def _tile_id(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    r: RangeRT = xs[0]
    return [(r.begin // r.block).astype(op.result.type.dtype.np)]  # type: ignore[union-attr]


@rule("tile.block_size")
def _tile_block_size(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    r: RangeRT = xs[0]
    return [np.full_like(r.begin, r.block, dtype=op.result.type.dtype.np)]  # type: ignore[union-attr]
