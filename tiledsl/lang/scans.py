"""Scans, folds and sorts along one axis of a tile: `td.associative_scan`, `td.reduce`,
`td.sort`, `td.argsort` and `td.topk` (the IR ops `scan`, `fold` and `sort`, tiledsl/ir/ops.py).

A scan's combine function is a Python function of scalar tile values, traced once into the
scan op's region (on Triton, a `@triton.jit` function of the generated module, as
`tl.associative_scan` takes). The NumPy backend scans lane by lane from the first (the last,
with `reverse=True`); Triton combines in a tree, so a float combine that is not exactly
associative (a sum) may differ in the last bits. A fold (`td.reduce`, `tl.reduce`) combines a
row's lanes as a scan's last lane does, and Triton in its own tree order; lanes out of range
take no part in either (on Triton a flag rides along, as in a masked scan).

A sort orders the lanes as NumPy's stable sort does: NaN after every number, equal values in
lane order (-0.0 and 0.0 are equal); descending is the exact reverse order, but equal values
stay in lane order (NaN first). Out-of-range lanes (past a ragged edge, padding, before a
runtime start) never come before in-range ones; `td.topk` over fewer than k in-range lanes
returns position -1 and -inf (the dtype's minimum; +inf and maximum with `largest=False`) for
the missing ones. Along a `td.jagged_tile`'s axis, the lanes past each row's own length are out
of range too (a reversed scan skips them; a sort puts them last).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl.dtypes import DType
from tiledsl.errors import ShapeError, TraceError
from tiledsl.ir.core import Block, Value, clone_block
from tiledsl.ir.ops import ELEMENTWISE, has_trait
from tiledsl.ir.types import TileType
from tiledsl.frontend.rewrite import _helper as helper
from tiledsl.frontend.tracer import Tracer, current
from tiledsl.frontend.values import TileValue, broadcast_shapes, broadcast_to, cast, to_value
from tiledsl.lang import language

# What a combine function may compute: scalar math, and the constants and casts it needs.
_COMBINE_OPS = frozenset({"const", "cast", "broadcast"})


def _axis(tr: Tracer, what: str, axis: Any, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or \
            not -ndim <= axis < ndim:
        tr.fail(ShapeError, f"{what}: axis {axis!r} is not an axis of a {ndim}-D tile",
                hint=f"{what} runs along one constant axis, e.g. axis=-1")
    return int(axis) % ndim


def associative_scan(x: Any, axis: Any = None, combine_fn: Any = None, reverse: bool = False,
                     *, dim: int | None = None) -> Any:
    """Inclusive scan of `x` (a tile, or a tuple of tiles of one shape) along `axis` with
    `combine_fn(a..., b...)`, which takes the running values then the lane's and returns the
    combined ones (one per tile), as `tl.associative_scan`. Returns a tile or a tuple.

    Helion's order, `td.associative_scan(combine_fn, x, dim)` (`dim=` a keyword or third), is
    the same scan."""
    tr = current("td.associative_scan()")
    xs, single, axis, combine_fn = _operands(tr, "td.associative_scan", x, axis, combine_fn,
                                             dim)
    a = _axis(tr, "td.associative_scan", axis, xs[0].ndim)
    region = _combine_region(tr, "td.associative_scan", xs, combine_fn, single)
    attrs = {"axis": a, "reverse": bool(reverse), "n": len(xs)}
    rows = _jagged_rows(tr, xs, a) if reverse else None  # forward: they come after a row's
    results = tr.emit("scan", [v.value for v in xs] + ([rows] if rows else []),
                      {**attrs, "masked": True} if rows else attrs)
    op = tr.blocks[-1].ops[-1]
    op.regions.append(region)
    values = [TileValue(r) for r in results]
    return values[0] if single else tuple(values)


def reduce(x: Any, axis: Any = None, combine_fn: Any = None, keep_dims: bool = False, *,
           dim: int | None = None, other: Any = 0) -> Any:
    """`x` (a tile, or a tuple of tiles of one shape) reduced along `axis` (all axes with None)
    by `combine_fn(a..., b...)`, as `tl.reduce`. The combine must be associative and
    commutative (Triton combines lanes in its own tree order, NumPy from the first lane).
    Out-of-range lanes take no part; a row with none in range gives `other` (one per tile).

    Helion's `td.reduce(combine_fn, x, dim=None, other=0, keep_dims=False)` is the same."""
    tr = current("td.reduce()")
    if callable(x) and not isinstance(x, (TileValue, tuple, list)):  # Helion's order
        x, axis, combine_fn = axis, combine_fn, x
        if not isinstance(keep_dims, bool):  # its fourth is other=
            other, keep_dims = keep_dims, False
    xs, single, axis, combine_fn = _operands(tr, "td.reduce", x, axis, combine_fn, dim)
    others = list(other) if isinstance(other, (tuple, list)) else [other] * len(xs)
    if len(others) != len(xs):
        tr.fail(TraceError, f"td.reduce: {len(others)} other= values for {len(xs)} tiles",
                hint="other=0, or one number per tile: what a row with no lane in range gives")
    empty = [_number(tr, o, v.dtype) for o, v in zip(others, xs)]
    rank = xs[0].ndim
    axes = range(rank - 1, -1, -1) if axis is None else [_axis(tr, "td.reduce", axis, rank)]
    region = _combine_region(tr, "td.reduce", xs, combine_fn, single)
    for a in axes:  # the last axis first: the lanes in row-major order
        rows = _jagged_rows(tr, xs, a)
        attrs = {"axis": a, "keepdims": bool(keep_dims), "n": len(xs),
                 "empty": empty}
        results = tr.emit("fold", [v.value for v in xs] + ([rows] if rows else []),
                          {**attrs, "masked": True} if rows else attrs)
        tr.blocks[-1].ops[-1].regions.append(region if a == axes[0] else clone_block(region, {}))
        xs = [TileValue(r) for r in results]
    return xs[0] if single else tuple(xs)


