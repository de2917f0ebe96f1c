"""Lanes of a range: which axes of a tile value hold one element per lane of a range's tile, and
the ops that build "this lane is in range" along such an axis. Used by the passes that keep
out-of-range lanes of partial tiles from changing a result (mask-ragged-edges for constant-size
blocks, keep-carried-lanes).

A load indexed by the range puts its lanes on the load's axis for that dimension, `tile.index`
on axis 0; elementwise ops, casts, broadcasts, transposes and expand_dims move them with the
axes; a reduction or a dot over them removes them.
"""

from __future__ import annotations

from tiledsl import dtypes
from tiledsl.ir.bounds import interval
from tiledsl.ir.core import Op, Value, result_sources
from tiledsl.ir.gathers import access_parts, gathers, is_index_tile, op_layout
from tiledsl.ir.ops import ELEMENTWISE, OPS
from tiledsl.ir.types import RangeType, TileType

class Lanes:
    """Which axes of each value hold lanes of the range `r` (memoized per value)."""

    def __init__(self, r: Value) -> None:
        self.r = r
        self.memo: dict[Value, frozenset[int]] = {}

    def of(self, v: Value) -> frozenset[int]:
        if v not in self.memo:
            self.memo[v] = frozenset()  # cycles (carried values of inner loops): none so far
            self.memo[v] = self._compute(v)
        return self.memo[v]

    def _compute(self, v: Value) -> frozenset[int]:
        op = v.owner
        if op is None or not isinstance(v.type, TileType):
            return frozenset()  # block arguments (carried values start clean), tensors, ranges
        if op.name == "load":
            return self._load(op)
        if op.name == "tile.index":
            return frozenset({0}) if op.operands[0] is self.r else frozenset()
        opdef = OPS.get(op.name)
        if opdef is not None and ELEMENTWISE in opdef.traits:
            out: frozenset[int] = frozenset()
            for o in op.operands:
                if isinstance(o.type, TileType) and o.type.rank == v.type.rank:
                    out |= self.of(o)
            return out
        if opdef is not None and opdef.axes is not None:  # views, reductions, scans
            src = op.operands[0].type
            assert isinstance(src, TileType)
            moved = opdef.axes(op.attrs, src, v.type)
            return frozenset(moved[a] for a in self.of(op.operands[0]) if a in moved)
        if op.name == "dot":  # batch axis from either, rows from a, columns from b
            a, b = self.of(op.operands[0]), self.of(op.operands[1])
            r = v.type.rank
            batch = {0} if r == 3 and (0 in a or 0 in b) else set()
            return frozenset(batch | ({r - 2} if r - 2 in a else set()) |
                             ({r - 1} if r - 1 in b else set()))
        if op.regions:  # a loop's initial value and what it yields, or a branch's yields
            return frozenset().union(*(self.of(s) for s in result_sources(op, op.results.index(v))))
        return frozenset()

    def _load(self, op: Op) -> frozenset[int]:
        if gathers(op):  # ranges and index tiles put their lanes where the layout says
            indices, _ = access_parts(op)
            tensor = op.operands[0].type
            full = op.attrs.get("full", ())
            dims = [d for d in range(len(tensor.shape)) if d not in full]  # type: ignore[union-attr]
            axes = op_layout(op).axes
            lanes: set[int] = set()
            for idx, d in zip(indices, dims):
                own = {0} if idx is self.r else self.of(idx) if is_index_tile(idx.type) else set()
                lanes |= {axes[d][a] for a in own}
            return frozenset(lanes)
        full = op.attrs.get("full", ())
        tensor = op.operands[0].type
        indices = iter(op.operands[1:])
        out, pos = set(), 0
        for d in range(len(tensor.shape)):  # type: ignore[union-attr]
            if d in full:
                pos += 1
                continue
            idx = next(indices)
            if isinstance(idx.type, RangeType):
                base = idx.owner.operands[0] if idx.owner is not None and \
                    idx.owner.name == "tile.shift" else idx  # x[tm + 1]: tm's lanes
                if base is self.r:
                    out.add(pos)
                pos += 1
        return frozenset(out)


