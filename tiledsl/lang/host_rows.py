"""torch's whole-row operations in host code: `torch.sort(x, dim)` (`x.sort(...)`),
`torch.argsort(x, dim)` and `x.cumsum(dim)` (`torch.cumsum`) between a wrapper's kernels
(SGLang's expert-parallel preprocess sorts the flattened top-k expert ids,
`torch.sort(topk_ids.view(-1), stable=True)`; fla's varlen wrappers take chunk offsets by
`cumsum`). Each is a grid of its own over the other dimensions, in which a program takes
whole rows along `dim` with `td.sort` / `td.argsort` (stable, NumPy's order: a stable result is
one torch may give for stable=False too) or `td.cumsum`. Indices are int64, and so are the sums
of ints and bools, as torch's; a float keeps its dtype (16-bit ones summed in float32).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tiledsl import dtypes
from tiledsl.errors import TraceError, user_loc
from tiledsl.frontend.loops import loop
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, TileValue, as_dtype, cast
from tiledsl.lang import language as lang
from tiledsl.lang.scans import argsort as tile_argsort
from tiledsl.lang.scans import sort as tile_sort


class Sorted(NamedTuple):
    """What torch.sort returns: `values, indices = torch.sort(x)`, or `.values`, `.indices`."""

    values: Tensor
    indices: Tensor


def sort(t: Tensor, dim: Any = -1, descending: bool = False, stable: bool = False
         ) -> Sorted:
    """torch's `torch.sort(x, dim, descending, stable=)` in host code."""
    _in_host(t, "sort")
    values = lang.empty(t.shape, t.dtype)
    indices = lang.empty(t.shape, dtypes.int64)
    _rows(t, "sort", dim, lambda v, d: [(values, tile_sort(v, d, descending)),
                                        (indices, _positions(v, d, descending))])
    return Sorted(values, indices)


def argsort(t: Tensor, dim: Any = -1, descending: bool = False, stable: bool = False
            ) -> Tensor:
    """torch's `torch.argsort(x, dim, descending, stable=)` in host code."""
    _in_host(t, "argsort")
    indices = lang.empty(t.shape, dtypes.int64)
    _rows(t, "argsort", dim, lambda v, d: [(indices, _positions(v, d, descending))])
    return indices


def cumsum(t: Tensor, dim: Any = None, *, dtype: Any = None, axis: Any = None) -> Tensor:
    """torch's `x.cumsum(dim, dtype=)` (`torch.cumsum`; `axis=`, NumPy's name, is torch's alias
    of `dim`: FlagGems' repeat_interleave) in host code."""
    _in_host(t, "cumsum")
    if (dim is None) == (axis is None):
        current().fail(TraceError, f"{t.name}.cumsum(): give the dimension once, as dim= "
                       "(or axis=)")
    dim = axis if dim is None else dim
    result = as_dtype(dtype, f"{t.name}.cumsum") if dtype is not None else \
        dtypes.int64 if t.dtype.is_int or t.dtype.is_bool else t.dtype
    sums = lang.empty(t.shape, result)
    _rows(t, "cumsum", dim, lambda v, d: [(sums, cast(lang.cumsum(v, d), result))])
    return sums


def _in_host(t: Tensor, what: str) -> None:
    tr = current(f"{t.name}.{what}()")
    if tr.depth != "host":
        tr.fail(TraceError, f"torch.{what} of the whole tensor '{t.name}' inside the grid",
                hint=f"take what a program loaded: td.{what}(x[t, :], dim=1)")


def _positions(v: TileValue, d: int, descending: bool) -> TileValue:
    return cast(tile_argsort(v, d, descending), dtypes.int64)


def _rows(t: Tensor, what: str, dim: Any, results: Any) -> None:
    """A grid over the dimensions other than `dim`; each program loads whole rows along it and
    stores what `results(rows, dim)` pairs with each output tensor."""
    tr = current(f"{t.name}.{what}()")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or \
            not -max(t.ndim, 1) <= dim < max(t.ndim, 1):
        tr.fail(TraceError, f"torch.{what}: dim must be one axis of the tensor's {t.ndim}, "
                f"got {dim!r}")
    if t.ndim == 0:
        tr.fail(TraceError, f"torch.{what} of a 0-d tensor in host code",
                hint="take a 1-D view: x.reshape(1)")
    d = int(dim) % t.ndim
    rest = [n for i, n in enumerate(t.shape) if i != d]

    def body(tiles: Any, env: dict) -> dict:
        outer = list(tiles) if isinstance(tiles, tuple) else [tiles] if rest else []
        index = tuple(outer[:d] + [slice(None)] + outer[d:])
        for out, v in results(t[index], d):
            out[index] = v
        return {}

    loc = user_loc()
    line = loc.line if loc is not None else 0
    if rest:
        loop(lang.tile(*rest), body, {}, (), None, line)
    else:  # a 1-D tensor: one program
        loop(lang.grid(1), lambda _p, env: body((), env), {}, (), None, line)


Tensor.sort = sort  # type: ignore[attr-defined]
Tensor.argsort = argsort  # type: ignore[attr-defined]
Tensor.cumsum = cumsum  # type: ignore[attr-defined]
