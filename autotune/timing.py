"""How the tuner times things: the same code for candidates and baselines.

* `wall_median_ms`: CPU wall clock, one warm-up call, median of repeats (`wall_times_ms`: each
  repeat's time, for the spread the tables show beside the median).
* `cuda_median_ms`: CUDA events around each call on the current stream, with the L2 cache
  flushed before every repeat (a 256 MiB write), warm-up calls first, median of repeats: what
  the GPU runner times candidates with and what the GPU baselines (CuPy / cuBLAS) are timed
  with, so the final table compares like with like. Before the start event the GPU is held
  busy (`HOLD_CYCLES` of `torch.cuda._sleep`) while the host enqueues the call: the events
  then time the GPU's work, not the host's dispatch. Without the hold, a call whose host side
  outlasts the flush (tiledsl's `k.run` on torch tensors took ~90 us on an H200, the flush
  ~70 us) left the GPU idle inside the timed region: a 4096^2 layer norm measured 0.07 ms.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

L2_FLUSH_BYTES = 256 * 2**20
HOLD_CYCLES = 1_000_000  # ~0.5 ms at an H100's or H200's 1.98 GHz: more than any host dispatch
_flush: dict[Any, Any] = {}


def wall_median_ms(fn: Callable[..., Any], repeats: int = 5,
                   setup: Callable[[], tuple] | None = None) -> float:
    """`fn()`, or `fn(*setup())` with the setup (fresh copies of arguments, say) not timed."""
    return float(statistics.median(wall_times_ms(fn, repeats, setup)))


def wall_times_ms(fn: Callable[..., Any], repeats: int = 5,
                  setup: Callable[[], tuple] | None = None) -> list[float]:
    """Each repeat's time of `fn()`, as `wall_median_ms` measures them (for a spread)."""
    def call() -> float:
        args = setup() if setup is not None else ()
        start = time.perf_counter()
        fn(*args)
        return (time.perf_counter() - start) * 1e3
    call()
    return [call() for _ in range(repeats)]


def cuda_median_ms(fn: Callable[[], Any], repeats: int = 20, warmup: int = 3,
                   setup: Callable[[], Any] | None = None) -> float:
    """`fn()` timed with CUDA events; `setup()` (restoring arguments a kernel writes in place,
    say) runs on the stream before every call, warm-ups included, outside the timed region and
    before the L2 flush."""
    return float(statistics.median(cuda_times_ms(fn, repeats, warmup, setup)))


def cuda_times_ms(fn: Callable[[], Any], repeats: int = 20, warmup: int = 3,
                  setup: Callable[[], Any] | None = None) -> list[float]:
    """Each repeat's time of `fn()`, as `cuda_median_ms` measures them (for a spread)."""
    import torch

    device = torch.cuda.current_device()
    if device not in _flush:
        _flush[device] = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    flush = _flush[device]
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    times = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        flush.zero_()
        torch.cuda._sleep(HOLD_CYCLES)  # the GPU stays busy while the host enqueues `fn`
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return times
