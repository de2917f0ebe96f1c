"""One call site, one block size: the block-size symbols of `td.tile` calls are keyed by where
the call is written, so every trace of one call (a `td.tile` inside an unrolled Python
`for r in range(R)`, a helper called twice) cuts its size with one tunable block size, as
Helion ties a block size to its `hl.tile` call. A fixed `block_size=` makes no symbol at all.
"""

from __future__ import annotations

import sys
from typing import Hashable

from tiledsl.errors import is_internal

Site = tuple[Hashable, ...]


def call_site() -> Site | None:
    """Where the innermost user frame is now: file, line and (Python 3.11+) the column span of
    the expression it runs, so two `td.tile` calls on one line are two sites."""
    frame = sys._getframe(1)
    while frame is not None and is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    code = frame.f_code
    span: tuple = ()
    if hasattr(code, "co_positions") and frame.f_lasti >= 0:
        for i, pos in enumerate(code.co_positions()):
            if i == frame.f_lasti // 2:
                span = tuple(pos)
                break
    return (code.co_filename, frame.f_lineno, *span)
