"""The tile IR's data structures: SSA values, ops with regions, blocks and the kernel function.

Ops are plain records; what an op *means* (its operands, attributes and result types) lives in
`tiledsl.ir.ops`. Passes work on a clone (`Function.clone`) and mutate it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from tiledsl.errors import Loc
from tiledsl.ir.types import Type


class Value:
    """An SSA value: the result of an op or an argument of a block. Compared by identity."""

    __slots__ = ("type", "hint", "owner")

    def __init__(self, type: Type, hint: str | None = None, owner: Op | None = None) -> None:
        self.type = type
        self.hint = hint
        self.owner = owner

    def __repr__(self) -> str:
        return f"Value({self.hint or id(self)}: {self.type})"


@dataclass(eq=False)
class Block:
    """A straight-line list of ops with arguments (the loop variables of a grid or for)."""

    args: list[Value] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)


@dataclass(eq=False)
class Op:
    """One operation. `attrs` values are ints, floats, bools, strings or tuples of those."""

    name: str
    operands: list[Value]
    results: list[Value]
    attrs: dict[str, Any] = field(default_factory=dict)
    regions: list[Block] = field(default_factory=list)
    loc: Loc | None = None

    def __post_init__(self) -> None:
        for r in self.results:
            r.owner = self

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]


@dataclass(frozen=True)
class Symbol:
    """A block-size symbol: the tile dimension it cuts and where the user wrote it."""

    name: str
    extent: int
    loc: Loc | None = None
    low: int | None = None  # the choices' bounds of a registered block size (block_sizes.py)
    high: int | None = None
    # the registered symbol whose value this one takes: a loop over another size than the
    # registered one cut with its block size (Helion's block sizes are one per registration),
    # a symbol of its own extent, but not a param of the config
    tied: str | None = None


def block_index(symbols: dict[str, Symbol]) -> dict[str, int]:
    """Each symbol's index in a config's `block_sizes`: the untied symbols in order, and a
    tied one at its registered symbol's."""
    untied = [n for n, s in symbols.items() if s.tied is None]
    index = {n: i for i, n in enumerate(untied)}
    return index | {n: index[s.tied] for n, s in symbols.items() if s.tied is not None}


@dataclass(eq=False)
class Function:
    """A traced kernel: arguments, a body ending in `return`, and its block-size symbols."""

    name: str
    args: list[Value]
    body: Block
    symbols: dict[str, Symbol]
    file: str = ""

    @property
    def arg_names(self) -> list[str]:
        return [a.hint or f"arg{i}" for i, a in enumerate(self.args)]

    @property
    def outputs(self) -> list[Value]:
        ret = self.body.ops[-1]
        assert ret.name == "return"
        return list(ret.operands)

    def walk(self) -> Iterator[Op]:
        return walk(self.body)

    def tunable_symbols(self) -> list[str]:
        """The symbols a config's `block_sizes` give, in order (the untied ones)."""
        return [n for n, s in self.symbols.items() if s.tied is None]

    @functools.cached_property
    def _block_index(self) -> dict[str, int]:
        return block_index(self.symbols)  # (a traced function's symbols are fixed)

    def block_values(self, block_sizes: Sequence[int]) -> dict[str, int]:
        """Every symbol's block size under a config's `block_sizes` (tied ones included): the
        cost model asks once per config it prices."""
        n = len(block_sizes)
        return {s: block_sizes[i] for s, i in self._block_index.items() if i < n}

    def clone(self) -> Function:
        vmap: dict[Value, Value] = {}
        args = [_clone_value(a, vmap) for a in self.args]
        body = clone_block(self.body, vmap)
        return Function(self.name, args, body, dict(self.symbols), self.file)


def upstream(values: list[Value]) -> Iterator[Value]:
    """Each value `values` are computed from, themselves first, once: through the operands of
    the ops that make them, and for an `if`'s result, what its branches yield for it."""
    seen: set[int] = set()
    todo = list(values)
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        yield v
        if v.owner is not None:
            todo.extend(v.owner.operands)
            if v.owner.name == "if":
                k = v.owner.results.index(v)
                todo.extend(r.ops[-1].operands[k] for r in v.owner.regions
                            if r.ops and r.ops[-1].name == "yield")


def walk(block: Block) -> Iterator[Op]:
    """Every op in `block`, nested regions included, in program order (pre-order)."""
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from walk(region)


def _clone_value(v: Value, vmap: dict[Value, Value]) -> Value:
    nv = Value(v.type, v.hint)
    vmap[v] = nv
    return nv


def clone_block(block: Block, vmap: dict[Value, Value]) -> Block:
    args = [_clone_value(a, vmap) for a in block.args]
    return Block(args, [clone_op(op, vmap) for op in block.ops])


def clone_op(op: Op, vmap: dict[Value, Value]) -> Op:
    """A copy of `op` and its regions reading `vmap[v]` for each value `v` it maps (the
    copies' own results are added to it)."""
    operands = [vmap.get(o, o) for o in op.operands]
    regions = [clone_block(r, vmap) for r in op.regions]
    results = [_clone_value(r, vmap) for r in op.results]
    return Op(op.name, operands, results, dict(op.attrs), regions, op.loc)


def use_counts(block: Block) -> dict[Value, int]:
    counts: dict[Value, int] = {}
    for op in walk(block):
        for o in op.operands:
            counts[o] = counts.get(o, 0) + 1
    return counts


def loop_stop(op: Op) -> Value | None:
    """The runtime stop of a `for` over `td.tile(stop)` (its first operand), else None. The
    loop covers `[0, min(stop, extent))` of its range; lanes at or past the stop are out of
    range."""
    return op.operands[0] if op.attrs.get("stop") else None


def loop_start(op: Op) -> Value | None:
    """The runtime start of a `for` over `td.tile(..., start=s)` (after its stop), else None.
    The loop covers the tiles that meet `[min(start, stop), stop)`; lanes before it are out of
    range."""
    return op.operands[1] if op.attrs.get("start") else None


def loop_first(op: Op) -> Value | None:
    """The first tile of a strided `for` (`td.tile(m, n)[first::stride]`, attribute `stride`),
    else None: the loop runs the tiles `first, first + stride, ...` of its ranges, numbered
    row-major, below their count."""
    return op.operands[0] if op.attrs.get("stride") else None


def loop_ranges(op: Op) -> list[Value]:
    """The ranges a `for` iterates: one, or for a strided loop one per size (its region's
    leading arguments; the carried values follow)."""
    return op.regions[0].args[:int(op.attrs.get("ranges", 1))]


def loop_carried(op: Op) -> list[Value]:
    """The region arguments of a `for` that carry values from trip to trip."""
    return op.regions[0].args[int(op.attrs.get("ranges", 1)):]


def loop_inits(op: Op) -> list[Value]:
    """The initial values of a `for`'s carried values (its operands after any runtime stop and
    start, or a strided loop's first tile)."""
    return op.operands[bool(op.attrs.get("stop")) + bool(op.attrs.get("start"))
                       + bool(op.attrs.get("stride")):]


def result_sources(op: Op, i: int) -> list[Value]:
    """The values result `i` of an op with regions may take: a `for`'s (or `while`'s) initial
    value and what its body yields, or what each branch of an `if` yields."""
    if op.name == "while":  # its operands and yields lead with a condition
        return [op.operands[i + 1], op.regions[0].ops[-1].operands[i + 1]]
    yields = [r.ops[-1].operands[i] for r in op.regions if r.ops and r.ops[-1].name == "yield"]
    return ([loop_inits(op)[i]] if op.name == "for" else []) + yields
