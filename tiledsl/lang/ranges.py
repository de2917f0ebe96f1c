"""`td.range`: Triton's `tl.range`, a loop in the generated code rather than unrolled while
tracing (Python's `range` over ints is unrolled; `td.static_range` says so explicitly).

- Over ints from `lo >= 0` with step 1: a sequential loop of one-element tiles (the loop
  form of `td.grid` inside the grid), each trip's index a scalar: one `for` in the Triton code.
  Where the body steps a pointer or an int offset bound before the loop (`p_o += D`, fla's
  fused_recurrent), it is a counted loop, as below, whose steps the race check follows
  (frontend/loops.py).
- Over a runtime bound: each program runs to its own bound, as `range(lo, hi, step)` does in a
  kernel (a `while` loop, frontend/loops.py).
- Otherwise (over ints with a step other than 1, or from below 0): a counted loop over
  constant bounds, the same `for i in range(lo, hi, step)` in the Triton code (Liger's
  multi-block softmax, `td.range(0, n_cols, BLOCK)`).

Triton's tuning keywords (`num_stages=`, `loop_unroll_factor=`, `warp_specialize=`,
`disallow_acc_multi_buffer=`, `flatten=`) are accepted. Over a runtime bound they reach the
generated `tl.range` (Triton pipelines the loads of a loop without a dot only when its
`tl.range` asks: sm_90, a row loop of the softmax tutorial's form, 24 LDGSTS with
`num_stages=3` against none without). Over ints they are left to Triton's defaults: the
config's `num_stages` pipelines the kernel's loops that hold dots.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from tiledsl.errors import TraceError, user_loc
from tiledsl.frontend.loops import range_
from tiledsl.frontend.sites import call_site
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, to_value
from tiledsl.lang.language import Counted, TileRange

_TUNING = ("num_stages", "loop_unroll_factor", "warp_specialize", "disallow_acc_multi_buffer",
           "flatten")


def range(*args: Any, **tuning: Any) -> Any:  # noqa: A001 (mirrors tl.range)
    """`td.range([lo,] hi[, step])`: a loop over lo, lo + step, ... below hi (see the module's
    docstring)."""
    tr = current("td.range()")
    if "step" in tuning:  # Triton's `tl.range(lo, hi, step=BLOCK)`
        step = tuning.pop("step")
        args = (0, *args, step) if len(args) == 1 else (*args[:2], step) if len(args) == 2 \
            else (*args, step)  # three positional and step=: range()'s own error
    unknown = sorted(set(tuning) - set(_TUNING))
    if unknown:
        tr.fail(TraceError, f"td.range() got an unexpected keyword argument {unknown[0]!r}",
                hint="Triton's tl.range keywords are " + ", ".join(_TUNING))
    if tr.depth == "host" or any(isinstance(a, TileValue) for a in args):
        loop = range_(*args)
        return replace(loop, tuning=_tuning(tuning)) if isinstance(loop, Counted) else loop
    lo, hi, step = (0, *args, 1)[:3] if len(args) == 1 else (*args, 1)[:3]
    ints = all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args)
    if not ints:
        return range_(*args)
    if step != 1 or lo < 0 or hi <= lo:  # a counted loop over constant bounds (frontend/loops.py)
        if step == 0:
            tr.fail(TraceError, "td.range(): the step must not be zero")
        return Counted(int(hi), user_loc(), int(lo), int(step), _tuning(tuning))
    start = to_value(int(lo)) if lo else None
    return TileRange((int(hi),), (1,), "grid", user_loc(),
                     stop=to_value(int(hi)) if start is not None else None, start=start,
                     site=call_site(), counted=Counted(int(hi), user_loc(), int(lo), 1,
                                                       _tuning(tuning)))


def _tuning(tuning: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The keywords as the loop's IR attribute: Python constants (bools, ints), sorted."""
    for name, value in tuning.items():
        if not isinstance(value, (bool, int, np.integer)):
            current().fail(TraceError, f"td.range(): {name}= must be an int or bool known when "
                           f"tracing, got {value!r}")
    return tuple(sorted((k, v if isinstance(v, bool) else int(v)) for k, v in tuning.items()))
