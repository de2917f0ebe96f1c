"""Persistent loops: `for tm, tn in td.tile(m, n)[p::P]` walks every P-th tile of the (m, n)
tiles, numbered row-major, from tile p, as Triton's persistent matmul (tutorial 09) walks
`for tile_id in tl.range(start_pid, num_tiles, NUM_SMS)`:

    for p in td.grid(P):                       # P programs (say, one per SM)
        for tm, tn in td.tile(m, n)[p::P]:     # each takes tiles p, p + P, p + 2P, ...
            acc = td.zeros((tm, tn), dtype=td.float32)
            for tk in td.tile(k):
                acc += a[tm, tk] @ b[tk, tn]
            c[tm, tn] = acc

The slice counts tiles, not elements (`td.tile(n, start=s)` starts at an element); the number
of tiles follows from the block sizes, so a program stops where the tiles run out. Its start
may be a runtime scalar (the grid index), its step is an int.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from tiledsl.errors import TraceError
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, to_value

if TYPE_CHECKING:
    from tiledsl.lang.language import TileRange


def strided(rng: TileRange, key: Any) -> TileRange:
    tr = current("td.tile(...)[start::step]")
    usage = "write td.tile(m, n)[p::P]: every P-th tile from tile p (P an int)"
    if rng.kind != "tile" or not isinstance(key, slice):
        tr.fail(TraceError, f"td.{rng.kind}(...) takes a slice of tiles, [start::step]",
                loc=rng.loc, hint=usage)
    if rng.stride is not None or rng.stop is not None or rng.start is not None:
        tr.fail(TraceError, "a strided loop of tiles cannot have a runtime stop, a start= or a "
                "second slice", loc=rng.loc, hint=usage)
    if key.stop is not None:
        tr.fail(TraceError, "a slice of tiles runs to the last tile: [start::step] takes no "
                "stop", loc=rng.loc, hint=usage)
    step = 1 if key.step is None else key.step
    if isinstance(step, TileValue) or not isinstance(step, (int, np.integer)) or \
            isinstance(step, bool) or step < 1:
        tr.fail(TraceError, f"the step of a slice of tiles must be a positive int, got {step!r}",
                loc=rng.loc, hint=usage)
    first = to_value(0 if key.start is None else key.start)
    if first.shape != () or not first.dtype.is_int:
        tr.fail(TraceError, f"the start of a slice of tiles is an integer scalar, got "
                f"{first.dtype}{tr.describe_shape(first.shape)}", loc=rng.loc, hint=usage)
    return dataclasses.replace(rng, first=first, stride=int(step))
