"""Loads and stores of the NumPy backend, vectorized over every program of the grid at once.

Every value inside a grid has shape `prefix + tile`: one prefix axis per grid axis (size 1 where
the value does not vary along it). A load gathers the tiles of all programs in one NumPy
operation: a view (reshape/slice/transpose, no copy) when no tile is partial; a view of a padded
copy when the tiles cover the whole tensor but the last ones are partial; otherwise a gather
with clipped indices. Out-of-range elements become the load's `other` value or poison (NaN for
floats), so that a missing mask shows up as a wrong result instead of hiding.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Iterator, Union

import numpy as np

from lowering.backends.numpy import conflicts
from lowering.backends.numpy.room import check_room
from tiledsl import dtypes
from tiledsl.errors import Loc
from tiledsl.ir.slices import Slice


@dataclass(frozen=True)
class RangeRT:
    """A range's runtime state: where each program's tile begins along it."""

    extent: int
    block: int
    begin: np.ndarray  # prefix-shaped int64
    grid_axis: int | None  # the grid axis it varies along; None for a loop's range
    stop: np.ndarray | None = None  # prefix-shaped: a `td.tile(stop)` loop's min(stop, extent)
    start: np.ndarray | None = None  # prefix-shaped: its start, clipped to [0, stop]
    shift: np.ndarray | None = None  # prefix-shaped: a `tile.shift`'s offset (x[tm + 1])

    def index(self) -> np.ndarray:
        return self.begin[..., None] + np.arange(self.block)

    def limit(self) -> np.ndarray | int:
        """Where each program's in-range lanes end (prefix-shaped, or the extent)."""
        return self.extent if self.stop is None else self.stop

    def lower(self) -> np.ndarray | int:
        """Where each program's in-range lanes begin (prefix-shaped, or 0)."""
        return 0 if self.start is None else self.start


def in_range(r: RangeRT) -> bool:
    """Whether every program's every lane of `r` lies in its range (nothing to mask): a grid's
    tiles that divide the extent, or a loop's tile (one place for all programs) before it ends,
    with no runtime stop or start."""
    if r.stop is not None or r.start is not None:
        return False
    if r.grid_axis is not None:
        return r.extent % r.block == 0
    return r.begin.size == 1 and int(r.begin.flat[0]) + r.block <= r.extent


@dataclass(frozen=True)
class GridScalar:
    """An index that is the program id along a grid axis of block 1 (from `td.grid`) whose
    extent is the whole tensor dimension it indexes."""

    axis: int


@dataclass(frozen=True)
class TileIndex:
    """An index tile (a gather's indices: prefix + its own tile shape), whose axes go to `axes`
    of the access's tile (tiledsl/ir/gathers.py)."""

    values: np.ndarray
    axes: tuple[int, ...]


Index = Union[RangeRT, GridScalar, TileIndex, np.ndarray, Slice, None]  # None: `:`


class OutOfRange(Exception):
    """A scalar index outside its dimension (the executor names the tensor and the line)."""

    def __init__(self, dim: int, value: int, size: int) -> None:
        super().__init__(dim, value, size)
        self.dim, self.value, self.size = dim, value, size


def poison(dtype: np.dtype) -> object:
    d = dtypes.from_any(dtype)
    return np.nan if d is None else dtypes.poison(d)


# What td.empty holds before a store writes it: for floats, a NaN whose payload no arithmetic
# makes (computed NaNs are NaN with an empty payload), so that elements no store wrote can be
# told from computed NaNs; integers, bools and fp8 (one NaN, or three) have no spare value and
# hold their poison.
_UNWRITTEN = {2: 0x7FED, 4: 0x7FC00DED, 8: 0x7FF8000000000DED}  # float16 and bfloat16 share 2


def empty(shape: tuple[int, ...], dtype: np.dtype, loc: Loc | None = None) -> np.ndarray:
    """A new tensor as td.empty allocates it: unwritten (see `unwritten`); under
    `second_fill`, integers and bools hold another value (see `second_fill`)."""
    dtype = np.dtype(dtype)
    check_room(shape, dtype, loc)
    bits, value = _unwritten_fill(dtype)
    if _SECOND[0] and bits == dtype and dtype.kind in "iub":
        value = (not value) if dtype.kind == "b" else value + (1 if dtype.kind == "i" else -1)
    return np.full(shape, value, bits).view(dtype)


_SECOND = [False]


