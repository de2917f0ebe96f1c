"""mask-ragged-edges: make out-of-range elements of partial tiles unable to change a result.

A tile at a ragged edge holds elements past the end of its dimension; elementwise ops may compute
garbage there and stores drop it, but reductions and dots mix elements. Before each of those the
pass neutralizes the out-of-range part of the mixed axis:

- `reduce` over an axis: mask that axis with the reduction's identity (0, -inf, +inf);
- `reduce` kind "mean": becomes a masked sum divided by the number of in-range elements;
- `dot`: mask the contraction axis of both operands with 0.

A mask of a `load` becomes the load's `other` fill value instead of a separate op. Axes cut by a
block symbol are masked (whether the edge is really ragged depends on the config, which backends
see later); constant axes are masked only when a backend might pad them (not a power of two, or
under 16).
"""

from __future__ import annotations

from dataclasses import dataclass

from tiledsl import dtypes
from tiledsl.ir.core import Block, Function, Op, Value
from tiledsl.ir.types import RangeType, TileType


# Backends pad a constant dimension to a power of two, and Triton's to at least 16 (tl.dot's
# minimum): a dimension of 2, 4 or 8 is padded too.
MIN_PADDED = 16


def _maybe_padded(dim: int | str) -> bool:
    return isinstance(dim, str) or (dim > 1 and (dim & (dim - 1) != 0 or dim < MIN_PADDED))


@dataclass(frozen=True)
class MaskRaggedEdgesPass:
    name: str = "mask-ragged-edges"

    def run(self, fn: Function) -> None:
        self._block(fn.body, {})

    def _block(self, block: Block, ranges: dict[str, Value]) -> None:
        ranges = dict(ranges)
        for a in block.args:
            if isinstance(a.type, RangeType) and isinstance(a.type.block, str):
                ranges[a.type.block] = a
        out: list[Op] = []
        for op in block.ops:
            for region in op.regions:
                self._block(region, ranges)
            if op.name == "reduce" and op.attrs["kind"] == "mean":
                out.extend(self._mean(op, ranges))
                continue
            if op.name == "reduce":
                x = op.operands[0]
                ident = dtypes.identity(op.attrs["kind"], x.type.dtype)  # type: ignore[union-attr]
                op.operands[0] = self._mask(x, op.attrs["axis"], ident, ranges, out, op)
            elif op.name == "dot":
                a, b = op.operands
                op.operands = [self._mask(a, 1, 0, ranges, out, op),
                               self._mask(b, 0, 0, ranges, out, op)]
            out.append(op)
        block.ops = out

    def _mask(self, x: Value, axis: int, fill: object, ranges: dict[str, Value],
              out: list[Op], at: Op) -> Value:
        t = x.type
        assert isinstance(t, TileType)
        dim = t.shape[axis]
        if not _maybe_padded(dim):
            return x
        fill = bool(fill) if t.dtype.is_bool else float(fill) if t.dtype.is_float else int(fill)  # type: ignore[arg-type]
        producer = x.owner
        if producer is not None and producer.name == "load" and \
                producer.attrs.get("other", fill) == fill:
            producer.attrs["other"] = fill
            return x
        operands = [x] + ([ranges[dim]] if isinstance(dim, str) else [])
        masked = Value(t, x.hint)
        out.append(Op("mask", operands, [masked], {"axes": (axis,), "value": fill}, [], at.loc))
        return masked

    def _mean(self, op: Op, ranges: dict[str, Value]) -> list[Op]:
        """mean(x, axis) -> sum(mask(x), axis) / count, count = the in-range extent."""
        out: list[Op] = []
        x = op.operands[0]
        xt, rt = x.type, op.result.type
        assert isinstance(xt, TileType) and isinstance(rt, TileType)
        axis = op.attrs["axis"]
        dim = xt.shape[axis]
        if xt.dtype != rt.dtype:
            cast = Value(xt.with_dtype(rt.dtype), x.hint)
            out.append(Op("cast", [x], [cast], {}, [], op.loc))
            x = cast
        x = self._mask(x, axis, 0, ranges, out, op)
        total = Value(rt, op.result.hint)
        out.append(Op("reduce", [x], [total], dict(op.attrs, kind="sum"), [], op.loc))
        scalar = TileType((), rt.dtype)
        count = Value(scalar, "count")
        if isinstance(dim, str):
            size = Value(TileType((), dtypes.index_dtype(ranges[dim].type.extent)), "size")  # type: ignore[union-attr]
            out.append(Op("tile.size", [ranges[dim]], [size], {}, [], op.loc))
            out.append(Op("cast", [size], [count], {}, [], op.loc))
        else:
            out.append(Op("const", [], [count], {"value": float(dim)}, [], op.loc))
        if rt.shape:
            wide = Value(rt, "count")
            out.append(Op("broadcast", [count], [wide], {}, [], op.loc))
            count = wide
        out.append(Op("div", [total, count], [op.result], {}, [], op.loc))
        return out
