"""keep-carried-lanes: out-of-range lanes of a sequential loop's partial tile do not update the
values the loop carries.

A loop over a ragged range (`for tn in td.tile(n)`, n not a multiple of the block) runs its last
iteration on a partial tile. Where a carried value holds one lane per element of that tile (a
lane accumulator, `acc += x[tm, tn]` with `acc` of shape (tm, tn), as in Triton's layer-norm
tutorial), the lanes past the end would add garbage (poison on the NumPy backend, whatever a
masked load returns on a GPU) to what earlier iterations accumulated there. Before the loop
yields, each such value keeps its previous lanes where the tile is out of range:

    yield where(tn.index < n, new, old)

Which axes of a value hold lanes of the loop's range is read from the IR (`lanes.py`): a load
indexed by the range puts them on its axis, elementwise ops and broadcasts keep them, a
reduction or a dot over them removes them (mask-ragged-edges has made those exact). Values
without such lanes (a GEMM's accumulator, attention's running max and sum) are left alone and
cost nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from lowering.passes.lanes import Lanes, along, emit, in_range
from lowering.passes.ragged import maybe_padded
from tiledsl import dtypes
from tiledsl.ir.core import (
    Function, Op, Value, loop_carried, loop_ranges, loop_start, loop_stop, walk,
)
from tiledsl.ir.types import RangeType, TileType


def _maybe_ragged(r: RangeType) -> bool:
    return isinstance(r.block, str) or r.extent % r.block != 0 or maybe_padded(r.block)


@dataclass(frozen=True)
class KeepCarriedLanesPass:
    name: str = "keep-carried-lanes"

    def run(self, fn: Function) -> None:
        for op in list(walk(fn.body)):
            if op.name == "for":
                self._loop(op)

    def _loop(self, loop: Op) -> None:
        for r in loop_ranges(loop):  # one range, or each of a strided loop's
            self._range(loop, r)

    def _range(self, loop: Op, r: Value) -> None:
        body = loop.regions[0]
        rt = r.type
        assert isinstance(rt, RangeType)
        stop = loop_stop(loop)
        if stop is None and not _maybe_ragged(rt):
            return
        lanes = Lanes(r)
        term = body.ops[-1]
        new_ops: list[Op] = []
        valid: Value | None = None
        for i, (new, old) in enumerate(zip(term.operands, loop_carried(loop))):
            t = new.type
            axes = sorted(lanes.of(new)) if isinstance(t, TileType) else []
            if not axes:
                continue
            if valid is None:
                valid = in_range(r, new_ops, term, stop, loop_start(loop))
            cond: Value | None = None
            for a in axes:
                c = along(valid, a, t, new_ops, term)
                cond = c if cond is None else emit(
                    new_ops, "and", [cond, c], TileType(t.shape, dtypes.bool_), term)
            assert cond is not None
            term.operands[i] = emit(new_ops, "where", [cond, new, old], t, term)
        body.ops[-1:-1] = new_ops
