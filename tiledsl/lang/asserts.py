"""Runtime assertions: `td.device_assert(cond, msg)` (Triton's `tl.device_assert`), and Python's
`assert cond, msg` on a tile value inside a grid, which the kernel's rewrite turns into one
(`check`). Each is the IR op `assert`: every lane in range must hold. The NumPy and spatial
backends check it on every run and raise `DeviceAssertionError` at the line; compiled Triton
code is `tl.device_assert`, which Triton checks only when compiled with TRITON_DEBUG=1.

An assertion on Python values (shapes, compile-time ints) is checked while tracing, as Python's
own; in host code a runtime int argument in it becomes compile-time, as in an `if`.
"""

from __future__ import annotations

from typing import Any, Callable

from tiledsl import dtypes
from tiledsl.errors import DTypeError, TraceError
from tiledsl.frontend.tracer import current
from tiledsl.frontend.host_scalars import HostScalar
from tiledsl.frontend.values import Tensor, TileValue, binary, broadcast_to, to_value, unary


def device_assert(cond: Any, msg: str = "", mask: Any = None) -> None:
    """Check at run time that `cond` holds in every lane in range (and, with `mask`, in
    every lane the mask selects), as `tl.device_assert(cond, msg, mask=...)`."""
    tr = current("td.device_assert()")
    if not isinstance(msg, str):
        tr.fail(TraceError, f"td.device_assert: msg must be a string, got {msg!r:.60}")
    if not isinstance(cond, TileValue):
        if not cond:
            tr.fail(TraceError, f"td.device_assert fails on every run: {msg or repr(cond)}",
                    hint="the condition is known while tracing (td.static_assert's kind)")
        return
    if tr.depth == "host":
        if not cond:  # a runtime int argument: compile-time now (static_args.py)
            raise AssertionError(msg)
        return
    v = cond
    if not v.dtype.is_bool:
        if v.dtype.is_float:
            tr.fail(DTypeError, f"td.device_assert: the condition is {v.dtype}, not bool",
                    hint="compare: td.device_assert(x == x, 'no NaN')")
        v = binary("ne", v, to_value(0))
    if mask is not None:
        v = binary("or", v, unary("not", to_value(mask)))
    for axis in range(v.ndim) if tr.jagged else ():  # lanes past a jagged row's length
        rows = tr.jagged_rows(tr, v.value, axis)
        if rows is not None:
            v = binary("or", v, unary("not", broadcast_to(rows, v.shape)))
    assert v.dtype == dtypes.bool_
    tr.emit("assert", [v.value], {"msg": msg})


def _no_grids(value: HostScalar, msg: str, line: int) -> None:
    raise AssertionError("tiledsl.lang.host_asserts is not imported")


# (value, message, line) -> a grid of one program asserting `value`: host_asserts.py sets it
on_data: Callable[[HostScalar, str, int], None] = _no_grids


def check(test: Any, msg: Callable[[], Any] | None, line: int) -> None:
    """`assert test, msg` in a kernel: a device assertion on a tile value inside a grid, or on
    the data in host code (a one-element tensor, or its `.item()`: Liger's `assert
    (target * target_mask).max() < V`, in a grid of one program), else Python's own (the
    message is computed only when it fails)."""
    tr = current()
    data = tr.depth == "host" and (isinstance(test, HostScalar) or isinstance(test, Tensor)
                                   and all(d == 1 for d in test.shape))
    if isinstance(test, TileValue) and tr.depth != "host" or data:
        text = msg() if msg is not None else ""
        if isinstance(text, TileValue):
            tr.fail(TraceError, "an assert's message is a tile value", hint="give a string")
        if data:  # (loops.py imports this module: the grid is made by a hook of its own)
            on_data(test if isinstance(test, HostScalar) else HostScalar(test), str(text), line)
        else:
            device_assert(test, str(text))
    elif not test:
        raise AssertionError(msg()) if msg is not None else AssertionError


__all__ = ["device_assert"]