def _number(tr: Tracer, value: Any, dtype: DType) -> Any:
    """`value` (td.reduce's other=) as a Python number of `dtype`'s kind, checked to fit."""
    if not isinstance(value, (int, float, bool, np.number)):
        tr.fail(TraceError, f"td.reduce: other= must be a number, got {value!r:.60}",
                hint="other=0: what a row with no lane in range gives")
    if dtype.is_float:
        return float(value)
    if dtype.is_bool:
        return bool(value)
    info = np.iinfo(dtype.np)
    if not (np.isfinite(float(value)) and float(value) == int(value) and
            info.min <= int(value) <= info.max):
        tr.fail(TraceError, f"td.reduce: other={value!r} does not fit a {dtype} tile",
                hint="give one other= per tile: other=(float('-inf'), 0)")
    return int(value)


def _operands(tr: Tracer, what: str, x: Any, axis: Any, combine_fn: Any, dim: Any
              ) -> tuple[list[TileValue], bool, Any, Any]:
    """A scan's or fold's tiles (broadcast to one shape), whether one was given bare, its axis
    and combine function, from Triton's argument order or Helion's (the function first)."""
    if callable(x) and not isinstance(x, (TileValue, tuple, list)):  # Helion's argument order
        x, axis, combine_fn = axis, combine_fn, x
    if dim is not None:
        if axis is not None:
            tr.fail(TraceError, f"{what}: give the axis once (axis or dim=)")
        axis = dim
    single = not isinstance(x, (tuple, list))
    xs = [to_value(v) for v in ([x] if single else x)]
    if not xs:
        tr.fail(TraceError, f"{what} needs at least one tile")
    shape = broadcast_shapes(tr, [v.shape for v in xs])
    if not shape:
        tr.fail(ShapeError, f"{what} needs a tile, got a scalar")
    return [broadcast_to(v, shape) for v in xs], single, axis, combine_fn


def _combine_region(tr: Tracer, what: str, xs: list[TileValue], combine_fn: Any,
                    single: bool) -> Block:
    """`combine_fn` traced on scalars of the tiles' dtypes into a region (two arguments per
    tile: the running values, then the lane's), checked to compute with its arguments only."""
    if not callable(combine_fn):
        tr.fail(TraceError, f"{what}: combine_fn must be a function, got {combine_fn!r:.60}",
                hint="def combine(a, b): return a + b")
    combine_fn = helper(combine_fn)  # its `and`, `or` and `not` elementwise, as a kernel's
    scalars = [TileType((), v.dtype) for v in xs]
    region = Block([Value(t, n) for n, t in zip("ab", scalars * 2)] if len(xs) == 1 else
                   [Value(t, f"{s}{i}") for s in "ab" for i, t in enumerate(scalars)])
    with tr.region(region, "combine"):
        out = combine_fn(*(TileValue(v) for v in region.args))
        outs = [out] if single and not isinstance(out, (tuple, list)) else list(out)
        if len(outs) != len(xs):
            tr.fail(TraceError, f"{what}: combine_fn returned {len(outs)} values for "
                    f"{len(xs)} tiles", hint="return one combined value per tile")
        outs = [_combined(tr, what, o, t) for o, t in zip(outs, scalars)]
        tr.emit("yield", [o.value for o in outs])
    _check_combine(tr, what, region)
    return region


