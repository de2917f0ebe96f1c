"""Helpers for the error tests (test_errors*.py): every bad input must raise a typed tiledsl
error that names the kernel and, when tracing, the offending line of the kernel's own file
(found by a `# <- here` marker in the kernel's source), with that source line in the message.
"""

from __future__ import annotations

import inspect
import linecache
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tiledsl as td

MARK = "# <- here"
RNG = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def f16(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float16)


# ---- helpers ----------------------------------------------------------------------------------
def marker_line(fn: Any, marker: str = MARK) -> int:
    """The line number (in its file) of the one line of `fn`'s source that ends with `marker`."""
    fn = getattr(fn, "fn", fn)
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(marker)]
    assert len(hits) == 1, f"{fn.__name__}: expected one line marked {marker!r}, found {hits}"
    return hits[0]


def msg(err: td.TileDSLError) -> str:
    """The message and hint alone (str(err) also shows the source line, which could match too)."""
    return f"{err.message}\n{err.hint or ''}"


def file_marker_line(marker: str, file: str) -> int:
    """The line number of the one line of `file` that ends with `marker`."""
    with open(file) as f:
        hits = [i for i, text in enumerate(f, 1) if text.rstrip().endswith(marker)]
    assert len(hits) == 1, f"expected one line marked {marker!r}, found {hits}"
    return hits[0]


def raised(cls: type[td.TileDSLError], call: Callable[..., Any], *args: Any,
           **kwargs: Any) -> td.TileDSLError:
    """Call and return the tiledsl error it raises; fail on no error or on a leaked exception."""
    try:
        call(*args, **kwargs)
    except td.TileDSLError as e:
        err = e
    except Exception as e:  # noqa: BLE001 - the point: nothing else may escape
        pytest.fail(f"leaked a non-tiledsl {type(e).__module__}.{type(e).__qualname__}: {e}")
    else:
        pytest.fail(f"no error raised (expected {cls.__name__})")
    assert isinstance(err, td.TileDSLError)
    assert type(err) is cls, f"expected {cls.__name__}, got {type(err).__name__}: {err}"
    return err


def check_named(err: td.TileDSLError, kernel: Any) -> None:
    kernel = getattr(kernel, "__self__", kernel)  # a bound method such as `k.run`
    assert err.kernel == kernel.name, str(err)
    assert f"in kernel '{kernel.name}'" in str(err), str(err)


def check_loc(err: td.TileDSLError, fn: Any, marker: str = MARK) -> None:
    line = marker_line(fn, marker)
    here = os.path.abspath(inspect.getsourcefile(getattr(fn, "fn", fn)) or "")
    assert err.loc is not None, f"no location: {err}"
    assert os.path.abspath(err.loc.file) == here, f"{err.loc} is not in {here}: {err}"
    assert err.loc.line == line, f"points at line {err.loc.line}, not {line}: {err}"
    source = linecache.getline(here, line).strip()
    assert source and source in str(err), f"source line {source!r} not shown in: {err}"


def trace_error(cls: type[td.TileDSLError], kernel: td.TileKernel, *args: Any,
                marker: str = MARK, **kwargs: Any) -> td.TileDSLError:
    """Run `kernel` and check the error: class, kernel name, location and the message's head."""
    err = raised(cls, kernel, *args, **kwargs)
    check_named(err, kernel)
    check_loc(err, kernel, marker)
    head = f"{err.loc.file}:{err.loc.line}: in kernel '{kernel.name}': "
    assert str(err).startswith(head), str(err)
    return err


def arg_error(cls: type[td.TileDSLError], kernel: Any, *args: Any,
              **kwargs: Any) -> td.TileDSLError:
    """An error raised before tracing: class and kernel name (no source location needed)."""
    err = raised(cls, kernel, *args, **kwargs)
    check_named(err, kernel)
    name = getattr(kernel, "__self__", kernel).name
    assert str(err).startswith(f"in kernel '{name}': "), str(err)
    return err


# ---- kernels that are fine (bad arguments or configs are passed to them) -----------------------
@td.tile_kernel
def add(x, y):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] + y[t]
    return out


@td.tile_kernel
def scale(x, alpha):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * alpha
    return out


@td.tile_kernel
def matmul(a, b):
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=td.float32)
        for tk in td.tile(k):
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc
    return out