@contextlib.contextmanager
def second_fill() -> Iterator[None]:
    """td.empty's integers and bools filled with another value than their poison: an integer
    has no spare value to mark what no store wrote, so the NumPy backend runs such a kernel
    twice, and an output element that differs between the runs was not written (or was
    computed from memory that was not)."""
    _SECOND[0] = True
    try:
        yield
    finally:
        _SECOND[0] = False


@functools.lru_cache(maxsize=64)
def _unwritten_fill(dtype: np.dtype) -> tuple[np.dtype, object]:
    """The dtype `empty` fills in (bits of the same width for floats) and the value."""
    d = dtypes.from_any(dtype)
    if d is not None and d.is_float and dtype.itemsize in _UNWRITTEN:
        return np.dtype(f"u{dtype.itemsize}"), _UNWRITTEN[dtype.itemsize]
    return dtype, poison(dtype)


def unwritten(arr: np.ndarray) -> np.ndarray | None:
    """Where a float tensor from `empty` still holds what it was allocated with (None for
    other dtypes: they cannot tell)."""
    d = dtypes.from_any(arr.dtype)
    if d is None or not d.is_float or arr.dtype.itemsize not in _UNWRITTEN:
        return None
    bits = np.ascontiguousarray(arr).view(np.dtype(f"u{arr.dtype.itemsize}"))
    return bits == _UNWRITTEN[arr.dtype.itemsize]


