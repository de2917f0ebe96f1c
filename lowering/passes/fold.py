"""fold-constants: evaluate ops whose operands are all constants, with the reference semantics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lowering.backends.numpy.elementwise import ELEMENTWISE, apply
from tiledsl.ir.core import Block, Function, Op, Value
from tiledsl.ir.types import TileType


def _scalar(v: object) -> bool | int | float:
    x = np.asarray(v).item()
    return x


@dataclass(frozen=True)
class FoldConstantsPass:
    name: str = "fold-constants"

    def run(self, fn: Function) -> None:
        self._block(fn.body, {}, {})

    def _block(self, block: Block, consts: dict[Value, object], repl: dict[Value, Value]) -> None:
        ops: list[Op] = []
        for op in block.ops:
            op.operands = [repl.get(o, o) for o in op.operands]
            for region in op.regions:
                self._block(region, consts, repl)
            folded = self._fold(op, consts)
            if folded is not None:
                t = op.result.type
                assert isinstance(t, TileType)
                new = Op("const", [], [Value(t, op.result.hint)], {"value": folded}, [], op.loc)
                consts[new.result] = folded
                repl[op.result] = new.result
                ops.append(new)
                continue
            if op.name == "const":
                consts[op.result] = op.attrs["value"]
            ops.append(op)
        block.ops = ops

    def _fold(self, op: Op, consts: dict[Value, object]) -> bool | int | float | None:
        if op.name not in ELEMENTWISE and op.name != "cast":
            return None
        if not op.operands or any(o not in consts for o in op.operands):
            return None
        t = op.result.type
        if not isinstance(t, TileType) or t.shape != ():
            return None
        args = [np.asarray(consts[o], dtype=o.type.dtype.np) for o in op.operands]  # type: ignore[union-attr]
        if op.name == "cast":
            with np.errstate(all="ignore"):
                return _scalar(args[0].astype(t.dtype.np))
        return _scalar(apply(op.name, args, t.dtype.np))
