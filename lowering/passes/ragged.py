"""mask-ragged-edges: make out-of-range elements of partial tiles unable to change a result.

A tile at a ragged edge holds elements past the end of its dimension; elementwise ops may compute
garbage there and stores drop it, but reductions and dots mix elements. Before each of those the
pass neutralizes the out-of-range part of the mixed axis:

- `reduce` over an axis: mask that axis with the reduction's identity (0, -inf, +inf);
- `reduce` kind "mean": becomes a masked sum divided by the number of in-range elements;
- `cumsum` along an axis: mask that axis with 0 (lanes before a runtime start come first);
- `dot`: mask the contraction axis of both operands with 0.
- `assert`: every axis masked with true;
- `sort`, `fold`, and a `scan` whose out-of-range lanes can come first in its order (reversed,
  or after a runtime start): a bool operand says which lanes are in range
  (tiledsl/lang/scans.py).

A mask of a `load` becomes the load's `other` fill value instead of a separate op. Axes cut by a
block symbol are masked (whether the edge is really ragged depends on the config, which backends
see later); constant axes are masked when a backend might pad them (not a power of two, or under
16), and where they hold the lanes of a range whose constant block does not divide its extent
(`td.tile(n, block_size=64)` with n = 150; see `lanes.py`): `where(index < n, x, identity)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lowering.passes.lanes import Lanes, along, emit, in_range, place
from tiledsl import dtypes
from tiledsl.ir.core import Block, Function, Op, Value, loop_start, loop_stop
from tiledsl.errors import BackendError
from tiledsl.ir.gathers import access_parts, gathers, is_index_tile, op_layout, written_values
from tiledsl.ir.ops import ARG_REDUCTIONS, OPS, VIEW, has_trait
from tiledsl.ir.types import RangeType, TensorType, TileType

# Backends pad a constant dimension to a power of two, and Triton's to at least 16 (tl.dot's
# minimum): a dimension of 2, 4 or 8 is padded too.
MIN_PADDED = 16


def maybe_padded(dim: int | str) -> bool:
    return isinstance(dim, str) or (dim > 1 and (dim & (dim - 1) != 0 or dim < MIN_PADDED))


@dataclass
class _Scope:
    """The ranges a block sees: by block symbol, and those of constant blocks that end ragged."""

    symbolic: dict[str, Value]
    fixed: tuple[Value, ...] = ()
    # (range, runtime stop, runtime start or None) of `td.tile(stop)` loops
    stops: tuple[tuple[Value, Value, Value | None], ...] = ()

    def enter(self, block: Block, owner: Op | None = None) -> _Scope:
        symbolic, fixed, stops = dict(self.symbolic), list(self.fixed), list(self.stops)
        stop = loop_stop(owner) if owner is not None and owner.name == "for" else None
        for a in block.args:
            t = a.type
            if stop is not None and a is block.args[0]:
                assert owner is not None
                stops.append((a, stop, loop_start(owner)))
            if isinstance(t, RangeType) and isinstance(t.block, str):
                symbolic[t.block] = a
            elif isinstance(t, RangeType) and (t.extent % t.block or stop is not None):
                fixed.append(a)  # a runtime stop may cut any tile
        return _Scope(symbolic, tuple(fixed), tuple(stops))

    def bounds(self, r: Value) -> tuple[Value | None, Value | None]:
        """A `td.tile(stop)` range's runtime stop and start (None, None for other ranges)."""
        return next(((s, b) for a, s, b in self.stops if a is r), (None, None))


