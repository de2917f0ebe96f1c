"""A runner that misbehaves on purpose, for the isolation tests (imported by a child process)."""

from __future__ import annotations

import os
import time

from tiledsl.runtime.config import Config


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


class EnvProbe:
    """measure: 1.0 if this process's TILEDSL_CACHE_DIR is `expected`, else 0.0."""

    def __init__(self, expected: str) -> None:
        self.expected = expected

    def measure(self, config: Config) -> float:
        return float(os.environ.get("TILEDSL_CACHE_DIR") == self.expected)


def env_probe(expected: str) -> EnvProbe:
    return EnvProbe(expected)
