"""`td.jagged_tile(lengths)`, Helion's `hl.jagged_tile`: a loop over the tiles of
`[0, max(lengths))` whose rows' lanes past their own lengths are masked in the loads and
stores that use them (tiledsl/frontend/jagged.py builds the masks)."""

from __future__ import annotations

from typing import Any

from tiledsl.errors import TraceError
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, reduce, to_value
from tiledsl.lang.language import TileRange, tile


def jagged_tile(lengths: Any, block_size: Any = None) -> Any:
    """The tiles of `[0, max(lengths))`, each row's lanes past its own length masked in the
    loads and stores that use them (see the module's docstring)."""
    tr = current("td.jagged_tile()")
    v = to_value(lengths)
    if not v.dtype.is_int or v.ndim > 1:
        tr.fail(TraceError, f"td.jagged_tile() takes an integer scalar or a 1-D integer tile of "
                f"lengths, got {v.dtype}{tr.describe_shape(v.shape)}",
                hint="one length per row of the enclosing tile, e.g. nnz = ends - starts")
    longest = v if v.ndim == 0 else TileValue(reduce("max", v, 0, False).value)
    rng = tile(longest, block_size=block_size)
    return TileRange(rng.sizes, rng.block_sizes, "tile", rng.loc, rng.stop, site=rng.site,
                     jagged=v)