@dataclass(frozen=True)
class MaskRaggedEdgesPass:
    name: str = "mask-ragged-edges"

    def run(self, fn: Function) -> None:
        self._block(fn.body, _Scope({}))

    def _block(self, block: Block, outer: _Scope, owner: Op | None = None) -> None:
        scope = outer.enter(block, owner)
        out: list[Op] = []
        for op in block.ops:
            for region in op.regions:
                self._block(region, scope, op)
            if op.name == "reduce" and op.attrs["kind"] == "mean":
                out.extend(self._mean(op, scope))
                continue
            if op.name == "reduce":
                x = op.operands[0]
                ident = dtypes.identity(op.attrs["kind"], x.type.dtype)  # type: ignore[union-attr]
                op.operands[0] = self._mask(x, op.attrs["axis"], ident, scope, out, op)
                if op.attrs["kind"] in ARG_REDUCTIONS and \
                        (r := self._started(x, op.attrs["axis"], scope)) is not None:
                    self._first_in_range(op, r, ident, scope, out)
                    continue
            elif op.name == "cumsum":  # lanes before a start come first: they must add 0
                op.operands[0] = self._mask(op.operands[0], op.attrs["axis"], 0, scope, out, op)
            elif op.name == "dot":  # the contraction axis: a's last, b's next to last
                a, b = op.operands
                r = a.type.rank  # type: ignore[union-attr]
                op.operands = [self._mask(a, r - 1, 0, scope, out, op),
                               self._mask(b, r - 2, 0, scope, out, op)]
            elif (op.name in ("sort", "fold") or op.name == "scan" and (
                    op.attrs["reverse"] or self._started(op.operands[0], op.attrs["axis"], scope)
                    is not None)) and not op.attrs.get("edges_masked"):
                self._lanes_in_range(op, scope, out)
            elif op.name == "assert":  # lanes out of range hold
                t = op.operands[0].type
                for a in range(t.rank):  # type: ignore[union-attr]
                    op.operands[0] = self._mask(op.operands[0], a, True, scope, out, op)
            elif op.name in ("load", "store", "atomic") and gathers(op):
                self._index_lanes(op, scope, out)
            elif has_trait(op.name, VIEW):
                self._keeps_lanes(op, scope)
            out.append(op)
        block.ops = out

    def _mask(self, x: Value, axis: int, fill: object, scope: _Scope, out: list[Op],
              at: Op, lanes_of: Value | None = None) -> Value:
        t = x.type
        assert isinstance(t, TileType)
        dim = t.shape[axis]
        fill = bool(fill) if t.dtype.is_bool else float(fill) if t.dtype.is_float else int(fill)  # type: ignore[arg-type]
        if isinstance(dim, int):  # lanes of a constant block that ends ragged
            for r in scope.fixed:
                if axis in Lanes(r).of(lanes_of or x) and not self._fill_load(x, fill):
                    valid = along(in_range(r, out, at, *scope.bounds(r)), axis, t, out, at)
                    fill_v = emit(out, "broadcast", [emit(out, "const", [], TileType((), t.dtype),
                                                          at, {"value": fill})], t, at)
                    x = emit(out, "where", [valid, x, fill_v], t, at)
        if not maybe_padded(dim) or isinstance(dim, str) and dim not in scope.symbolic:
            return x  # a registered block's lanes outside its loops are all in range
        if self._fill_load(x, fill):
            return x
        operands = [x] + ([scope.symbolic[dim]] if isinstance(dim, str) else [])
        masked = Value(t, x.hint)
        out.append(Op("mask", operands, [masked], {"axes": (axis,), "value": fill}, [], at.loc))
        return masked

    def _index_lanes(self, op: Op, scope: _Scope, out: list[Op]) -> None:
        """A gather's or scatter's index tiles: their lanes out of range of their own tiles (a
        ragged edge, padding, past a loop's stop) join the access's mask, so they read `other`
        and write nothing, and their indices (poison, or garbage) are never used."""
        lay = op_layout(op)
        indices, mask = access_parts(op)
        tensor = op.operands[0].type
        assert isinstance(tensor, TensorType)
        full = op.attrs.get("full", ())
        dims = [d for d in range(len(tensor.shape)) if d not in full]
        shape = TileType(lay.shape, dtypes.bool_)
        valid = mask
        seen = set()  # index tiles whose lanes sit alike have one mask (x[t.index, y[t]])
        for idx, d in zip(indices, dims):
            t = idx.type
            if not is_index_tile(t):
                continue
            assert isinstance(t, TileType)
            key = (lay.axes[d], t.shape, tuple(id(r) for r in scope.fixed if Lanes(r).of(idx)))
            if key in seen:
                continue
            seen.add(key)
            true = emit(out, "const", [], TileType((), dtypes.bool_), op, {"value": True})
            ok = start = emit(out, "broadcast", [true], t.with_dtype(dtypes.bool_), op)
            for axis in range(t.rank):
                ok = self._mask(ok, axis, False, scope, out, op, lanes_of=idx)
            if ok is start:
                continue  # no lane of this index tile can be out of range
            ok = place(ok, lay.axes[d], shape, out, op)
            valid = ok if valid is None else emit(out, "and", [valid, ok], shape, op)
        if valid is None or valid is mask:
            return
        if mask is None:
            op.attrs["mask"] = True
            op.operands.insert(len(op.operands) - written_values(op), valid)
        else:
            op.operands[op.operands.index(mask)] = valid

    def _lanes_in_range(self, op: Op, scope: _Scope, out: list[Op]) -> None:
        """Give a sort, fold or scan the lanes of its axis that are in range, as a bool
        operand."""
        x = op.operands[0]
        t = x.type
        assert isinstance(t, TileType)
        true = emit(out, "const", [], TileType((), dtypes.bool_), op, {"value": True})
        start = emit(out, "broadcast", [true], t.with_dtype(dtypes.bool_), op)
        ok = self._mask(start, op.attrs["axis"], False, scope, out, op, lanes_of=x)
        op.attrs["edges_masked"] = True
        if ok is start:  # every lane is in range, and DCE drops the two ops
            return
        if op.attrs.get("masked"):  # the frontend's: a jagged tile's rows (frontend/jagged.py)
            ok = emit(out, "and", [op.operands[-1], ok], ok.type, op)  # type: ignore[arg-type]
            op.operands[-1] = ok
        else:
            op.attrs["masked"] = True
            op.operands.append(ok)

    @staticmethod
    def _keeps_lanes(op: Op, scope: _Scope) -> None:
        """A view that merges or splits an axis holding the lanes of a range that ends ragged
        would hide which lanes are out of range from the reductions after it: refused."""
        opdef = OPS[op.name]
        x = op.operands[0]
        if opdef.axes is None or not isinstance(x.type, TileType):
            return
        kept = opdef.axes(op.attrs, x.type, op.results[0].type)  # type: ignore[arg-type]
        for r in scope.fixed:
            lost = [a for a in Lanes(r).of(x) if a not in kept]
            if lost:
                rt = r.type
                assert isinstance(rt, RangeType)
                raise BackendError(
                    f"{op.name} merges axis {lost[0]}, which holds the lanes of tile "
                    f"'{r.hint}' (block {rt.block} over {rt.extent}, so its last tile is cut), "
                    "with other axes: the lanes past its edge would become indistinguishable",
                    loc=op.loc, hint="let the config choose that tile's block size (no "
                    "block_size=), which keeps it on its own axis, or use a block that divides "
                    "the dimension")

    @staticmethod
    def _started(x: Value, axis: int, scope: _Scope) -> Value | None:
        """The range on `axis` of `x` if its loop has a runtime start (masked lanes come first)."""
        t = x.type
        assert isinstance(t, TileType)
        dim = t.shape[axis]
        r = scope.symbolic.get(dim) if isinstance(dim, str) else next(
            (f for f in scope.fixed if axis in Lanes(f).of(x)), None)
        return r if r is not None and scope.bounds(r)[1] is not None else None

    def _first_in_range(self, op: Op, r: Value, ident: object, scope: _Scope,
                        out: list[Op]) -> None:
        """argmax/argmin over a tile whose masked lanes (before a runtime start) precede the
        in-range ones: a masked lane holds the identity and would win a tie with in-range lanes
        that all hold it too. Then the answer is the first in-range lane:
        where(extreme == identity, argmax(in_range), arg)."""
        x = op.operands[0]  # already masked
        t, rt = x.type, op.result.type
        assert isinstance(t, TileType) and isinstance(rt, TileType)
        attrs = dict(op.attrs)
        arg = emit(out, "reduce", [x], rt, op, attrs)
        kind = {"argmax": "max", "argmin": "min"}[attrs["kind"]]
        extreme = emit(out, "reduce", [x], rt.with_dtype(t.dtype), op, dict(attrs, kind=kind))
        fill = emit(out, "broadcast", [emit(out, "const", [], TileType((), t.dtype), op,
                                            {"value": ident})], rt.with_dtype(t.dtype), op)
        tied = emit(out, "eq", [extreme, fill], rt.with_dtype(dtypes.bool_), op)
        stop, start = scope.bounds(r)
        valid = along(in_range(r, out, op, stop, start), attrs["axis"], t, out, op)
        flags = emit(out, "cast", [valid], t.with_dtype(dtypes.int8), op)
        first = emit(out, "reduce", [flags], rt, op, dict(attrs, kind="argmax"))
        out.append(Op("where", [tied, first, arg], [op.result], {}, [], op.loc))

    @staticmethod
    def _fill_load(x: Value, fill: object) -> bool:
        """Make a load's out-of-range elements `fill` (its `other`), if it is a load."""
        producer = x.owner
        if producer is not None and producer.name == "load" and \
                producer.attrs.get("other", fill) == fill:
            producer.attrs["other"] = fill
            return True
        return False

    def _mean(self, op: Op, scope: _Scope) -> list[Op]:
        """mean(x, axis) -> sum(mask(x), axis) / count, count = the in-range extent."""
        out: list[Op] = []
        x = op.operands[0]
        xt, rt = x.type, op.result.type
        assert isinstance(xt, TileType) and isinstance(rt, TileType)
        axis = op.attrs["axis"]
        dim = xt.shape[axis]
        cut = scope.symbolic.get(dim) if isinstance(dim, str) else next(
            (r for r in scope.fixed if axis in Lanes(r).of(x)), None)
        if xt.dtype != rt.dtype:
            cast = Value(xt.with_dtype(rt.dtype), x.hint)
            out.append(Op("cast", [x], [cast], {}, [], op.loc))
            x = cast
        x = self._mask(x, axis, 0, scope, out, op)
        total = Value(rt, op.result.hint)
        out.append(Op("reduce", [x], [total], dict(op.attrs, kind="sum"), [], op.loc))
        scalar = TileType((), rt.dtype)
        count = Value(scalar, "count")
        if cut is not None:  # the in-range lanes of the tile that cuts the axis
            size = Value(TileType((), dtypes.index_dtype(cut.type.extent)), "size")  # type: ignore[union-attr]
            out.append(Op("tile.size", [cut], [size], {}, [], op.loc))
            out.append(Op("cast", [size], [count], {}, [], op.loc))
        else:
            out.append(Op("const", [], [count], {"value": float(dim)}, [], op.loc))
        if rt.shape:
            wide = Value(rt, "count")
            out.append(Op("broadcast", [count], [wide], {}, [], op.loc))
            count = wide
        out.append(Op("div", [total, count], [op.result], {}, [], op.loc))
        return out