def _combined(tr: Tracer, what: str, out: Any, t: TileType) -> TileValue:
    v = to_value(out)
    if v.shape != ():
        tr.fail(ShapeError, f"{what}: combine_fn must return scalars (it combines one lane at "
                "a time)", hint="compute with its arguments only")
    if v.dtype != t.dtype and not v.weak:
        tr.fail(TraceError, f"{what}: combine_fn returned {v.dtype} for a "
                f"{t.dtype} tile", hint=f"cast the result: (...).astype(td.{t.dtype})")
    return cast(v, t.dtype)


def _check_combine(tr: Tracer, what: str, region: Block) -> None:
    for op in region.ops[:-1]:
        if not (has_trait(op.name, ELEMENTWISE) or op.name in _COMBINE_OPS):
            tr.fail(TraceError, f"{what}: combine_fn may only compute with its scalar "
                    f"arguments, but it uses '{op.name}'", loc=op.loc,
                    hint="loads, loops, reductions and branches belong outside combine_fn; "
                         "use td.where to select")
        for o in op.operands:
            if o.owner not in region.ops and o not in region.args:
                tr.fail(TraceError, f"{what}: combine_fn uses a value from "
                        "outside it (a tile or a scalar of the kernel)", loc=op.loc,
                        hint="pass what it needs as another scanned tile, or a Python constant")


def _sort(name: str, x: Any, axis: Any, descending: bool, k: int | None,
          positions: bool) -> list[Value]:
    tr = current(f"td.{name}()")
    v = to_value(x)
    if v.ndim == 0:
        tr.fail(ShapeError, f"td.{name} needs a tile, got a scalar")
    a = _axis(tr, f"td.{name}", axis, v.ndim)
    if k is not None:
        n = v.shape[a]
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            tr.fail(ShapeError, f"td.topk: k must be a positive int, got {k!r}")
        if isinstance(n, str):
            tr.fail(ShapeError, f"td.topk along axis {a}, a tile whose block size the config "
                    "chooses: k may exceed it", hint="take the whole row (x[i, :]) or give "
                    "the tile a block_size= of at least k")
        if k > n:
            tr.fail(ShapeError, f"td.topk: k={k} exceeds the {n} lanes of axis {a}")
    attrs = {"axis": a, "descending": bool(descending), "k": None if k is None else int(k),
             "positions": positions}
    rows = _jagged_rows(tr, [v], a)
    return tr.emit("sort", [v.value] + ([rows] if rows else []),
                   {**attrs, "masked": True} if rows else attrs)


def _jagged_rows(tr: Tracer, xs: list[TileValue], axis: int) -> Value | None:
    """The lanes in range along `axis` when it is a `td.jagged_tile`'s (frontend/jagged.py):
    lanes past each row's own length act as out of range, as past a ragged edge."""
    for x in xs if tr.jagged else ():
        rows = tr.jagged_rows(tr, x.value, axis)
        if rows is not None:
            return broadcast_to(rows, x.shape).value
    return None


def sort(x: Any, axis: int = -1, descending: bool = False, *, dim: int | None = None
         ) -> TileValue:
    """The lanes of `x` sorted along `axis` (or torch's and Triton's `dim=`; NumPy's order,
    stable; see the module docstring), as `tl.sort`. Out-of-range lanes come last."""
    return TileValue(_sort("sort", x, _dim(axis, dim), descending, None, False)[0])


def argsort(x: Any, axis: int = -1, descending: bool = False, *, dim: int | None = None
            ) -> TileValue:
    """The positions (int32, from the tile's first lane) that sort `x` along `axis` (`dim=`),
    as `np.argsort(x, kind="stable")` (descending: the reverse order, ties in lane order)."""
    return TileValue(_sort("argsort", x, _dim(axis, dim), descending, None, True)[1])


def topk(x: Any, k: int, axis: int = -1, largest: bool = True, *, dim: int | None = None
         ) -> tuple[TileValue, TileValue]:
    """The `k` largest lanes of `x` along `axis` (`dim=`; smallest with `largest=False`), best
    first, and their positions (int32, from the tile's first lane), as `torch.topk`; ties go
    to the first lane."""
    values, pos = _sort("topk", x, _dim(axis, dim), largest, k, True)
    return TileValue(values), TileValue(pos)


def _dim(axis: int, dim: int | None) -> int:
    """The axis, given as NumPy's `axis` or torch's `dim=` (not both)."""
    if dim is None:
        return axis
    if axis != -1:
        current().fail(TraceError, "give the axis once: axis= (NumPy) or dim= (torch)")
    return dim


__all__ = ["argsort", "associative_scan", "reduce", "sort", "topk"]


language.associative_scan = associative_scan  # td.cumsum(..., reverse=True)
