"""How many registers a generated kernel will use per thread, guessed from the IR before
compiling: the most 32-bit words its live tiles hold at any point, spread over the program's
threads, plus the registers every kernel keeps for addresses, indices and loop state.

A value lives from its op to its last use, its registers free for that op's results; one
defined outside a loop and used inside lives to the loop's end; a carried value shares the
registers of the value yielded for it, and a dot's result added to an accumulator those of the
sum (one MMA accumulating in place). What takes no registers: loads whose
only uses are dots (Triton stages them in shared memory for the tensor cores), broadcasts and
expand_dims (a row used across a tile is not copied), constants and booleans (predicates), and
the values inside a chain of elementwise ops with no reduction, dot or loop between its steps
(computed element by element: a GELU epilogue holds its input and a few temporaries, not a
tile per step; layer norm's `x - mean` lives across the variance's reduction).
16-bit values pack two to a register. Checked against the compiled cubins of every example by
`benchmarks/register_estimate.py`.
"""

from __future__ import annotations

import math

from lowering.backends.triton.emit import padded
from tiledsl.ir.core import Block, Function, Op, Value, walk
from tiledsl.ir.ops import BINARY, COMPARE, UNARY
from tiledsl.ir.types import TileType

# Indices and addresses besides the tiles, fitted on sm_90 cubins of the examples (the median
# of compiled minus tile registers over benchmarks/register_estimate.py's seed-0 configs, triton
# 3.6): a kernel without loops, one with a loop of loads, one whose loop feeds the tensor cores
# (a pipeline's addresses, barriers and stage indices), less with TMA (no pointer tiles: at
# 128x64 attention, 4 warps, 240 -> 193; 24 keeps that config within 15%, where the median of the
# smaller sampled tiles says 12).
BASE, LOOP_BASE, MMA_LOOP_BASE = 14, 18, 38
TMA_SAVING = 24
# Under 4 warps there is no warpgroup for wgmma: mma.sync takes its operands from registers.
MMA_SYNC_FRAGMENTS = 24
FREE = ("broadcast", "expand_dims", "const", "tile.index", "tile.begin", "tile.size")
ELEMENTWISE = (*BINARY, *COMPARE, *UNARY, "where", "cast", "mask")
BARRIERS = ("reduce", "dot", "cumsum", "for", "if", "store")  # what a chain cannot fuse across
TO_SHARED = ("dot", "transpose", "mask")  # a load used only through these feeds a dot


def words(v: Value, blocks: dict[str, int]) -> int:
    """32-bit registers a tile value takes across its program."""
    t = v.type
    if not isinstance(t, TileType) or t.dtype.is_bool:
        return 0
    n = math.prod(blocks[d] if isinstance(d, str) else padded(d) for d in t.shape)
    return -(-n * max(t.dtype.bits, 16) // 32)


def peak_words(fn: Function, blocks: dict[str, int], staged: bool = True) -> int:
    """The most words live at once in `fn`'s kernels; `staged`: loads that only feed dots go
    to shared memory without registers (cp.async or TMA; not so with one stage and pointers,
    where a tile is loaded into registers and stored to shared memory: batched_matmul 64x512x64
    at 1 stage, 237 registers compiled, 160 estimated before)."""
    order: list[Op] = []
    where: dict[Value, tuple[int, tuple[Op, ...]]] = {}  # value -> (position, its loops)
    at: dict[int, tuple[int, tuple[Op, ...]]] = {}  # id(op) -> (position, its loops)
    loop_end: dict[int, int] = {}
    _number(fn.body, (), order, where, at, loop_end)
    uses = uses_of(order)
    barriers = [i for i, op in enumerate(order) if op.name in BARRIERS]
    ends: dict[Value, int] = {}
    for op in order:
        position, loops = at[id(op)]
        for o in op.operands:
            if o not in where:
                continue
            outer = [lp for lp in loops if lp not in where[o][1]]  # loops o was made outside
            ends[o] = max(ends.get(o, -1), loop_end[id(outer[0])] if outer else position)
    sizes = {v: words(v, blocks) for v in where
             if _in_registers(v, uses, where[v][0], ends.get(v, -1), barriers, staged)}
    # A value's registers are free for the results of the op that last uses it (elementwise
    # ops work in place): at a position, frees (negative) come before new values.
    events = sorted([(where[v][0], sizes[v]) for v in sizes] +
                    [(max(ends.get(v, -1), where[v][0] + 1), -sizes[v]) for v in sizes])
    live = peak = 0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    return peak


def registers(fn: Function, blocks: dict[str, int], warps: int, tma: bool = False,
              stages: int = 3) -> int:
    """Registers per thread, before the 255 the hardware allows (more means spills)."""
    loops = [{o.name for o in walk(op.regions[0])} for op in walk(fn.body) if op.name == "for"]
    mma = any("dot" in n for n in loops)
    base = MMA_LOOP_BASE - (TMA_SAVING if tma else 0) + \
        (MMA_SYNC_FRAGMENTS if warps < 4 else 0) if mma else \
        LOOP_BASE if any("load" in names for names in loops) else BASE
    return -(-peak_words(fn, blocks, tma or stages > 1) // (32 * warps)) + base


def _number(block: Block, loops: tuple[Op, ...], order: list[Op],
            where: dict[Value, tuple[int, tuple[Op, ...]]],
            at: dict[int, tuple[int, tuple[Op, ...]]], loop_end: dict[int, int]) -> None:
    """Program-order positions of ops and values, with the loops around each; a loop's (or
    grid's) region arguments belong inside it, and live to its end."""
    for op in block.ops:
        position = len(order)
        order.append(op)
        at[id(op)] = (position, loops)
        for region in op.regions:
            inner = loops + (op,)
            for a in region.args:  # a carried value is the yielded one's registers
                where[a] = (position, inner)
            _number(region, inner, order, where, at, loop_end)
        loop_end[id(op)] = len(order) - 1
        for r in op.results:  # a loop's results exist after it
            where[r] = (loop_end[id(op)], loops)


def uses_of(order: list[Op]) -> dict[Value, list[Op]]:
    """Each value's users among `order`."""
    out: dict[Value, list[Op]] = {}
    for op in order:
        for o in op.operands:
            out.setdefault(o, []).append(op)
    return out


def _elementwise(op: Op) -> bool:
    return op.name in ELEMENTWISE


def _in_registers(v: Value, uses: dict[Value, list[Op]], start: int, end: int,
                  barriers: list[int], staged: bool = True) -> bool:
    op = v.owner
    if op is None:  # a loop's carried value or a grid position
        return True
    if op.name in FREE:
        return False
    if _elementwise(op) and all(_elementwise(u) for u in uses.get(v, [])) and \
            not any(start < b < end for b in barriers):
        return False  # inside a chain of elementwise ops: computed element by element
    if op.name == "load":
        return not (staged and feeds_dots_only(v, uses))
    if op.name == "dot":  # `acc + a @ b` is one MMA accumulating in the sum's registers
        return not all(u.name == "add" for u in uses.get(v, []))
    return True


def feeds_dots_only(v: Value, uses: dict[Value, list[Op]]) -> bool:
    """Whether `v` (a loaded tile) only feeds dots, perhaps through a transpose or a mask:
    Triton stages it in shared memory for the tensor cores."""
    users = uses.get(v, [])
    return bool(users) and all(u.name == "dot" or (u.name in TO_SHARED and
                                                   feeds_dots_only(u.result, uses))
                               for u in users)
