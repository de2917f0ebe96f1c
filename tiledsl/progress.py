"""Progress bars for long operations (tuning, re-timing, replaying, sweeps over configs).

Every bar is tqdm in its automatic mode by default: shown when its stream (stderr) is a
terminal, left out when it is a log file or a pipe, so CI logs and `... | tee` stay clean.
`show=True` forces a bar, `show=False` hides it (`--no-progress` on the shell).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def progress_bar(total: int | None, desc: str, unit: str = "it", show: bool | None = None,
                 initial: int = 0) -> Any:
    """A tqdm bar on stderr: automatic (`show=None`: a terminal only), forced, or hidden. It
    clears itself when closed (`leave=False`): the tables printed after it stay readable."""
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, leave=False,
                disable=None if show is None else not show)


def tracked(items: Iterable[Any], desc: str, unit: str = "it", show: bool | None = None,
            total: int | None = None) -> Iterable[Any]:
    """`items`, with a bar that advances as each is taken (see `progress_bar`)."""
    items = list(items) if total is None else items
    bar = progress_bar(len(items) if total is None else total, desc, unit, show)  # type: ignore[arg-type]
    try:
        for item in items:
            yield item
            bar.update(1)
    finally:
        bar.close()