def _fast_axes(shape: tuple[int, ...], indices: list[Index], rank: int, padded: bool = False):
    """Slicing and reshaping that select every program's tile as a view, or None if a tile is
    partial. Returns (slices, reshape, axis tags) with tags ("g", grid axis) or ("t", tile pos).
    `padded`: `shape` is a tensor's padded to whole tiles (see `_padded`), longer than ranges'
    extents."""
    slices: list[object] = []
    new_shape: list[int] = []
    tags: list[tuple[str, int]] = []
    pos = 0
    for n, idx in zip(shape, indices):
        if idx is None:
            slices.append(slice(None))
            new_shape.append(n)
            tags.append(("t", pos))
            pos += 1
        elif isinstance(idx, GridScalar):
            slices.append(slice(None))
            new_shape.append(n)
            tags.append(("g", idx.axis))
        elif isinstance(idx, Slice):
            slices.append(slice(idx.start, idx.last + 1, idx.step))
            new_shape.append(idx.size)
            tags.append(("t", pos))
            pos += 1
        elif isinstance(idx, RangeRT):
            if idx.extent < n and idx.grid_axis is not None and not padded:
                return None  # a range over n indexing n + 1 elements covers the first n
            if idx.shift is not None:
                return None  # lanes shifted off the tensor are masked: gather
            if idx.grid_axis is not None:
                if n % idx.block:
                    return None
                slices.append(slice(None))
                new_shape += [n // idx.block, idx.block]
                tags += [("g", idx.grid_axis), ("t", pos)]
            else:
                if idx.begin.size != 1:
                    return None  # programs begin at different places (a subset of the grid)
                b = int(idx.begin.flat[0])
                limit = n if padded else \
                    min(n, idx.extent if idx.stop is None else int(idx.stop.min()))
                if b + idx.block > limit:
                    return None
                if idx.start is not None and b < int(idx.start.max()):
                    return None
                slices.append(slice(b, b + idx.block))
                new_shape.append(idx.block)
                tags.append(("t", pos))
            pos += 1
        else:
            if idx.size != 1:
                return None
            i = int(idx.flat[0])
            if not 0 <= i < n:
                return None
            slices.append(slice(i, i + 1))  # not `i`: all-int indexing would copy, not view
    return slices, new_shape, tags


def _view(arr: np.ndarray, indices: list[Index], rank: int,
          padded: bool = False) -> np.ndarray | None:
    """`prefix + tile` view of `arr` for these indices (None when a gather is needed)."""
    how = view_plan(arr, indices, rank, padded)
    return None if how is None else apply_view(arr, how)


ViewPlan = tuple[tuple[object, ...], "tuple[int, ...] | None", tuple[int, ...], list[int]]


def view_plan(arr: np.ndarray, indices: list[Index], rank: int,
              padded: bool = False) -> ViewPlan | None:
    """How `_view` takes its view of `arr` (slices, reshape or None, transpose, new axes), for
    any array of `arr`'s shape and strides and indices like these (prepared.py keys on both);
    None when a gather is needed."""
    plan = _fast_axes(arr.shape, indices, rank, padded)
    if plan is None:
        return None
    slices, new_shape, tags = plan
    grid_tags = [t for t in tags if t[0] == "g"]
    if len(grid_tags) != len(set(grid_tags)):
        return None  # one grid axis indexes two dimensions (a diagonal): gather
    v = arr[(*slices, ...)]  # `...` keeps a 0-d result a view (arr[()] would copy it)
    reshape = None
    if v.shape != tuple(new_shape):
        try:
            np.reshape(v, new_shape, copy=False)
        except ValueError:
            return None  # strides do not allow a view: gather (and scatter) instead
        reshape = tuple(new_shape)
    order = tuple(sorted(range(len(tags)), key=lambda i: (tags[i][0] == "t", tags[i][1])))
    present = {tags[i][1] for i in order if tags[i][0] == "g"}
    missing = [a for a in range(rank) if a not in present]
    return (*slices, ...), reshape, order, missing


def apply_view(arr: np.ndarray, how: ViewPlan) -> np.ndarray:
    """The view `view_plan` planned, of `arr` (of the shape and strides it planned for)."""
    slices, reshape, order, missing = how
    v = arr[slices]
    if reshape is not None:
        v = v.reshape(reshape)  # a view: the plan checked these strides allow one
    v = v.transpose(order)
    return np.expand_dims(v, missing) if missing else v


def _index_arrays(shape: tuple[int, ...], indices: list[Index], rank: int, ntile: int,
                  active: np.ndarray | None = None,
                  axes: tuple[tuple[int, ...], ...] | None = None,
                  mask: np.ndarray | None = None):
    """Broadcastable index arrays (one per tensor dim) over `prefix + tile`, and validity;
    `axes` places each dimension's index in the tile (a gather's layout), `mask` (prefix +
    tile) leaves elements out. An index outside its dimension is an error (OutOfRange) only
    where the element is valid and for the programs `active` (prefix-shaped, with `ntile`
    trailing axes of 1) lists: the others skip this access (an `if` branch)."""
    idxs, valid = [], mask
    pos = 0
    tiles: list[tuple[int, np.ndarray]] = []  # index tiles, checked once validity is known
    scalars: list[tuple[int, np.ndarray]] = []  # scalar indices, likewise
    for d, (n, idx) in enumerate(zip(shape, indices)):
        if axes is not None and axes[d]:
            pos = axes[d][0]
        if isinstance(idx, TileIndex):
            tail = [1] * ntile
            for i, a in enumerate(idx.axes):
                tail[a] = idx.values.shape[rank + i]
            ix = idx.values.reshape(idx.values.shape[:rank] + tuple(tail))
            tiles.append((d, ix))
            idxs.append(ix)
            continue
        if idx is None or isinstance(idx, (RangeRT, Slice)):
            if idx is None:
                ix = np.arange(n).reshape((1,) * rank + (n,))
            elif isinstance(idx, Slice):
                ix = np.asarray(idx.indices()).reshape((1,) * rank + (idx.size,))
            else:
                ix = idx.index()
            tail = [1] * ntile
            tail[pos] = ix.shape[-1]
            ix = ix.reshape(ix.shape[:-1] + tuple(tail))
            pos += 1
            if isinstance(idx, RangeRT) and idx.stop is not None:  # lanes past a runtime stop
                ok = ix < idx.stop.reshape(idx.stop.shape + (1,) * ntile)
                valid = ok if valid is None else valid & ok
            if isinstance(idx, RangeRT) and idx.start is not None:  # and before a start
                valid = valid & (ix >= idx.start.reshape(idx.start.shape + (1,) * ntile))
            if isinstance(idx, RangeRT) and idx.extent < n:  # a range over n indexing n + 1
                valid = (ix < idx.extent) if valid is None else valid & (ix < idx.extent)
            if isinstance(idx, RangeRT) and idx.shift is not None:  # lanes past the tile's
                own = ix < idx.extent  # own range stay masked; then the lanes move
                valid = own if valid is None else valid & own
                ix = ix + idx.shift.reshape(idx.shift.shape + (1,) * ntile)
        elif isinstance(idx, GridScalar):
            g = [1] * rank
            g[idx.axis] = n
            ix = np.arange(n).reshape(tuple(g) + (1,) * ntile)
        else:  # a scalar: checked once the others' validity is known, as index tiles are
            ix = np.asarray(idx).reshape(idx.shape + (1,) * ntile)
            scalars.append((d, ix))
            idxs.append(ix)
            continue
        ok = (ix >= 0) & (ix < n)
        valid = ok if valid is None else valid & ok
        idxs.append(np.clip(ix, 0, n - 1))
    for d, ix in scalars:  # a tile's lanes may be out of range; a scalar only where masked off
        _in_range(d, ix, shape[d], valid, active)
        ok = (ix >= 0) & (ix < shape[d])
        valid = ok if valid is None else valid & ok
        idxs[d] = np.clip(ix, 0, shape[d] - 1)
    for d, ix in tiles:
        _in_range(d, ix, shape[d], valid, active)
        idxs[d] = np.clip(ix, 0, shape[d] - 1)
    return idxs, valid


def _in_range(d: int, ix: np.ndarray, n: int, valid: np.ndarray | None,
              active: np.ndarray | None) -> None:
    """OutOfRange for an index of dimension `d` (of `n`) outside it where its element is valid
    and its program active."""
    bad = (ix < 0) | (ix >= n)
    if valid is not None:
        bad = bad & valid
    if active is not None:
        bad = bad & active
    if bad.any():
        raise OutOfRange(d, int(np.broadcast_to(ix, bad.shape)[bad].flat[0]), n)


def _padded(arr: np.ndarray, indices: list[Index], fill: object,
            copy: bool = True) -> tuple[np.ndarray, list[Index], tuple[slice, ...]] | None:
    """A load or store whose tiles are partial only at the tensor's end: each index a grid tile
    over the whole dimension, a loop's tile (the same for every program), a grid scalar, `:` or
    one in-range int. Returns the window the access reads (the whole dimension, or the loop's
    tile) copied into a buffer padded to whole tiles with `fill`, the indices into it (so that
    the view path applies) and the window's slices. One contiguous copy costs a fraction of a gather (index arrays,
    clipping, masking). None when it does not apply. Without `copy` only the padding is set
    (for a store that writes every element)."""
    how = pad_plan(arr, indices)
    if how is None:
        return None
    window, shape, rebased = how
    return pad(arr[window], shape, fill, arr.dtype, copy), rebased, window


def pad_plan(arr: np.ndarray, indices: list[Index]
             ) -> tuple[tuple[slice, ...], tuple[int, ...], list[Index]] | None:
    """`_padded`'s window, padded shape and indices into the padded copy, for any array of
    `arr`'s shape and indices like these (None when it does not apply)."""
    if len(indices) != arr.ndim:
        return None
    window, shape, rebased = [], [], []
    for n, idx in zip(arr.shape, indices):
        if idx is None or isinstance(idx, GridScalar):
            window.append(slice(None))
            shape.append(n)
            rebased.append(idx)
        elif isinstance(idx, RangeRT) and idx.extent == n and idx.shift is None \
                and idx.grid_axis is not None:
            window.append(slice(None))
            shape.append(n + -n % idx.block)
            rebased.append(idx)
        elif isinstance(idx, RangeRT) and idx.extent == n and idx.shift is None \
                and idx.stop is None and idx.start is None and idx.begin.size == 1:
            b = int(idx.begin.flat[0])  # a loop's tile: all programs at the same place
            window.append(slice(b, b + idx.block))
            shape.append(idx.block)
            rebased.append(RangeRT(n, idx.block, np.zeros_like(idx.begin), None))
        elif isinstance(idx, np.ndarray) and idx.size == 1 and 0 <= int(idx.flat[0]) < n:
            i = int(idx.flat[0])
            window.append(slice(i, i + 1))
            shape.append(1)
            rebased.append(np.zeros_like(idx))
        else:
            return None
    part = arr[tuple(window)]  # a view
    if part.shape == tuple(shape):
        return None
    return tuple(window), tuple(shape), rebased


def pad(part: np.ndarray, shape: tuple[int, ...], fill: object, dtype: np.dtype,
        copy: bool = True) -> np.ndarray:
    """A buffer of `shape` holding `part` (copied, unless not `copy`) padded with `fill`."""
    out = np.empty(shape, dtype=dtype)
    value = np.asarray(fill).astype(dtype)
    for d, (n, p) in enumerate(zip(part.shape, shape)):
        if p > n:
            out[(slice(None),) * d + (slice(n, None),)] = value
    if copy:
        out[tuple(slice(0, n) for n in part.shape)] = part
    return out


def trimmed(arr: np.ndarray, indices: list[Index], rank: int, axis: int,
            other: object | None = None) -> np.ndarray | None:
    """The tiles of a load without the lanes past the tensor's end along tile axis `axis`
    (shorter along that axis than the tile), when that axis is a loop's tile, the same for
    every program, and partial there; else None. A view when no other axis is partial, else
    a copy padded along those only. For a reduction along `axis` whose identity is the load's
    `other` (see plan.trimmed_loads): it reads no padding along `axis`."""
    rebased = trimmed_indices(arr, indices, axis)
    if rebased is None:
        return None
    v = _view(arr, rebased, rank)
    if v is None and (padded := _padded(arr, rebased, _fill(arr, other))) is not None:
        v = _view(padded[0], padded[1], rank, True)
    return v


def trimmed_indices(arr: np.ndarray, indices: list[Index], axis: int) -> list[Index] | None:
    """`trimmed`'s indices: the partial loop tile along `axis` cut to its in-range lanes."""
    rebased, pos, cut = list(indices), 0, False
    for d, (n, idx) in enumerate(zip(arr.shape, indices)):
        if isinstance(idx, RangeRT) and pos == axis and idx.grid_axis is None \
                and idx.extent == n and idx.shift is None and idx.stop is None \
                and idx.start is None and idx.begin.size == 1 \
                and (b := int(idx.begin.flat[0])) + idx.block > n:
            rebased[d] = RangeRT(n, n - b, idx.begin, None)
            cut = True
        if idx is None or isinstance(idx, (RangeRT, Slice)):
            pos += 1
    return rebased if cut else None


def without_stops(indices: list[Index], rank: int, ntile: int
                  ) -> tuple[list[Index], np.ndarray | None]:
    """`indices` with the runtime stops and starts of `td.tile(stop)` loops' ranges left out,
    and where the lanes they leave out are not (prefix + tile, broadcastable; None when no
    index has one): a load of the plain indices, those lanes set to its `other`, is the load
    (a view or a padded copy, not a gather)."""
    plain, valid, pos = list(indices), None, 0
    for d, idx in enumerate(indices):
        if isinstance(idx, RangeRT) and idx.shift is None and \
                (idx.stop is not None or idx.start is not None):
            plain[d] = RangeRT(idx.extent, idx.block, idx.begin, idx.grid_axis)
            tail = [1] * ntile
            tail[pos] = idx.block
            ix = idx.index().reshape(idx.begin.shape + tuple(tail))
            ok = ix < np.reshape(idx.limit(), np.shape(idx.limit()) + (1,) * ntile)
            if idx.start is not None:
                ok = ok & (ix >= idx.start.reshape(idx.start.shape + (1,) * ntile))
            valid = ok if valid is None else valid & ok
        if idx is None or isinstance(idx, (RangeRT, Slice)):
            pos += 1
    return plain, valid


def _fill(arr: np.ndarray, other: object | None) -> object:
    return poison(arr.dtype) if other is None else other


def gather(arr: np.ndarray, indices: list[Index], rank: int, ntile: int,
           other: object | None, active: np.ndarray | None = None,
           axes: tuple[tuple[int, ...], ...] | None = None,
           mask: np.ndarray | None = None) -> np.ndarray:
    """The general load: index arrays, clipped, with out-of-range elements (and those `mask`
    leaves out) set to `other` or poison."""
    idxs, valid = _index_arrays(arr.shape, indices, rank, ntile, active, axes, mask)
    if arr.size == 0:  # every lane masked off (_index_arrays raised for any other)
        shape = np.broadcast_shapes(*(i.shape for i in idxs),
                                    *(() if valid is None else (valid.shape,)))
        return np.full(shape, np.asarray(_fill(arr, other)).astype(arr.dtype))
    out = arr[tuple(idxs)]
    if valid is not None and not valid.all():
        out = np.where(valid, out, np.asarray(_fill(arr, other)).astype(arr.dtype))
    return out


def load(arr: np.ndarray, indices: list[Index], rank: int, ntile: int,
         other: object | None, active: np.ndarray | None = None,
         axes: tuple[tuple[int, ...], ...] | None = None,
         mask: np.ndarray | None = None) -> np.ndarray:
    """`arr[indices]` for every program; `active` (prefix-shaped bool), if given, says which
    programs load (the others may index anything: their tiles are not used); `axes` and `mask`
    as in `_index_arrays` (a gather or a masked load, which always take the general path)."""
    if active is not None:
        active = active.reshape(active.shape + (1,) * ntile)
    if axes is not None or mask is not None:
        return gather(arr, indices, rank, ntile, other, active, axes, mask)
    v = _view(arr, indices, rank)
    if v is not None:
        return v
    padded = _padded(arr, indices, _fill(arr, other))
    if padded is not None and (v := _view(padded[0], padded[1], rank, True)) is not None:
        return v
    return gather(arr, indices, rank, ntile, other, active)


def _last_along_unindexed(value: np.ndarray, indices: list[Index], rank: int) -> np.ndarray:
    """Programs that differ only along grid axes the store does not index write the same
    elements; as if they ran in order, the last one wins."""
    for a in unindexed_axes(indices, rank):
        if value.shape[a] > 1:
            value = value.take([-1], axis=a)
    return value


def unindexed_axes(indices: list[Index], rank: int) -> tuple[int, ...]:
    """The grid axes along which programs' indices do not differ (`_last_along_unindexed`)."""
    indexed = {i.axis for i in indices if isinstance(i, GridScalar)}
    for idx in indices:
        if isinstance(idx, RangeRT):  # a runtime stop, start or shift tells programs' lanes apart
            shapes = [np.shape(x) for x in (idx.begin, idx.stop, idx.start, idx.shift)
                      if x is not None]
        else:
            shapes = [np.shape(idx)] if idx is not None and \
                not isinstance(idx, (GridScalar, Slice)) else []
        indexed |= {a for shape in shapes for a in range(min(rank, len(shape))) if shape[a] > 1}
    return tuple(a for a in range(rank) if a not in indexed)


def store(arr: np.ndarray, indices: list[Index], rank: int, ntile: int, value: np.ndarray,
          active: np.ndarray | None = None, axes: tuple[tuple[int, ...], ...] | None = None,
          mask: np.ndarray | None = None) -> None:
    """Store `value`; `active` (prefix-shaped bool), if given, says which programs store (those
    still inside every `td.tile(stop)` loop around the store); `axes` and `mask` as in
    `_index_arrays` (a scatter or a masked store)."""
    if active is not None and not active.all():
        scatter(arr, indices, rank, ntile, value, active.reshape(active.shape + (1,) * ntile),
                axes, mask)
        return
    if axes is not None or mask is not None:
        scatter(arr, indices, rank, ntile, value, None, axes, mask)
        return
    value = _last_along_unindexed(value, indices, rank)
    v = _view(arr, indices, rank)
    if v is not None:
        v[...] = value
        return
    # Every element is written unless a grid scalar covers only part of its dimension.
    padded = _padded(arr, indices, 0, copy=any(isinstance(i, GridScalar) for i in indices))
    if padded is not None and (v := _view(padded[0], padded[1], rank, True)) is not None:
        v[...] = value
        window = arr[padded[2]]  # a view
        window[...] = padded[0][tuple(slice(0, n) for n in window.shape)]
        return
    scatter(arr, indices, rank, ntile, value)


def covers(arr: np.ndarray, indices: list[Index]) -> bool:
    """Whether an unmasked store with these indices, by every program of a whole grid, writes
    every element of `arr` (each index `:`, a grid scalar, or a grid's tile over the whole
    dimension)."""
    return len(indices) == arr.ndim and all(
        idx is None or isinstance(idx, GridScalar) or
        isinstance(idx, RangeRT) and idx.grid_axis is not None and idx.extent == n and
        idx.shift is None and idx.stop is None and idx.start is None
        for n, idx in zip(arr.shape, indices))


def scatter(arr: np.ndarray, indices: list[Index], rank: int, ntile: int,
            value: np.ndarray, active: np.ndarray | None = None,
            axes: tuple[tuple[int, ...], ...] | None = None,
            mask: np.ndarray | None = None) -> None:
    """The general store: index arrays; out-of-range elements (and inactive ones, and those
    `mask` leaves out) are not written. A scatter's equal indices that write different values
    are an error (conflicts.Conflict); equal values are written once."""
    if active is not None:
        mask = active if mask is None else mask & active
    idxs, valid = _index_arrays(arr.shape, indices, rank, ntile, active, axes, mask)
    shape = np.broadcast_shapes(value.shape, *(i.shape for i in idxs),
                                *(() if valid is None else (valid.shape,)))
    full = [np.broadcast_to(i, shape) for i in idxs]
    value = np.broadcast_to(value, shape)
    if valid is None or valid.all():
        if axes is not None:  # index tiles may repeat an element (conflicts.py)
            conflicts.check(arr.shape, [i.ravel() for i in full], value.ravel())
        arr[tuple(full)] = value
        return
    keep = np.broadcast_to(valid, shape)
    if axes is not None:
        conflicts.check(arr.shape, [i[keep] for i in full], value[keep])
    arr[tuple(i[keep] for i in full)] = value[keep]
