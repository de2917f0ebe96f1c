"""Views of tensors: `tensor.reshape`, `tensor.permute`, `tensor.slice`, `tensor.expand`,
`tensor.memory` and `tensor.bitcast` values share their root tensor's memory (an argument or
an allocation) and address it with strides derived from the root's (an expanded dimension's
is 0; the memory of an argument, element by element, 1), from an element offset (a slice's
start) that is 0 for the others.

Every backend asks here: the NumPy backend views arrays, the Triton backend computes pointer
strides and the launcher's views, the spatial mapper its DMA strides.
"""

from __future__ import annotations

import math
from typing import Sequence

from tiledsl.ir.core import Function, Op, Value
from tiledsl.ir.ops import WRITES, has_trait
from tiledsl.ir.slices import slices_of
from tiledsl.ir.types import TensorType

VIEW_OPS = ("tensor.reshape", "tensor.permute", "tensor.slice", "tensor.expand", "tensor.memory",
            "tensor.bitcast")


def root(v: Value) -> Value:
    """The argument or allocation whose memory the tensor `v` views (`v` itself if none)."""
    while v.owner is not None and v.owner.name in VIEW_OPS:
        v = v.owner.operands[0]
    return v


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    """The strides (in elements) of memory laid out row-major with `shape`."""
    return tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))


def nested(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether each memory offset names at most one element of (shape, strides): ordered by
    stride, each dimension's stride steps past all the elements of the smaller ones (a slice
    or permutation of row-major memory is; a stride of 0 or an overlap is not)."""
    dims = sorted((s, n) for n, s in zip(shape, strides) if n != 1)
    reach = 0  # the furthest offset the smaller dimensions reach
    for s, n in dims:
        if s <= reach:
            return False
        reach += (n - 1) * s
    return True


def view_chain(v: Value) -> list[Op]:
    """The view ops from tensor `v` back to its root, `v`'s own first."""
    out = []
    while v.owner is not None and v.owner.name in VIEW_OPS:
        out.append(v.owner)
        v = v.owner.operands[0]
    return out


def written(fn: Function) -> set[Value]:
    """The arguments and allocations that `fn`'s stores and atomics write, directly or through
    views (`x.T[tn, tm] = ...` writes `x`)."""
    return {root(op.operands[0]) for op in fn.walk() if has_trait(op.name, WRITES)}


def stride_order(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """The dimensions of a tensor laid out as (shape, strides) in memory order, outermost
    first: sorted by decreasing stride (stably), dimensions of 1 or of stride 0 kept in place
    (torch's rule for a tensor made like another, `empty_like`)."""
    kept = [d for d in range(len(shape)) if shape[d] != 1 and strides[d] != 0]
    order = sorted(kept, key=lambda d: -strides[d])
    for d in range(len(shape)):
        if d not in kept:
            order.insert(d, d)
    return tuple(order)


def reshape_strides(shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]
                    ) -> tuple[int, ...] | None:
    """The strides that view memory laid out as (shape, strides) with `new_shape` in row-major
    order, or None when no strides do (the layout would need a copy). NumPy's rule
    (`_attempt_nocopy_reshape`): dimensions of 1 are free; each run of old dimensions that
    merges into or splits from new ones must be contiguous with itself. An empty tensor
    takes any strides: row-major ones."""
    if 0 in shape:
        return row_major(new_shape)
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out: list[int] = []
    i = 0
    new = [n for n in new_shape if n != 1]
    j = 0
    new_strides: list[int] = []
    while i < len(old) and j < len(new):
        oi, oj = i, j  # a group: old[oi:i] and new[oj:j] of equal products
        np_, op_ = new[j], old[i][0]
        i, j = i + 1, j + 1
        while np_ != op_:
            if np_ < op_:
                np_ *= new[j]
                j += 1
            else:
                op_ *= old[i][0]
                i += 1
        for k in range(oi, i - 1):  # the old run must be contiguous with itself
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        stride = old[i - 1][1]
        group: list[int] = []
        for k in range(j - 1, oj - 1, -1):
            group.append(stride)
            stride *= new[k]
        new_strides += reversed(group)
    if i != len(old) or j != len(new):
        return None
    it = iter(new_strides)
    for n in new_shape:  # a dimension of 1 takes any stride: the next one's, as NumPy
        out.append(next(it) if n != 1 else 0)
    for k in range(len(out) - 1, -1, -1):
        if new_shape[k] == 1:
            out[k] = out[k + 1] * new_shape[k + 1] if k + 1 < len(out) else 1
    return tuple(out)


