"""`td.range`: Triton's `tl.range`, a loop in the generated code rather than unrolled while
tracing (Python's `range` over ints is unrolled; `td.static_range` says so explicitly).

- Over ints from `lo >= 0` with step 1: a sequential loop of one-element tiles (the loop
  form of `td.grid` inside the grid), each trip's index a scalar: one `for` in the Triton code.
- Over a runtime bound: each program runs to its own bound, as `range(lo, hi, step)` does in a
  kernel (a `while` loop, frontend/loops.py).
- Otherwise (a step other than 1 over ints): Python's range, unrolled.

Triton's tuning keywords (`num_stages=`, `loop_unroll_factor=`, `warp_specialize=`,
`disallow_acc_multi_buffer=`, `flatten=`) are accepted and left to Triton's defaults: the
config's `num_stages` pipelines the kernel's loops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl.errors import TraceError, user_loc
from tiledsl.frontend.loops import range_
from tiledsl.frontend.sites import call_site
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, to_value
from tiledsl.lang.language import TileRange

_TUNING = ("num_stages", "loop_unroll_factor", "warp_specialize", "disallow_acc_multi_buffer",
           "flatten")


def range(*args: Any, **tuning: Any) -> Any:  # noqa: A001 (mirrors tl.range)
    """`td.range([lo,] hi[, step])`: a loop over lo, lo + step, ... below hi (see the module's
    docstring)."""
    tr = current("td.range()")
    unknown = sorted(set(tuning) - set(_TUNING))
    if unknown:
        tr.fail(TraceError, f"td.range() got an unexpected keyword argument {unknown[0]!r}",
                hint="Triton's tl.range keywords are " + ", ".join(_TUNING))
    if tr.depth == "host" or any(isinstance(a, TileValue) for a in args):
        return range_(*args)
    lo, hi, step = (0, *args, 1)[:3] if len(args) == 1 else (*args, 1)[:3]
    ints = all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args)
    if not ints or step != 1 or lo < 0 or hi <= lo:
        return range_(*args)
    start = to_value(int(lo)) if lo else None
    return TileRange((int(hi),), (1,), "grid", user_loc(),
                     stop=to_value(int(hi)) if start is not None else None, start=start,
                     site=call_site())
