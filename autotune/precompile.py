"""Compilation in a process pool, overlapped with timing: while the tuner measures one candidate,
workers compile the ones the strategy expects to try next (`Evaluator.prefetch`), so the
measurement finds them compiled. Triton's own @autotune compiles serially.

Two kinds of compile, by what the runner needs:

- `jit` (the GPU runner): `k.warm`, which fills Triton's on-disk JIT cache with exactly what the
  measuring process's launch will look up (lowering/backends/triton/warmup.py);
- `aot` (the model runner): `k.compile`, the PTX/cubin and resource usage in tiledsl's cache.

Each hint replaces the last: queued compiles it no longer names are cancelled, so workers follow
the strategy. A candidate whose compile has not started when it is measured is compiled by the
measurement itself, as without a pool.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from autotune.isolate import adopt_environment, cache_environment
from tiledsl.config import Config

MAX_WORKERS = 16


def compile_config(file: str, name: str, args: list[Any], config: dict, kind: str, arch: str,
                   num_sms: int | None) -> str | None:
    """Compile one config (in a worker); returns why it failed, or None."""
    from autotune.runners import load_kernel
    try:
        kernel = load_kernel(file, name)
        if kind == "jit":
            kernel.warm(*args, config=Config.from_dict(config), arch=arch, num_sms=num_sms)
        else:
            kernel.compile(*args, config=Config.from_dict(config), arch=arch)
        return None
    except Exception as e:  # noqa: BLE001 - the tuner records it as a failed trial later
        return f"{type(e).__name__}: {e}"


def default_workers() -> int:
    """One per core but one (the measuring process's), at most MAX_WORKERS."""
    return max(1, min(MAX_WORKERS, (os.cpu_count() or 2) - 1))


class Precompiler:
    """`submit` configs as soon as they are known; compiles run in `workers` processes."""

    def __init__(self, file: str, name: str, args: list[Any], kind: str = "aot",
                 arch: str = "sm_90", num_sms: int | None = None,
                 workers: int | None = None) -> None:
        assert kind in ("aot", "jit")
        self.job = (file, name, args, kind, arch, num_sms)
        self.pool = ProcessPoolExecutor(max_workers=workers or default_workers(),
                                        mp_context=mp.get_context("spawn"),
                                        initializer=adopt_environment,
                                        initargs=(cache_environment(),))
        self.pending: dict[Config, Future] = {}

    def submit(self, configs: list[Config], replace: bool = False) -> None:
        """Queue `configs` (in order) for compiling. With `replace`, first cancel the queued
        compiles of configs not among them (running and finished ones stay)."""
        if replace:
            keep = set(configs)
            for c, future in list(self.pending.items()):
                if c not in keep and future.cancel():
                    del self.pending[c]
        file, name, args, kind, arch, num_sms = self.job
        for c in configs:
            if c not in self.pending:
                self.pending[c] = self.pool.submit(compile_config, file, name, args,
                                                   c.to_dict(), kind, arch, num_sms)

    def wait(self, config: Config) -> bool:
        """Before measuring `config`: wait for its compile if a worker has started it, else
        withdraw it (the measurement compiles it). True if a worker compiled it."""
        future = self.pending.pop(config, None)
        if future is None or future.cancel():
            return False
        future.result()
        return True

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