def strides_of(v: Value, root_strides: Sequence[int]) -> tuple[int, ...] | None:
    """The strides (in elements) of tensor `v` when its root has `root_strides`; None when a
    reshape on the way cannot be a view."""
    if v.owner is None or v.owner.name not in VIEW_OPS:
        return tuple(root_strides)
    src = v.owner.operands[0]
    inner = strides_of(src, root_strides)
    if inner is None:
        return None
    t, s = src.type, v.type
    assert isinstance(t, TensorType) and isinstance(s, TensorType)
    return view_strides(v.owner.name, v.owner.attrs, t.shape, inner, s.shape)


def view_strides(name: str, attrs: dict, shape: Sequence[int], strides: Sequence[int],
                 new_shape: Sequence[int]) -> tuple[int, ...] | None:
    """The strides of view op `name` (`attrs`) of a tensor laid out as (shape, strides)."""
    if name == "tensor.permute":
        return tuple(strides[p] for p in attrs["perm"])
    if name == "tensor.expand":  # repeated elements: stride 0
        lead = len(new_shape) - len(shape)
        return (0,) * lead + tuple(s if n == m else 0 for n, m, s in
                                   zip(shape, new_shape[lead:], strides))
    if name == "tensor.memory":  # the argument's memory, element by element
        return (1,)
    if name == "tensor.bitcast":  # the same elements, of another dtype as wide
        return tuple(strides)
    if name == "tensor.slice":
        parts = slices_of(attrs)
        return tuple(s * parts[d].step if d in parts else s for d, s in enumerate(strides))
    return reshape_strides(shape, strides, new_shape)


def offset_of(v: Value, root_strides: Sequence[int]) -> int:
    """Where tensor `v`'s element 0 lies in its root's memory (elements), the root having
    `root_strides`: the sum of its slices' starts times their strides."""
    if v.owner is None or v.owner.name not in VIEW_OPS:
        return 0
    src = v.owner.operands[0]
    base = offset_of(src, root_strides)
    if v.owner.name != "tensor.slice":
        return base
    inner = strides_of(src, root_strides)
    assert inner is not None  # a slice's source is viewable, or tracing had failed
    return base + sum(p.start * inner[d] for d, p in slices_of(v.owner.attrs).items())


def root_coords(v: Value) -> list[tuple[int | None, int, int]] | None:
    """Per dimension of tensor `v`'s root, how an index of `v` reaches it: `(d, start, step)`,
    the root's index `start + step * i` for index `i` of `v`'s dimension `d`, or `(None, start,
    0)` where `v` has no dimension for it (an int index dropped it: `out[..., 1]`). Through
    slices and reshapes that only drop or add dimensions of 1; None through any other view."""
    coords: list[tuple[int | None, int, int]] = \
        [(d, 0, 1) for d in range(len(v.type.shape))]  # type: ignore[union-attr]
    while v.owner is not None and v.owner.name in VIEW_OPS:
        op, src = v.owner, v.owner.operands[0]
        if op.name == "tensor.slice":
            parts = slices_of(op.attrs)
            coords = [(d, p.start + p.step * a, p.step * k) if (p := parts.get(i)) else (d, a, k)
                      for i, (d, a, k) in enumerate(coords)]
        elif op.name == "tensor.reshape":
            shape, before = v.type.shape, src.type.shape  # type: ignore[union-attr]
            if [n for n in shape if n != 1] != [n for n in before if n != 1]:
                return None
            kept = iter(c for c, n in zip(coords, shape) if n != 1)
            coords = [next(kept) if n != 1 else (None, 0, 0) for n in before]
        elif op.name != "tensor.bitcast":  # (the same elements, read as another dtype)
            return None
        v = src
    return [(d, a, k) if d is not None else (None, a, 0) for d, a, k in coords]


def in_root(v: Value) -> list[tuple[int, int]] | None:
    """Per dimension, the (start, step) that take tensor `v`'s index i to its root's, start +
    step * i, where `v` is the root or slices of it (`x[:, 1:]`, `x[::2][1:]`); None through
    any other view, whose dimensions do not correspond to the root's."""
    maps = [(0, 1)] * len(v.type.shape)  # type: ignore[union-attr]
    while v.owner is not None and v.owner.name in VIEW_OPS:
        if v.owner.name == "tensor.bitcast":  # the same elements, read as another dtype
            v = v.owner.operands[0]
            continue
        if v.owner.name != "tensor.slice":
            return None
        parts = slices_of(v.owner.attrs)
        maps = [(p.start + p.step * a, p.step * k) if (p := parts.get(d)) else (a, k)
                for d, (a, k) in enumerate(maps)]
        v = v.owner.operands[0]
    return maps
