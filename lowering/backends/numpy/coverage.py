"""The td.empty tensors that a store surely writes whole, so they need no poison fill.

`td.empty` fills a float tensor with a marked NaN (memory.empty) so that elements no store
writes are caught (check_written) and loads of them read NaN. Filling costs a pass over memory;
it is skipped where it can make no difference: the tensor is only stored to (no load, view or
atomic reads it, so nobody sees what it held) and one store, run unconditionally by a top-level
grid, indexes each of its dimensions with a grid range spanning that dimension, with no mask,
slice or index tile: every element is then written under any block size (the ragged pass masks
only lanes past the end). This depends on the function only (not on the config or the arguments'
values), so it is worked out once per function (plan.py).
"""

from __future__ import annotations

from tiledsl.ir.core import Function, Op, Value
from tiledsl.ir.gathers import access_parts, gathers
from tiledsl.ir.types import RangeType, TensorType


def covered_empties(fn: Function) -> set[Value]:
    """The results of `fn`'s top-level td.empty ops that a store surely writes whole and
    nothing reads."""
    uses: dict[Value, list[Op]] = {}
    for op in fn.walk():
        for v in op.operands:
            uses.setdefault(v, []).append(op)
    sure = {op.operands[0] for grid in fn.body.ops if grid.name == "grid"
            for op in grid.regions[0].ops if _covers(op, grid)}
    return {op.result for op in fn.body.ops if op.name == "tensor.empty" and op.result in sure
            and all(u.name == "return" or (u.name == "store" and u.operands[0] is op.result
                                           and op.result not in u.operands[1:])
                    for u in uses.get(op.result, ()))}


def _covers(op: Op, grid: Op) -> bool:
    """Whether `op`, in `grid`'s body, is a store that writes its whole tensor."""
    if op.name != "store" or op.attrs.get("mask") or op.attrs.get("full") or gathers(op) \
            or any(k.startswith("slice") for k in op.attrs):
        return False
    tensor = op.operands[0].type
    indices = access_parts(op)[0]
    args = grid.regions[0].args
    return isinstance(tensor, TensorType) and len(indices) == len(tensor.shape) and \
        len(set(indices)) == len(indices) and \
        all(i in args and isinstance(i.type, RangeType) and i.type.extent == n
            and not i.type.stop and not i.type.shifted
            for i, n in zip(indices, tensor.shape))