def emit(ops: list[Op], name: str, operands: list[Value], t: TileType, at: Op,
         attrs: dict | None = None) -> Value:
    """Append `name(operands) : t` to `ops` (at `at`'s source line); its result."""
    v = Value(t)
    ops.append(Op(name, operands, [v], attrs or {}, [], at.loc))
    return v


def in_range(r: Value, ops: list[Op], at: Op, stop: Value | None = None,
             start: Value | None = None) -> Value:
    """`r.index < extent` (or `< stop`, a loop's runtime stop, which is at most the extent, and
    `>= start` for its runtime start): which lanes of the range's tile are in range (a 1-D bool
    tile)."""
    rt = r.type
    assert isinstance(rt, RangeType)
    bound = None if stop is None else interval(stop)
    if stop is not None and (bound is None or bound[1] > rt.extent):  # clipped to the extent
        st = stop.type
        assert isinstance(st, TileType)
        extent = emit(ops, "const", [], st, at, {"value": rt.extent})
        stop = emit(ops, "minimum", [stop, extent], st, at)
    below = _compare(r, ops, at, stop, "lt")
    if start is None:
        return below
    above = _compare(r, ops, at, start, "ge")
    return emit(ops, "and", [below, above], below.type, at)  # type: ignore[arg-type]


def _compare(r: Value, ops: list[Op], at: Op, stop: Value | None, cmp: str) -> Value:
    """`r.index <cmp> stop` (the extent when `stop` is None), as a 1-D bool tile."""
    rt = r.type
    assert isinstance(rt, RangeType)
    index_t = TileType((rt.block,), dtypes.index_dtype(rt.extent))
    index = emit(ops, "tile.index", [r], index_t, at)
    if stop is None:
        scalar = emit(ops, "const", [], TileType((), index_t.dtype), at, {"value": rt.extent})
    else:
        st = stop.type
        assert isinstance(st, TileType)
        if st.dtype != index_t.dtype:
            wide = dtypes.int64 if dtypes.int64 in (st.dtype, index_t.dtype) else index_t.dtype
            if index_t.dtype != wide:
                index_t = TileType((rt.block,), wide)
                index = emit(ops, "cast", [index], index_t, at)
            stop = stop if st.dtype == wide else emit(ops, "cast", [stop], TileType((), wide), at)
        scalar = stop
    extent = emit(ops, "broadcast", [scalar], index_t, at)
    return emit(ops, cmp, [index, extent], index_t.with_dtype(dtypes.bool_), at)


def along(valid: Value, axis: int, t: TileType, ops: list[Op], at: Op) -> Value:
    """A 1-D bool tile `valid` placed on `axis` of a tile of type `t`, broadcast to its shape."""
    v = valid
    for k in range(t.rank - 1):
        vt = v.type
        assert isinstance(vt, TileType)
        where = 0 if k < axis else vt.rank
        shape = vt.shape[:where] + (1,) + vt.shape[where:]
        v = emit(ops, "expand_dims", [v], TileType(shape, dtypes.bool_), at, {"axis": where})
    if v.type != TileType(t.shape, dtypes.bool_):
        v = emit(ops, "broadcast", [v], TileType(t.shape, dtypes.bool_), at)
    return v


def place(v: Value, axes: tuple[int, ...], t: TileType, ops: list[Op], at: Op) -> Value:
    """A tile `v` whose axes go to `axes` (increasing) of a tile of type `t` (of v's dtype),
    broadcast to its shape: how an index tile's shape sits in a gather's (ir/gathers.py)."""
    for a in range(t.rank):
        if a not in axes:
            vt = v.type
            assert isinstance(vt, TileType)
            shape = vt.shape[:a] + (1,) + vt.shape[a:]
            v = emit(ops, "expand_dims", [v], TileType(shape, vt.dtype), at, {"axis": a})
    if v.type != t:
        v = emit(ops, "broadcast", [v], t, at)
    return v
