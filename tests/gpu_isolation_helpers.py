"""Runners that fail as a GPU runner can, for the isolation tests (imported by a child
process)."""

from __future__ import annotations

import os
from pathlib import Path

from tiledsl.runtime.config import Config
from tiledsl.errors import BackendError


class StickyContext:
    """A GPU runner's failure modes: block 5 hits "an illegal memory access", after which every
    call fails (a sticky CUDA error) and `healthy()` is False; block 6 fails alone (a launch
    error that leaves the context usable). Otherwise a measurement is the process id."""

    def __init__(self) -> None:
        self.dead = False

    def measure(self, config: Config) -> float:
        if self.dead:
            raise RuntimeError("CUDA error: an illegal memory access was encountered (earlier)")
        if config.block_sizes[0] == 5:
            self.dead = True
            raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                               "CUDA kernel errors might be asynchronously reported")
        if config.block_sizes[0] == 6:
            raise RuntimeError("out of resources: shared memory")
        return float(os.getpid())

    time = measure

    def healthy(self) -> bool:
        return not self.dead


def sticky() -> StickyContext:
    return StickyContext()


def fails_setup(log: str) -> None:
    """A factory that cannot build its runner; each attempt adds a line to `log`."""
    with open(log, "a") as f:
        f.write("setup\n")
    raise BackendError("no GPU in this process")


def kernel_file(folder: Path, body: str = "y[tn] = x[tn] + 1") -> Path:
    """A kernel file `bump.py` whose kernel's body is `body`."""
    path = folder / "bump.py"
    path.write_text(f'''
import tiledsl as td


@td.tile_kernel
def bump(x, y):
    (n,) = x.shape
    for tn in td.tile(n):
        {body}
''')
    return path
