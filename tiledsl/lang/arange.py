"""`td.arange`: a vector of consecutive integers inside a tile loop, as Triton's `tl.arange`
and Helion's `hl.arange`.

`td.arange(n)` is `0, 1, ..., n - 1` and `td.arange(start, end)` is `start, ..., end - 1`, int32
unless `dtype=`. The length is static, as Triton's: a power of two (an int, or an int argument,
which the kernel then specializes on), or a block size of `td.register_block_size`, whose
symbol becomes the vector's dimension, so `td.zeros((bs_m, bs_n))` and `td.arange(bs_m)` line
up. Added to a program's base it indexes tensors as any integer tile does (a gather or a
scatter, ir/gathers.py), with the bounds given as a mask:

    offs = pid * 64 + td.arange(0, 64)
    x = td.load(x_ptr, [offs], mask=offs < n)

Op `arange`, one rule per backend: NumPy's `np.arange`, Triton's `tl.arange`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl import dtypes
from tiledsl.errors import ShapeError, TraceError
from tiledsl.frontend.block_sizes import BlockSize, shape_dim
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, as_dtype, need_static
from tiledsl.ir.types import Dim, TileType


def _int(v: Any, what: str) -> int:
    need_static(v)  # an int argument: the kernel traces again with it as a Python int
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        current().fail(TraceError, f"td.arange(): {what} must be an int known when tracing "
                       f"(or a td.register_block_size), got {v!r}",
                       hint="the length of a vector is static, as tl.arange's: for a runtime "
                            "extent, take a static length and mask the lanes past it "
                            "(mask=offs < n)")
    return int(v)


def _length(start: int, end: Any) -> Dim:
    """The vector's one dimension: a registered block size's symbol or a power of two."""
    if isinstance(end, BlockSize):
        if start != 0:
            current().fail(TraceError, "td.arange(start, bs): a block size gives the length, "
                           "so the start must be 0", hint="add the start: start + td.arange(bs)")
        return shape_dim(end)
    n = _int(end, "end") - start
    if n < 1 or n & (n - 1):
        current().fail(ShapeError, f"td.arange({start}, {start + n}): the length must be a "
                       f"power of two, got {n}",
                       hint="as Triton's tl.arange: take the next power of two "
                            "(td.next_power_of_2) and mask the lanes past the end")
    return n


def arange(start_or_end: Any, end: Any = None, step: Any = None, *,
           dtype: Any = None) -> Any:
    """`td.arange(n)`: 0, ..., n - 1; `td.arange(start, end)`: start, ..., end - 1 (int32
    unless `dtype`). The length is a power of two or a registered block size. In host code it
    is torch's `torch.arange(start, end, step)`, a new tensor (host_tensors.py)."""
    tr = current("td.arange()")
    if tr.depth == "host":
        from tiledsl.lang.host_tensors import arange_tensor  # (it makes a grid: loops.py)
        return arange_tensor(start_or_end, end, 1 if step is None else step, dtype)
    if step not in (None, 1):
        tr.fail(TraceError, f"td.arange(..., step={step!r}) inside a tile loop: a tile's lanes "
                "step by 1", hint="scale the lanes: start + td.arange(0, n) * step")
    lanes = _tile_lanes(start_or_end if end is None else end)
    if lanes is not None and (end is None or start_or_end == 0):
        return lanes if dtype is None else lanes.to(as_dtype(dtype, "td.arange"))
    start = 0 if end is None else _int(start_or_end, "start")
    dim = _length(start, start_or_end if end is None else end)
    d = dtypes.int32 if dtype is None else as_dtype(dtype, "td.arange")
    if not d.is_int:
        tr.fail(TraceError, f"td.arange(): dtype must be an integer dtype, got {d}",
                hint="cast the result: td.arange(n).to(td.float32)")
    if isinstance(dim, int) and start + dim - 1 > np.iinfo(d.np).max:
        tr.fail(ShapeError, f"td.arange({start}, {start + dim}) does not fit in {d}")
    out = tr.emit("arange", [], {"start": start}, [TileType((dim,), d)], hint="arange")
    return TileValue(out[0])


def _tile_lanes(v: Any) -> TileValue | None:
    """Helion's `hl.arange(tile.block_size)` inside that tile's loop: the tile's lanes, 0 up
    to its block size (`tile.index - tile.begin`); None for any other length."""
    owner = v.value.owner if isinstance(v, TileValue) else None
    if owner is None or owner.name != "tile.block_size":
        return None
    tr = current()
    r = owner.operands[0]
    index = TileValue(tr.emit("tile.index", [r], hint="lanes")[0])
    return index - TileValue(tr.emit("tile.begin", [r])[0])
