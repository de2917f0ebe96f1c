"""Room for a tensor in host memory: the NumPy, spatial and triton-interpret backends allocate
every output and temporary there, so a tensor larger than the machine's memory is an
ArgumentError before NumPy is asked (NumPy raises its own MemoryError, or on a system that
overcommits memory the process is killed while the array is filled)."""

from __future__ import annotations

import math
import os
from functools import cache

import numpy as np

from tiledsl.errors import ArgumentError, Loc
from tiledsl.ir.core import Function
from tiledsl.ir.ops import ALLOCATIONS
from tiledsl.ir.types import TensorType


@cache
def host_memory() -> int | None:
    """The bytes this process may use: the machine's memory, or its cgroup's limit if lower
    (None where neither can be read)."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return min(limits) if limits else None


def check_room(shape: tuple[int, ...], dtype: np.dtype, loc: Loc | None = None) -> None:
    """Raise ArgumentError when a tensor of `shape` and `dtype` cannot fit in host memory."""
    size = math.prod(shape) * np.dtype(dtype).itemsize
    limit = host_memory()
    if limit is not None and size > limit:
        raise ArgumentError(f"a tensor of shape {tuple(shape)} and dtype {np.dtype(dtype)} "
                            f"takes {_bytes(size)}, more than this machine's memory "
                            f"({_bytes(limit)})", loc=loc,
                            hint="the numpy, spatial and triton-interpret backends hold every "
                                 "tensor in host memory: run them on smaller sizes")


def _bytes(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.1f} {unit}" if unit != "bytes" else f"{n} bytes"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"


def check_allocations(fn: Function) -> None:
    """`check_room` for every tensor a kernel allocates, before anything is sized by them (the
    spatial mapper places every tile of a grid)."""
    for op in fn.walk():
        t = op.results[0].type if op.name in ALLOCATIONS else None
        if isinstance(t, TensorType):
            check_room(t.shape, t.dtype.np, op.loc)
