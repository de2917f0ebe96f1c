"""A runner that misbehaves on purpose, for the isolation tests (imported by a child process)."""

from __future__ import annotations

import os
import time

from tiledsl.config import Config


class Misbehaving:
    """block 1: hangs; block 2: kills its process; block 3: raises; others: measure = block."""

    def measure(self, config: Config) -> float:
        b = config.block_sizes[0]
        if b == 1:
            time.sleep(3600)
        if b == 2:
            os._exit(13)  # as if the GPU raised an illegal memory access
        if b == 3:
            raise RuntimeError("kernel launch failed")
        return float(b)

    time = measure


def make() -> Misbehaving:
    return Misbehaving()
