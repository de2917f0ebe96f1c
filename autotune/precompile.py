"""Compilation in a process pool, overlapped with timing: while the tuner measures one candidate,
workers compile the ones the strategy expects to try next (`Evaluator.prefetch`), so the
measurement finds them compiled. Triton's own @autotune compiles serially.

Two kinds of compile, by what the runner needs:

- `jit` (the GPU runner): `k.warm`, which fills Triton's on-disk JIT cache with exactly what the
  measuring process's launch will look up (lowering/backends/triton/warmup.py);
- `aot` (the model runner): `k.compile`, the PTX/cubin and resource usage in tiledsl's cache.

Either way the worker also prices what it compiled with the cost model (autotune/model.py), so
a GPU tune can skip timing a config predicted far slower than one it measured (prune.py).

Each hint replaces the last: queued compiles it no longer names are cancelled, so workers follow
the strategy. A candidate whose compile has not started when it is measured is compiled by the
measurement itself, as without a pool. A worker that dies (a compiler crash takes its process
with it) costs the compiles then in the pool, not the tune: a new pool takes over, up to
`MAX_RESTARTS` times, and after that nothing is compiled ahead. A compile still running after
`timeout` seconds (a compiler that hangs) is left to its worker and the measurement compiles the
config, under the measuring process's own timeout.

A compile needs an array argument's layout, never its data: the workers get `ArrayLayout`s, and
each job stands the arrays up again over fresh, untouched memory. Each job pickled the arrays
themselves before (64 MiB for a 4096^2 fp16 GEMM, 256 MiB at 8192^2, and up to `workers + 1`
jobs queued at once).
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import BrokenExecutor, Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.isolate import adopt_environment, cache_environment
from tiledsl.runtime.config import Config
from tiledsl.frontend.static_args import map_arrays

MAX_WORKERS = 16
MAX_RESTARTS = 3  # new pools after workers died; then the measurements compile


@dataclass(frozen=True)
class ArrayLayout:
    """An array argument as a compile sees it: shape, dtype, strides (in bytes, any sign) and
    whether it may be written; no data."""
    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...]
    writeable: bool

    @classmethod
    def of(cls, a: Any) -> Any:
        """`a`'s layout if it is an array with elements to lay out; anything else (a scalar, a
        0-d array, which holds a scalar's value) as it is."""
        if not isinstance(a, np.ndarray) or a.ndim == 0:
            return a
        return cls(tuple(int(n) for n in a.shape), a.dtype, tuple(int(s) for s in a.strides),
                   bool(a.flags.writeable))

    def array(self) -> np.ndarray:
        """An array of this layout over memory nobody wrote (np.empty: the pages are not
        touched, so even a large one costs little)."""
        if 0 in self.shape:
            low = high = 0
        else:
            ends = [(n - 1) * s for n, s in zip(self.shape, self.strides)]
            low = sum(e for e in ends if e < 0)
            high = sum(e for e in ends if e > 0)
        buffer = np.empty(high - low + self.dtype.itemsize, np.uint8)
        out: np.ndarray = np.ndarray(self.shape, self.dtype, buffer=buffer, offset=-low,
                                     strides=self.strides)
        out.flags.writeable = self.writeable
        return out


def compile_config(file: str, name: str, args: list[Any], config: dict, kind: str, arch: str,
                   num_sms: int | None, source: str | None = None
                   ) -> tuple[str | None, float | None]:
    """Compile one config (in a worker). Returns why it failed (None if it did not) and the cost
    model's prediction in microseconds from what was compiled (None if there is none). With
    `source`, a kernel file edited since the tune started is refused (runners.load_kernel)."""
    from autotune import model
    from autotune.runners import load_kernel
    args = map_arrays(args, lambda a: a.array() if isinstance(a, ArrayLayout) else a)
    try:
        kernel = load_kernel(file, name, source)
        cfg = Config.from_dict(config)
        if kind == "jit":
            resources = model.warmed_resources(kernel, args, cfg, arch, num_sms)
        else:
            resources = model.compiled_resources(kernel, args, cfg, arch)
    except Exception as e:  # noqa: BLE001 - the tuner records it as a failed trial later
        return f"{type(e).__name__}: {e}", None
    try:
        return None, model.predict(kernel, args, cfg, resources)
    except Exception:  # noqa: BLE001 - a kernel the model cannot price is timed unpruned
        return None, None


def default_workers() -> int:
    """One per core but one (the measuring process's), at most MAX_WORKERS."""
    return max(1, min(MAX_WORKERS, (os.cpu_count() or 2) - 1))


class Precompiler:
    """`submit` configs as soon as they are known; compiles run in `workers` processes."""

    def __init__(self, file: str, name: str, args: list[Any], kind: str = "aot",
                 arch: str = "sm_90", num_sms: int | None = None,
                 workers: int | None = None, source: str | None = None,
                 timeout: float = 60.0) -> None:
        assert kind in ("aot", "jit")
        self.job = (file, name, map_arrays(args, ArrayLayout.of), kind, arch, num_sms, source)
        self.timeout = timeout  # seconds `wait` waits for a compile that has started
        self.workers = workers or default_workers()
        self.pool: ProcessPoolExecutor | None = self._pool()
        self.pending: dict[Config, Future] = {}
        self.predicted: dict[Config, float] = {}  # microseconds, for configs waited for
        self.restarts = 0

    def _pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"),
                                   initializer=adopt_environment,
                                   initargs=(cache_environment(),))

    def _broken(self) -> None:
        """A worker died and took the pool with it: every compile in it is lost. Start another
        pool (or, after MAX_RESTARTS, stop compiling ahead)."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        self.pending.clear()
        self.restarts += 1
        self.pool = self._pool() if self.restarts <= MAX_RESTARTS else None

    def submit(self, configs: list[Config], replace: bool = False) -> None:
        """Queue `configs` (in order) for compiling. With `replace`, first cancel the queued
        compiles of configs not among them (running and finished ones stay)."""
        if replace:
            keep = set(configs)
            for c, future in list(self.pending.items()):
                if c not in keep and future.cancel():
                    del self.pending[c]
        file, name, args, kind, arch, num_sms, source = self.job
        for c in configs:
            while c not in self.pending and self.pool is not None:
                try:
                    self.pending[c] = self.pool.submit(compile_config, file, name, args,
                                                       c.to_dict(), kind, arch, num_sms, source)
                except BrokenExecutor:  # since the last hint: the next pool takes it
                    self._broken()

    def wait(self, config: Config, limit: float | None = None) -> bool:
        """Before measuring `config`: wait for its compile if a worker has started it, else
        withdraw it (the measurement compiles it), waiting at most `limit` seconds (the tune's
        deadline) if sooner than the timeout. True if a worker compiled it; its cost-model
        prediction is then in `predicted`."""
        future = self.pending.pop(config, None)
        if future is None or future.cancel():
            return False
        try:
            _, predicted = future.result(timeout=self.timeout if limit is None else
                                         max(0.0, min(self.timeout, limit)))
        except FutureTimeout:  # hung: its worker stays busy, the measurement compiles
            return False
        except BrokenExecutor:
            self._broken()
            return False
        if predicted is not None:
            self.predicted[config] = predicted
        return True

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
