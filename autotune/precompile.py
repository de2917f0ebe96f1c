"""Ahead-of-time compilation in a process pool, overlapped with timing: while the tuner
measures one candidate, workers compile the next ones into the on-disk compile cache, so the
measurement finds them compiled (Triton's own @autotune compiles serially)."""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from tiledsl.config import Config


def compile_config(file: str, name: str, args: list[Any], config: dict, arch: str) -> str | None:
    """Compile one config (in a worker); returns why it failed, or None."""
    from autotune.runners import load_kernel
    try:
        kernel = load_kernel(file, name)
        kernel.compile(*args, config=Config.from_dict(config), arch=arch)
        return None
    except Exception as e:  # noqa: BLE001 - the tuner records it as a failed trial later
        return f"{type(e).__name__}: {e}"


class Precompiler:
    """Submit configs as soon as they are known; compiles run in `workers` processes."""

    def __init__(self, file: str, name: str, args: list[Any], arch: str = "sm_90",
                 workers: int | None = None) -> None:
        self.job = (file, name, args, arch)
        count = workers or max(1, min(4, (os.cpu_count() or 2) - 1))
        self.pool = ProcessPoolExecutor(max_workers=count, mp_context=mp.get_context("spawn"))
        self.pending: dict[Config, Future] = {}

    def submit(self, configs: list[Config]) -> None:
        file, name, args, arch = self.job
        for c in configs:
            if c not in self.pending:
                self.pending[c] = self.pool.submit(compile_config, file, name, args, c.to_dict(), arch)

    def wait(self, config: Config) -> None:
        """Block until `config`'s compile (if submitted) is done."""
        future = self.pending.get(config)
        if future is not None:
            future.result()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
