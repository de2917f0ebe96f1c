"""How many registers a generated kernel will use per thread, guessed from the IR before
compiling: the most 32-bit words its live tiles hold at any point in one thread, plus the
addresses pipelined loads keep and what every kernel keeps for indices and loop state.

A value lives from its op to its last use, its registers free for that op's results; one
defined outside a loop and used inside lives to the loop's end; a carried value shares the
registers of the value yielded for it, and a dot's result added to an accumulator those of the
sum (one MMA accumulating in place). What takes no registers: loads whose
only uses are dots (Triton stages them in shared memory for the tensor cores), broadcasts and
expand_dims (a row used across a tile is not copied), constants and booleans (predicates), and
the values inside a chain of elementwise ops with no reduction, dot or loop between its steps
(computed element by element: a GELU epilogue holds its input and a few temporaries, not a
tile per step; layer norm's `x - mean` lives across the variance's reduction), and so is one
whose only users are reductions (`x * x` into rms_norm's sum); a tile such a chain reads lives
to the chain's end. ptxas adds its own schedule: loads issued together (HOIST_WORDS), loads
streamed into their uses (STREAM_WORDS; STREAM_LOOP_WORDS across a loop's trips), loads fetched
ahead beside a tile that lives on (ISSUE_AHEAD), a reduction's partials beside a tile that lives
on (REDUCE_SHARE, per row where a thread holds several rows), the butterfly stages of an
argmax or a scan across lanes (SHUFFLE_STAGE_WORDS), and a floor. Triton adds its layouts: the
tiles between two chained dots (attention's scores) lie in the first dot's MMA layout, repeated
in each warpgroup when the tile has fewer than 16 rows a warp, the second dot's operand held
beside them where both dots share that layout (`chained`); loads that a runtime start or stop
cuts take pointers and masks, not descriptors (`pointer_copies`). 16-bit values pack two to a
register; a tile smaller than the program takes one in each thread. Each constant below names the
SASS observation it comes from; they were fitted on the seed-0 configs of
`benchmarks/register_estimate.py` (sm_90, triton 3.9,
`benchmarks/results/register_estimate_sm_90.json`) and checked on its held-out seed-1 configs
(`..._heldout.json`) and on both sets compiled by triton 3.6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lowering.backends.triton.widen import padded
from lowering.backends.triton.split import prefix_true
from tiledsl.ir.bounds import divisor, interval
from tiledsl.ir.core import Block, Function, Op, Value, loop_start, loop_stop, walk
from tiledsl.ir.ops import ARG_REDUCTIONS, BINARY, COMPARE, UNARY
from tiledsl.ir.types import RangeType, TileType

# The terms below are read off sm_90 cubins of the examples (benchmarks/register_estimate.py,
# seed-0 configs, triton 3.9; cuobjdump's REG against the PTX the configs compile to). The
# model: registers = max(FLOOR, tiles + addresses + BASE + POINTER per tensor [+ LOOP/MMA terms]).
#
# A kernel with a single thread-sized tile still takes about a dozen: its program id, the
# tensors' 64-bit base pointers and an offset (vector_add at 256 elements over 8 warps: 12).
FLOOR = 12
MAX_REGISTERS = 255  # per thread; beyond, values spill to local memory
# What every kernel keeps besides its tiles and base addresses: the program and thread ids, the
# row/column offsets of its accesses, and the two registers ptxas reserves.
BASE = 4
# Each tensor a grid loads or stores keeps its 64-bit base address whatever the tile: vector_add
# at 4 elements a thread (two 128-bit loads) takes 22 registers, 6 of them its three pointers;
# this term is what keeps small elementwise kernels from following the tile down to the floor
# (vector_add and axpby at 1, 4, 16, 32, 64 elements a thread: 12-15, 22, 32-34, 48-52, 80).
POINTER = 2
# A loop keeps its induction variable and bound across trips (row_sum at 2 to 32 elements a
# thread: 32-36 registers, its loads streamed across the unrolled trips, STREAM_LOOP_WORDS).
LOOP_BASE = 4
# A loop feeding the tensor cores keeps a pipeline's stage and phase indices, barriers, the
# accumulator's epilogue offsets (GEMM 128x256x64 with TMA, 8 warps: 154 against 128 words of
# accumulator and 6 of pointers; 64x64x64 with TMA, 4 warps: 58 against 32 and 6).
MMA_BASE = 16
# Loads issued back to back: ptxas hoists a block's global loads to its start (or to the last
# barrier, reduction or store before them) to overlap their latency, so two loaded tiles are live
# together even where the IR uses one before loading the other (axpby at 32x64, 4 warps: 32
# registers for two tiles of 16, where the IR's order needs 16). It stops hoisting once the tiles
# in flight reach about HOIST_WORDS words a thread (vector_add at 4096 elements, 4 warps: 52
# registers for 64 words loaded).
HOIST_WORDS = 40
# A loaded tile consumed element by element (by elementwise ops or a reduction) need not be
# held whole: ptxas interleaves its loads with the math, keeping about this many words of each a
# thread in flight while the result builds (vector_add at 32 elements a thread, 4 warps: 52
# registers, 32 of them the sum stored at the end, 6 its pointers).
STREAM_WORDS = 4
# In a loop (unrolled: its bounds are static) ptxas overlaps the trips' loads whatever the tile:
# row_sum holds about 20 words of loads in flight at 2 elements a thread as at 32 (SASS: eleven
# 64-bit loads issued ahead of the FADD chain).
STREAM_LOOP_WORDS = 20
# Loads streamed beside a tile that lives across them (a norm's weight and bias beside its row,
# after the reduction's barrier) are fetched ahead of the math: about half that tile in flight
# (rms_norm at 8192 columns: 72, 115 and 210-214 registers for rows of 32, 64 and 128 words a
# thread; layer_norm 64, 112, 190-210).
ISSUE_AHEAD = 0.5
# A reduction of a tile that is used again after it (softmax's row, for the max and then the
# exponent) keeps its partial results beside the tile (softmax at 8192 columns, 4 warps: 88
# registers for a 64-word row; 8 warps: 48 for 32).
REDUCE_SHARE = 0.4
REDUCE_WORDS = 16  # the most, whatever the tile
# A thread holding several rows of the reduced axis reduces them one by one: the partials are
# REDUCE_SHARE of one row's share, not the tile's (row_argmax at 256x16, 4 warps: 8 rows of 4
# words a thread, 51 registers compiled, 58 estimated, 69 with a whole-tile share).
# A reduction whose combine carries a value and a position (argmax, argmin) or a scan (cumsum)
# across the lanes holding a row keeps each butterfly stage's shuffled operands: SASS shuffles
# the max, the argmax value and its index at each stage (3 SHFL.BFLY a stage, their results live
# together; cumsum's SHFL.UP with its lane predicate and select), at most SHUFFLE_WORDS (row_argmax
# at 2x256, 8 warps: 25 registers for 2 words of tile, 5 stages; 1x2048, 4 warps: 47 for 16;
# row_cumsum 2x128 at 4 warps: 27 for 2 words, 4x512: 55 for 16).
SHUFFLE_STAGE_WORDS = 3
SHUFFLE_WORDS = 8
# A loop whose tile has at most LANES elements is held whole by every warp (the others are
# copies): its trips exchange nothing through shared memory, and ptxas unrolls the loop and
# overlaps its trips: row_argmax 4x4 at 4 warps issues 4 trips' loads together and interleaves
# 3 trips' butterfly stages (36 registers; 23 estimated with one trip's). At 8x8 (64 elements,
# rows across 2 warps) each trip passes through shared memory (4 BAR.SYNC a trip) and trips do
# not overlap (28 registers).
OVERLAP_TRIPS = 3
LANES = 32  # a warp: stages beyond it go through shared memory
VECTOR_BITS = 128  # the widest load a thread issues: Triton's elements per thread along a row
# A pointer load feeding a dot through the pipeline (cp.async) keeps, for each 16-byte vector a
# thread copies, its 64-bit global address and its 32-bit shared address across the loop's trips
# (matmul 64x32x512 with 8 warps, K too long for a TMA box: 24 vectors a thread, 101 registers
# against 8 of accumulator; 128x128x64 GEMM+GELU: 114 against 64). A loop the emitter splits at
# the diagonal (split.py: causal attention) is two loops, each with its own addresses, set up
# before the first (attention at 128x64, 4 warps: 240 registers with pointers, 191 with TMA).
# Still 3 where loops hoist pointer tiles and advance them by a runtime stride (loops.py): the
# SASS keeps one loop-invariant 64-bit pointer per row a thread copies (2 registers a vector)
# and computes each trip's addresses into temporaries (GEMM 128x128x64, 4 warps: 32 and 16
# registers for 16 vectors, 206 compiled, 192 with carried pointers; attention at d64, 4 warps:
# 250, which needs more than 2.2 here). The GEMM 64x64x64 at 4 warps without TMA is below the
# model (64 compiled, 72 carried, 82 estimated): 32 of accumulator, 16 of pointers, 4
# temporaries and 12 besides, where BASE + POINTER + MMA_BASE say 26 (with TMA: 58 compiled,
# 58 estimated); no address term fits both it and attention.
ASYNC_ADDRESS = 3
# Under 4 warps there is no warpgroup for wgmma: mma.sync takes its operands from registers,
# each thread its share of a trip's A and B tiles (sync_fragments; a fixed 24 before, which
# missed GEMM 64x32x64 at 2 warps by 14% and 32x64x32 by 19%).
# wgmma also needs 64 rows of a dot for each warpgroup: a dot of fewer rows runs mma.sync, and
# an A operand loaded before the loop (attention's q) stays in registers across it, whole in
# every warp (attention at 16-row tiles, 8 warps: 59 registers for 6 words of tiles, its PTX
# all mma.sync and ldmatrix; q 16x64 fp16 is 16 words a thread).
WGMMA_ROWS = 64
TMA_BOX = 256  # the most elements a tensor descriptor's box spans in a dimension
FREE = ("broadcast", "expand_dims", "const", "tile.index", "tile.begin", "tile.size",
        "mask")  # a mask is no code where the tile has no padded lanes, else a select in place
ELEMENTWISE = (*BINARY, *COMPARE, *UNARY, "where", "cast", "mask")
# what a chain cannot fuse across
BARRIERS = ("reduce", "dot", "cumsum", "for", "if", "while", "store")
TO_SHARED = ("dot", "transpose", "mask")  # a load used only through these feeds a dot


def words(v: Value, blocks: dict[str, int], threads: int = 1) -> float:
    """32-bit registers a tile value takes in each of `threads` threads: at least one, as a tile
    smaller than the program is replicated across its threads."""
    t = v.type
    if not isinstance(t, TileType) or t.dtype.is_bool:
        return 0
    n = math.prod(blocks[d] if isinstance(d, str) else padded(d) for d in t.shape)
    return max(1.0, n * max(t.dtype.bits, 16) / 32 / threads)


def peak_words(fn: Function, blocks: dict[str, int], staged: bool = True,
               threads: int = 1, loaded: frozenset[Op] = frozenset(),
               chain: Chained | None = None) -> float:
    """The most words a thread holds at once in `fn`'s kernels; `staged`: loads that only feed
    dots go to shared memory without registers (cp.async or TMA; not so with one stage and
    pointers, where a tile is loaded into registers and stored to shared memory: batched_matmul
    64x512x64 at 1 stage, 237 registers compiled, 160 estimated before); `loaded`: loads
    that feed dots through registers even so (pointer loads beside TMA at 1 stage); `chain`:
    the layout of tiles between chained dots."""
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
    chain = chain or Chained({}, {}, 0.0)
    sizes = {v: words(v, blocks, chain.threads.get(v, threads)) for v in where
             if _in_registers(v, uses, where[v][0], ends.get(v, -1), barriers,
                              staged and v.owner not in loaded)}
    _through_chains(order, uses, sizes, ends)
    streamed = {v for v in sizes if _streamed(v, uses, where[v][0], ends.get(v, -1), barriers)}
    for v in streamed:  # in a loop, ptxas overlaps the trips' loads whatever the tile
        sizes[v] = STREAM_LOOP_WORDS if _in_for(where[v][1]) else min(sizes[v], STREAM_WORDS)
    starts = _hoisted(order, sizes, at)
    _issued_ahead(streamed, sizes, starts, where, ends)
    in_place = _scanned_in_place(order, uses, sizes, ends, blocks, threads)
    # A value's registers are free for the results of the op that last uses it (elementwise
    # ops work in place): at a position, frees (negative) come before new values.
    # A streamed load stays in flight while its user's result builds (frees after it).
    events = sorted([(starts.get(v, where[v][0]), sizes[v]) for v in sizes] +
                    [(max(ends.get(v, -1), where[v][0] + 1) + (0.5 if v in streamed else 0),
                      -sizes[v]) for v in sizes] +
                    _reduce_temporaries(order, sizes, ends, blocks, threads, chain.rows) +
                    in_place)
    live = peak = 0.0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    return peak


def _in_for(loops: tuple[Op, ...]) -> bool:
    return any(lp.name == "for" for lp in loops)


def _through_chains(order: list[Op], uses: dict[Value, list[Op]], sizes: dict[Value, float],
                    ends: dict[Value, int]) -> None:
    """A chain of elementwise ops computed element by element reads its inputs until its last
    element: a tile it consumes lives to the chain's end (rms_norm's row beside its weight, to
    the store)."""
    chain_end: dict[Value, int] = {}
    for op in reversed(order):  # users come after their operands: their ends are known
        r = op.results[0] if len(op.results) == 1 else None
        if r is not None and r not in sizes and op.name in ELEMENTWISE + FREE:
            chain_end[r] = max([ends.get(r, -1)] + [chain_end[u.results[0]] for u in
                                                    uses.get(r, []) if u.results and
                                                    u.results[0] in chain_end])
    for op in order:
        if op.results and op.results[0] in chain_end:
            for o in op.operands:
                if o in sizes:
                    ends[o] = max(ends.get(o, -1), chain_end[op.results[0]])


def _issued_ahead(streamed: set[Value], sizes: dict[Value, float], starts: dict[Value, int],
                  where: dict[Value, tuple[int, tuple[Op, ...]]], ends: dict[Value, int]) -> None:
    """Streamed loads issued (together) outside loops beside a tile that lives across them (a
    norm's weight beside its row) are fetched ahead of the math they feed: ISSUE_AHEAD of that
    tile in flight (rms_norm, 1 row at 4 warps: 115 registers for a 64-word row, 2 rows: 214
    for 128, its weight 64 words a thread)."""
    groups: dict[int, list[Value]] = {}
    beside: dict[int, float] = {}  # the largest tile living across each group's issue
    for v in streamed:
        at = starts.get(v, where[v][0])
        live = [sizes[u] for u in sizes if u not in streamed and u.owner is not None and
                u.owner.name not in ("for", "dot") and where[u][0] < at < ends.get(u, -1)]
        if v.owner is not None and v.owner.name == "load" and not _in_for(where[v][1]) and \
                max(live, default=0) > STREAM_WORDS:
            groups.setdefault(at, []).append(v)
            beside[at] = max(live)
    for at, vs in groups.items():
        for v in vs:
            sizes[v] = (ISSUE_AHEAD * beside[at] + STREAM_WORDS) / len(vs)


def _streamed(v: Value, uses: dict[Value, list[Op]], start: int, end: int,
              barriers: list[int]) -> bool:
    """A loaded (or loaded and converted) tile consumed element by element (elementwise ops or
    a reduction, perhaps through a broadcast, with no barrier between its load and its last use):
    ptxas interleaves its loads with its uses."""
    op = v.owner
    return op is not None and (op.name == "load" or op.name == "cast" and
                               op.operands[0].owner is not None and
                               op.operands[0].owner.name == "load") and \
        _consumed_elementwise(v, uses) and not any(start < b < end for b in barriers)


def _consumed_elementwise(v: Value, uses: dict[Value, list[Op]]) -> bool:
    return all(_elementwise(u) or u.name == "reduce" or
               (u.name in FREE and _consumed_elementwise(u.result, uses))
               for u in uses.get(v, []))


def _scanned_in_place(order: list[Op], uses: dict[Value, list[Op]], sizes: dict[Value, float],
                      ends: dict[Value, int], blocks: dict[str, int],
                      threads: int) -> list[tuple[int, float]]:
    """A scan whose rows lie within a warp (no shared memory) of a tile otherwise only reduced
    along the same axis works row by row in the tile's registers: each row's reduction
    partials are taken, then the row is scanned in place. The tile ends at the scan; one row
    of it is held beside (row_cumsum 512x8 at 8 warps, 2 lanes and 4 rows of 4 words a thread:
    40 registers, the sum's FADD chain read off each row before its SHFL.UP; 49 estimated with
    the tile beside its scan). Rows across warps exchange through shared memory, the tile held
    whole (4x512 at 4 warps: 55)."""
    out: list[tuple[int, float]] = []
    for i, op in enumerate(order):
        tile = op.operands[0] if op.name == "cumsum" else None
        t, axis = getattr(tile, "type", None), op.attrs.get("axis")
        if tile not in sizes or not isinstance(t, TileType) or \
                axis not in (-1, len(t.shape) - 1) or _row_layout(t, blocks, threads)[2] > LANES:
            continue
        if all(u is op or u.name == "reduce" and u.attrs.get("axis") == axis
               for u in uses.get(tile, [])):
            row = sizes[tile] / rows_per_thread(tile, axis, blocks, threads)
            ends[tile] = i
            out += [(i, row), (i + 1, -row)]
    return out


def _reduce_temporaries(order: list[Op], sizes: dict[Value, float], ends: dict[Value, int],
                        blocks: dict[str, int], threads: int,
                        mma_rows: dict[Value, float]) -> list[tuple[int, float]]:
    """A reduction of a tile that lives on cannot reduce it in place: its partial results take
    REDUCE_SHARE of the tile's registers while it runs."""
    out: list[tuple[int, float]] = []
    for i, op in enumerate(order):
        if op.name != "reduce":
            continue
        tile = op.operands[0]
        while tile.owner is not None and tile.owner.name == "mask":  # the tile it selects from
            tile = tile.owner.operands[0]
        if tile in sizes and ends.get(tile, -1) > i:
            rows = mma_rows.get(tile) or rows_per_thread(tile, op.attrs.get("axis"), blocks,
                                                         threads)
            extra = min(REDUCE_WORDS, REDUCE_SHARE * sizes[tile] / rows)
            out += [(i, extra), (i + 1, -extra)]
    return out


def _row_layout(t: TileType, blocks: dict[str, int], threads: int) -> tuple[float, float, int]:
    """Triton's blocked layout of a tile along its last axis, as it assigns it: (elements a
    thread holds, of them along one row, lanes sharing a row)."""
    extent = [blocks[d] if isinstance(d, str) else padded(d) for d in t.shape]
    per_thread = max(1.0, math.prod(extent) / threads)
    vec = min(VECTOR_BITS // max(t.dtype.bits, 8), per_thread, extent[-1])
    lanes = int(min(threads, max(1, extent[-1] // vec)))
    return per_thread, extent[-1] / lanes, lanes


def rows_per_thread(v: Value, axis: object, blocks: dict[str, int], threads: int) -> float:
    """How many rows of a reduction over the last axis one thread holds, for a loaded tile
    (Triton's blocked layout; 1 for other axes, and for dots' results in the MMA layout)."""
    t, op = v.type, v.owner
    while op is not None and op.name == "cast":
        op = op.operands[0].owner
    if not isinstance(t, TileType) or not t.shape or axis not in (-1, len(t.shape) - 1) or \
            op is None or op.name != "load":
        return 1.0
    per_thread, per_row, _ = _row_layout(t, blocks, threads)
    return max(1.0, per_thread / per_row)


def shuffle_words(fn: Function, blocks: dict[str, int], threads: int) -> float:
    """Registers of the butterfly stages of the widest arg-reduction or scan across lanes
    (SHUFFLE_STAGE_WORDS a stage, at most SHUFFLE_WORDS)."""
    out = 0.0
    in_loops = {id(o) for lp in walk(fn.body) if lp.name == "for" for o in walk(lp.regions[0])}
    for op in walk(fn.body):
        if not (op.name == "cumsum" or op.name == "reduce" and
                op.attrs.get("kind") in ARG_REDUCTIONS):
            continue
        t = op.operands[0].type
        if isinstance(t, TileType) and t.shape and op.attrs.get("axis") in (-1, len(t.shape) - 1):
            lanes = min(LANES, _row_layout(t, blocks, threads)[2])
            stages = min(SHUFFLE_WORDS, SHUFFLE_STAGE_WORDS * math.log2(lanes))
            if id(op) in in_loops and _extent(t, blocks) <= LANES:  # trips overlap
                stages += (OVERLAP_TRIPS - 1) * (stages + words(op.operands[0], blocks, threads))
            out = max(out, stages)
    return out


def _extent(t: TileType, blocks: dict[str, int]) -> int:
    return math.prod(blocks[d] if isinstance(d, str) else padded(d) for d in t.shape)


def _hoisted(order: list[Op], sizes: dict[Value, float],
             at: dict[int, tuple[int, tuple[Op, ...]]]) -> dict[Value, int]:
    """Where ptxas issues each loaded tile in registers: with the loads before it in its loop
    body (up to the last barrier between them) while they hold under HOIST_WORDS a thread."""
    out: dict[Value, int] = {}
    group: list[int] = []  # positions of the loads issued together
    inflight, scope = 0.0, None
    for i, op in enumerate(order):
        if op.name in BARRIERS or op.regions or at[id(op)][1] != scope:
            group, inflight, scope = [], 0.0, at[id(op)][1]
        if op.name == "load" and op.result in sizes:
            if group and inflight + sizes[op.result] <= HOIST_WORDS:
                out[op.result] = group[0]
            else:
                group, inflight = [i], 0.0
            inflight += sizes[op.result]
            group.append(i)
    return out


def async_addresses(fn: Function, blocks: dict[str, int], threads: int, tma: bool,
                    stages: int) -> float:
    """Registers a thread keeps for the addresses of pointer loads the pipeline copies to
    shared memory (ASYNC_ADDRESS per 16-byte vector in each loop of the generated code that
    addresses it through pointers; none for a load a descriptor takes)."""
    if stages < 2:
        return 0.0
    total = 0.0
    for op, copies in pointer_copies(fn, blocks, tma).items():
        t = op.result.type
        assert isinstance(t, TileType)
        n = math.prod(blocks[d] if isinstance(d, str) else padded(d) for d in t.shape)
        total += ASYNC_ADDRESS * copies * max(1.0, n * t.dtype.bits / 128 / threads)
    return total


def pointer_copies(fn: Function, blocks: dict[str, int], tma: bool) -> dict[Op, int]:
    """The loads in loops that only feed dots, each with how many loops of the generated code
    address it through pointers: a loop the emitter splits at the diagonal (split.py) is two,
    the first of whole tiles; a descriptor takes a load (`tma`) in a loop whose tiles no
    runtime start or stop cuts (loops.py `cuts`: window attention's keys from `tq.begin -
    WINDOW + 1`, or the diagonal loop at key tiles longer than the query tile's). Window
    attention at 128x64, 8 warps, TMA: its keys and values by LDGSTS (cp.async with masks), 142
    registers, 109 estimated when they were counted as descriptors; at 1 stage such a load
    passes through registers (peak_words `loaded`: 64x64 at 8 warps, 108 compiled)."""
    ops = list(walk(fn.body))
    uses = uses_of(ops)
    ranges = {a for op in ops for region in op.regions for a in region.args}
    out: dict[Op, int] = {}
    for loop in (op for op in ops if op.name == "for"):
        body = loop.regions[0]
        cut = runtime_cut(loop, blocks)
        split = bool(body.args) and bool(prefix_true(body, body.args[0], ranges))
        for op in walk(body):
            if op.name != "load" or not feeds_dots_only(op.result, uses):
                continue
            descriptor = tma and takes_descriptor(op, blocks)
            out[op] = (1 if split and not descriptor else 0) + (0 if descriptor and not cut
                                                                 else 1)
    return out


def runtime_cut(loop: Op, blocks: dict[str, int]) -> bool:
    """Whether a loop's tiles may be cut at its runtime stop or start (as loops.py decides:
    one the block does not divide), so that its loads are masked."""
    stop, first, rt = loop_stop(loop), loop_start(loop), loop.regions[0].args[0].type
    if stop is None or not isinstance(rt, RangeType):
        return False
    block_of = lambda d: d if isinstance(d, int) else blocks[d]  # noqa: E731
    block = block_of(rt.block)
    bound = interval(stop)
    clamped = bound is None or bound[1] > rt.extent
    return divisor(stop, block_of) % block != 0 or (clamped and rt.extent % block != 0) or \
        (first is not None and divisor(first, block_of) % block != 0)


def takes_descriptor(op: Op, blocks: dict[str, int]) -> bool:
    """Whether `tma=True` gives this load a tensor descriptor (as emit.py `descriptor` decides,
    strides aside): no mask, 2 to 5 dimensions, a box of at most TMA_BOX in each."""
    tensor, t = op.operands[0].type, op.result.type
    if op.attrs.get("mask") or not isinstance(t, TileType) or \
            not 2 <= len(getattr(tensor, "shape", ())) <= 5:
        return False
    return all((blocks[d] if isinstance(d, str) else padded(d)) <= TMA_BOX for d in t.shape)


def sync_fragments(fn: Function, blocks: dict[str, int], warps: int) -> float:
    """Under 4 warps, words a thread holds of the operands of the dots in loops (mma.sync reads
    them from registers): GEMM 64x32x64 at 2 warps, 100 registers; 32x64x32, 72 (TMA both)."""
    if warps >= 4:
        return 0.0
    return sum(words(o, blocks, 32 * warps) for loop in walk(fn.body) if loop.name == "for"
               for op in walk(loop.regions[0]) if op.name == "dot" for o in op.operands[:2])


def held_fragments(fn: Function, blocks: dict[str, int], warps: int, tma: bool = True,
                   stages: int = 3) -> float:
    """Words a thread holds of the A operands that mma.sync dots (fewer than WGMMA_ROWS rows,
    or under 4 warps) take from registers across their loop: each warp holds all of one. Not
    where the loop's other operands come by cp.async (pointer loads, `stages` > 1): there
    Triton reads the A operand from shared memory again each trip (ttg.local_load of q inside
    the loop: window attention 16x16 at 8 warps, 48 registers, 60 estimated with q held;
    causal attention at 16x16 without TMA 57, 32x32 at 4 warps 90)."""
    copies = pointer_copies(fn, blocks, tma) if stages > 1 else {}
    total = 0.0
    for loop in walk(fn.body):
        if loop.name != "for":
            continue
        inside = {id(o) for o in walk(loop.regions[0])}
        if any(copies.get(o) for o in walk(loop.regions[0])):
            continue
        for op in walk(loop.regions[0]):
            a = op.operands[0] if op.name == "dot" else None
            if a is None or (a.owner is not None and id(a.owner) in inside):
                continue
            rows = op.result.type.shape[-2]  # type: ignore[union-attr]
            if warps < 4 or (blocks.get(rows, rows) if isinstance(rows, str) else rows) < WGMMA_ROWS:
                total += words(a, blocks, 32)
    return total


def registers(fn: Function, blocks: dict[str, int], warps: int, tma: bool = False,
              stages: int = 3) -> int:
    """Registers per thread, before the 255 the hardware allows (more means spills): the most
    of any one grid's kernel, each with its own tiles and terms."""
    grids = [op for op in fn.body.ops if op.regions]
    if len(grids) > 1:
        return max(registers(one_grid(fn, g), blocks, warps, tma, stages) for g in grids)
    threads = 32 * warps
    loops = [{o.name for o in walk(op.regions[0])} for op in walk(fn.body) if op.name == "for"]
    mma = any("dot" in n for n in loops)
    base = BASE + POINTER * tensors_accessed(fn) + (
        MMA_BASE + sync_fragments(fn, blocks, warps) if mma else
        LOOP_BASE if any("load" in names for names in loops) else 0)
    loaded = frozenset(op for op, n in pointer_copies(fn, blocks, tma).items()
                       if n and stages < 2)
    chain = chained(fn, blocks, warps)
    tiles = peak_words(fn, blocks, tma or stages > 1, threads, loaded, chain) + \
        chain.operand_words
    needed = tiles + async_addresses(fn, blocks, threads, tma, stages) + base + \
        shuffle_words(fn, blocks, threads) + \
        (held_fragments(fn, blocks, warps, tma, stages) if mma else 0)
    return max(FLOOR, math.ceil(needed))


@dataclass
class Chained:
    """The tiles computed from a dot whose result feeds another dot (attention's scores, up to
    the probabilities its second dot takes), in that dot's MMA layout: Triton lays its warps
    all along the rows for the reductions (warpsPerCTA [warps, 1], 16 rows a warp)."""

    threads: dict[Value, int]  # the threads holding each tile (fewer where it repeats)
    rows: dict[Value, float]  # the rows of each tile a thread holds (2 per 16-row slab)
    operand_words: float  # words of the second dot's operand held beside the scores


def chained(fn: Function, blocks: dict[str, int], warps: int) -> Chained:
    """A wgmma tile of fewer than 16 * warps rows is repeated in each warpgroup (attention at
    64x256, 8 warps: #mma warpsPerCTA [8, 1], two HGMMA.64x128 a warpgroup, the 64x256 scores
    128 registers a thread where 256 threads would hold 64: 254 compiled); there the second
    dot's layout differs ([4, 2]) and its operand goes through shared memory. Where the layouts
    agree (16 * warps rows or more), the operand converts in registers and ptxas holds it
    beside the scores it is computed from (128x64 at 8 warps: 124 registers with TMA, 142 with
    the window's pointer loads, 16 words of probabilities a thread)."""
    ops = list(walk(fn.body))
    uses = uses_of(ops)
    out = Chained({}, {}, 0.0)
    for op in ops:
        rows = op.result.type.shape[-2] if op.name == "dot" else None  # type: ignore[union-attr]
        rows = blocks.get(rows, rows) if isinstance(rows, str) else rows
        if rows is None or warps < 4 or rows < WGMMA_ROWS:
            continue
        chain, todo, fed = set(), [op.result], []
        while todo:  # the tiles of its shape between this dot and the dots it feeds
            v = todo.pop()
            if v in chain:
                continue
            chain.add(v)
            fed += [u for u in uses.get(v, []) if u.name == "dot" and u.operands[0] is v]
            todo += [u.result for u in uses.get(v, []) if u.name != "dot" and
                     len(u.results) == 1 and isinstance(u.result.type, TileType) and
                     u.result.type.shape == op.result.type.shape]  # type: ignore[union-attr]
        if not fed:
            continue
        repeated = 16 * warps > rows
        out.threads.update({v: 32 * rows // 16 if repeated else 32 * warps for v in chain})
        out.rows.update({v: 2.0 * max(1, rows // (16 * warps)) for v in chain})
        if not repeated:
            out.operand_words = max([out.operand_words] +
                                    [words(d.operands[0], blocks, 32 * warps) for d in fed])
    return out


def one_grid(fn: Function, grid: Op) -> Function:
    """`fn` with `grid` its only grid: a kernel of several grids compiles to one kernel each,
    each with its own loops (center_columns 2x1024x32x128 at 8 warps: its second grid, no loop,
    30 registers; 36 estimated with the first grid's loop term beside the second's tiles)."""
    ops = [op for op in fn.body.ops if not op.regions or op is grid]
    return Function(fn.name, fn.args, Block(fn.body.args, ops), fn.symbols, fn.file)


def tensors_accessed(fn: Function) -> int:
    """The most distinct tensors one grid of `fn` loads or stores (each keeps a base address)."""
    grids = [op for op in fn.body.ops if op.regions] or [None]
    return max(len({o.operands[0] for o in (walk(g.regions[0]) if g else walk(fn.body))
                    if o.name in ("load", "store") and o.operands}) for g in grids)


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
    if _elementwise(op) and all(_elementwise(u) or u.name == "reduce" for u in uses.get(v, [])) \
            and not any(start < b < end for b in barriers):
        return False  # inside a chain of elementwise ops (or into a reduction): element-wise
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
