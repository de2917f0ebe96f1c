"""Helion's names for what tiledsl already has, so that a kernel ported from Helion keeps its
spelling: `td.specialize(n)` (a size as a Python int), `td.static_range(...)` (an unrolled loop),
`td.tile_begin(t)` / `tile_end` / `tile_id` / `tile_index` / `tile_block_size` (a tile's
attributes), `td.subscript(v, index)` (`v[index]`) and `td.cumprod(x, dim)` (a scan). Each is a
composition of existing ops or plain Python: none adds an op to the IR.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl import dtypes
from tiledsl.errors import TraceError
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tile, TileValue, binary, cast, need_static, to_value
from tiledsl.lang.scans import associative_scan


def barrier() -> None:
    """Helion's `hl.barrier()` between two grids of one kernel: the grids already run one after
    the other (each is a launch, in order), so there is nothing to wait for. Inside a grid,
    where Helion's persistent kernels sync every program, it is an error."""
    tr = current("td.barrier()")
    if tr.depth != "host":
        tr.fail(TraceError, "td.barrier() is called inside a grid: the programs of one grid "
                "run in any order and cannot wait for each other",
                hint="end the grid there and start another: grids of one kernel run one after "
                     "the other, so the second sees all the first wrote")


def specialize(v: Any) -> Any:
    """Helion's `hl.specialize`: a size (or a tuple of them) as a Python int, known while the
    kernel traces. Shapes are ints already; an int argument passed here makes the kernel trace
    once per value it takes, as a size or `range()` bound does."""
    tr = current("td.specialize()")
    if isinstance(v, (tuple, list)):
        return tuple(specialize(x) for x in v)
    need_static(v)  # an int argument: the kernel traces again with it as a Python int
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    what = "a value computed while the kernel runs" if isinstance(v, TileValue) else \
        type(v).__name__
    tr.fail(TraceError, f"td.specialize() takes a size or an int argument, got {what}",
            hint="x.shape[d] and x.size(d) are ints already; an int argument is specialized")


def static_range(begin_or_end: Any, end: Any = None, step: Any = 1) -> tuple[int, ...]:
    """Helion's `hl.static_range` (Triton's `tl.static_range`): a loop unrolled while the
    kernel traces, over specialized ints (a tuple: a long unrolled `range` warns, this says
    the unrolling is meant)."""
    current("td.static_range()")
    bounds = (0, begin_or_end, step) if end is None else (begin_or_end, end, step)
    return tuple(range(*(specialize(b) for b in bounds)))


def _tile(what: str, t: Any) -> Tile:
    if not isinstance(t, Tile):
        current().fail(TraceError, f"td.{what}() takes a tile of a td.tile() loop, got "
                       f"{type(t).__name__}")
    return t


def tile_begin(t: Any) -> TileValue:
    """Helion's `hl.tile_begin(t)`: `t.begin`."""
    return _tile("tile_begin", t).begin


def tile_end(t: Any) -> TileValue:
    """Helion's `hl.tile_end(t)`: `t.end`."""
    return _tile("tile_end", t).end


def tile_id(t: Any) -> TileValue:
    """Helion's `hl.tile_id(t)`: `t.id`."""
    return _tile("tile_id", t).id


def tile_index(t: Any) -> TileValue:
    """Helion's `hl.tile_index(t)`: `t.index`."""
    return _tile("tile_index", t).index


def tile_block_size(t: Any) -> TileValue:
    """Helion's `hl.tile_block_size(t)`: `t.block_size`."""
    return _tile("tile_block_size", t).block_size


def subscript(v: Any, index: Any) -> TileValue:
    """Helion's `hl.subscript(v, [None, slice(None)])`: `v[None, :]`."""
    current("td.subscript()")
    return to_value(v)[tuple(index) if isinstance(index, list) else index]


def cumprod(x: Any, dim: Any = None, reverse: bool = False) -> TileValue:
    """Inclusive prefix products along `dim` (as `td.cumsum`: 16-bit floats multiply and return
    float32, ints and bools int64), as Helion's `hl.cumprod` and `torch.cumprod`."""
    current("td.cumprod()")
    v = to_value(x)
    if v.dtype.is_float and v.dtype.bits < 32:
        v = cast(v, dtypes.float32)
    elif not v.dtype.is_float:
        v = cast(v, dtypes.int64)
    return associative_scan(v, dim, lambda a, b: binary("mul", a, b), reverse)
