"""The whole-kernel verifier: types follow the op rules, values dominate their uses, regions nest
the way the DSL allows, and no block-size symbol cuts two nested ranges."""

from __future__ import annotations

from tiledsl.errors import IRError, TraceError
from tiledsl.ir.core import (
    Block, Function, Op, Value, loop_carried, loop_inits, loop_ranges, walk,
)
from tiledsl.ir.ops import ISOLATED, OPS, result_types
from tiledsl.ir.types import RangeType, TensorType, TileType, Type

_HOST_ONLY = ("tensor.empty", "tensor.full", "tensor.random", "grid", "return")
_DEVICE_ONLY = ("load", "store", "atomic", "for", "if", "while", "yield", "mask", "tile.index",
                "tile.begin", "tile.size", "tile.shift")


class Verifier:
    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.open: set[str] = set()  # the block symbols of the ranges enclosing the op checked

    def fail(self, op: Op | None, msg: str) -> IRError:
        where = f"{op.name}: " if op is not None else ""
        return IRError(where + msg, kernel=self.fn.name, loc=op.loc if op is not None else None)

    def check_type(self, op: Op | None, t: Type) -> None:
        dims = t.shape if isinstance(t, TileType) else (t.block,) if isinstance(t, RangeType) else ()
        for d in dims:
            if isinstance(d, str) and d not in self.fn.symbols:
                raise self.fail(op, f"undeclared block symbol {d}")
            if isinstance(d, int) and d < 1:
                raise self.fail(op, f"non-positive dimension {d}")
        if isinstance(t, TensorType) and any(d < 0 for d in t.shape):  # (empty ones are
            raise self.fail(op, f"negative dimension in {t}")  # grids' of no program)

    def bind_range(self, op: Op, r: Value) -> None:
        """A symbol may cut several ranges (the traces of one `td.tile` call), never two that
        are open at once (nested loops, or two sizes of one call)."""
        t = r.type
        if not isinstance(t, RangeType):
            raise self.fail(op, f"loop variable must be a range, got {t}")
        if isinstance(t.block, str):
            if t.block in self.open:
                raise self.fail(op, f"block symbol {t.block} cuts two nested ranges")
            sym = self.fn.symbols.get(t.block)
            if sym is None or sym.extent != t.extent:
                raise self.fail(op, f"{t} does not match its symbol declaration")
            self.open.add(t.block)

    def block(self, block: Block, scope: set[Value], depth: str, terminator: str | None) -> None:
        scope = set(scope) | set(block.args)
        for a in block.args:
            self.check_type(None, a.type)
        for i, op in enumerate(block.ops):
            opdef = OPS.get(op.name)
            if opdef is None:
                raise self.fail(op, "unknown op")
            for o in op.operands:
                if o not in scope and isinstance(o.type, TensorType) and not any(
                        o in x.results for x in walk(self.fn.body)):  # not this trace's
                    what = f"'{o.hint}'" if o.hint else "the tensor used here"
                    raise TraceError(f"{what} is a tensor of an earlier trace "
                                     "of this kernel, which an object kept between calls (a "
                                     "module caching `self.kernel = torch.full(...)` in its "
                                     "forward, attorch's AvgPool)", kernel=self.fn.name,
                                     loc=op.loc, hint="make it on every call, or pass it as "
                                     "an argument")
                if o not in scope:
                    raise self.fail(op, f"operand {o} is not defined before its use")
            if depth == "host" and op.name in _DEVICE_ONLY:
                raise self.fail(op, "only allowed inside a grid")
            if depth != "host" and op.name in _HOST_ONLY:
                raise self.fail(op, "only allowed outside the grid")
            last = i == len(block.ops) - 1
            if opdef.terminator and not (last and op.name == terminator):
                raise self.fail(op, "terminator in the wrong place")
            try:
                inferred = result_types(op.name, [o.type for o in op.operands], op.attrs,
                                        [r.type for r in op.results])
            except IRError as e:
                raise self.fail(op, e.message) from None
            if inferred != [r.type for r in op.results]:
                raise self.fail(op, f"result types {[str(r.type) for r in op.results]} do not "
                                    f"match the rule's {[str(t) for t in inferred]}")
            for r in op.results:
                self.check_type(op, r.type)
            if len(op.regions) != opdef.regions:
                raise self.fail(op, f"expects {opdef.regions} regions")
            opened = set(self.open)
            if op.name == "grid":
                for a in op.regions[0].args:
                    self.bind_range(op, a)
                    if isinstance(a.type, RangeType) and a.type.stop:
                        raise self.fail(op, "a grid's ranges have static sizes")
                self.block(op.regions[0], scope, "grid", None)
            elif op.name == "for":
                region = op.regions[0]
                ranges = loop_ranges(op)
                if len(ranges) != int(op.attrs.get("ranges", 1)):
                    raise self.fail(op, "needs a range argument per range")
                for r in ranges:
                    self.bind_range(op, r)
                    rt = r.type
                    if isinstance(rt, RangeType) and rt.stop != bool(op.attrs.get("stop")):
                        raise self.fail(op, "a range cut by a runtime stop needs the loop's "
                                            "stop operand, and only such a range")
                inits = loop_inits(op)
                if [a.type for a in loop_carried(op)] != [o.type for o in inits]:
                    raise self.fail(op, "carried arguments do not match the initial values")
                self.block(region, scope, "loop", "yield")
                yielded = region.ops[-1].operands if region.ops else []
                if [v.type for v in yielded] != [o.type for o in inits]:
                    raise self.fail(op, "yielded values do not match the carried values")
            elif op.name == "while":
                region = op.regions[0]
                if [a.type for a in region.args] != [o.type for o in op.operands[1:]]:
                    raise self.fail(op, "carried arguments do not match the initial values")
                self.block(region, scope, "loop", "yield")
                if [v.type for v in region.ops[-1].operands] != [o.type for o in op.operands]:
                    raise self.fail(op, "the body yields a bool scalar (whether to run another "
                                        "trip), then values matching the carried values")
            elif op.name == "if":
                for region in op.regions:
                    if region.args:
                        raise self.fail(op, "a branch takes no arguments")
                    self.block(region, scope, "if", "yield")
                    if [v.type for v in region.ops[-1].operands] != [r.type for r in op.results]:
                        raise self.fail(op, "a branch yields values that do not match the "
                                            "results")
            elif ISOLATED in opdef.traits:  # a scan's combine function: its arguments only
                self.block(op.regions[0], set(), "combine", "yield")
                types = [TileType((), r.type.dtype) for r in op.results]  # type: ignore[union-attr]
                if [a.type for a in op.regions[0].args] != types * 2 or \
                        [v.type for v in op.regions[0].ops[-1].operands] != types:
                    raise self.fail(op, "the combine region takes two scalars per operand and "
                                        "yields one")
            self.open = opened
            scope.update(op.results)
        if terminator is not None and (not block.ops or block.ops[-1].name != terminator):
            raise self.fail(None, f"block does not end with '{terminator}'")

    def run(self) -> None:
        for a in self.fn.args:
            self.check_type(None, a.type)
        self.block(self.fn.body, set(self.fn.args), "host", "return")


def verify(fn: Function) -> None:
    """Raise IRError (naming the op and its source line) if `fn` is malformed."""
    Verifier(fn).run()
