"""The mapper: lowered tile IR + config + architecture -> a dataflow config (JSON-ready dict).

It follows the recipe real spatial compilers share (MLIR-AIE, TT-Metalium, Cerebras):
- the grid's programs are placed on PEs (the `fold` knob);
- every PE runs reader DMA agents for its operand streams, a compute agent and a writer DMA
  (TT-Metalium's reader/compute/writer kernels), joined by buffers of `buffer_depth` slots
  guarded by empty/full counting semaphores (AIE ObjectFifos), so transfers overlap compute;
  streams beyond the PE's DMA channels share readers, time-multiplexed (`channels.py`);
- operands that programs in one PE row (column) share are multicast along it by one DMA
  (GEMM's A along rows, B along columns);
- loop-carried values (accumulators) stay resident in SRAM, and stores drain through the writer.
Ragged edges are exact: each transfer moves only the in-range part of its tile, and a
`td.tile(stop, start=s)` loop runs each program's own iterations, its first tile cut at the start
and its last at the stop (`trips.py`). A stop read from the data (a jagged row's length) is
evaluated from the arguments: in dataflow timing a PE's readers wait for the compute agent to
have it (a `trip` semaphore) before copying the loop's tiles; in static timing every program
runs to the loop's bound, the iterations past its own predicated (`"predicated": true`).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from lowering.backends.spatial.arch import Arch
from lowering.backends.spatial.channels import assign, first_of_streams, stream_key
from lowering.backends.spatial.data_values import DataValues
from lowering.backends.spatial.folding import fold_loop
from lowering.backends.spatial.trips import Stops
from tiledsl.runtime.config import Config
from tiledsl.errors import BackendError, ConfigError
from tiledsl.ir.core import Block, Function, Op, Value, loop_ranges, walk
from tiledsl.ir.gathers import access_parts, is_index_tile, op_layout
from tiledsl.ir.ops import ALLOCATIONS, FLOAT_UNARY, RANDOM, VIEW, has_trait
from tiledsl.ir.views import offset_of, root, strides_of, view_chain
from tiledsl.ir.printer import ir_hash
from tiledsl.ir.slices import Slice, slices_of
from tiledsl.ir.types import Dim, RangeType, TensorType, TileType
from tiledsl.lang.shifted import is_shifted, static_shift

SCHEMA_VERSION = 1

TRANSCENDENTAL_COST = 4  # vector cycles per element of exp/log/erf/... relative to an add
PHILOX_COST = 100  # of td.rand and family: Philox's 10 rounds of 10 integer ops (assumed)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def shared_axis(load: Op, ranges: list[Value]) -> int | None:
    """The axis of a 2-D grid with `ranges` that `load` does not depend on (so the programs
    along it read the same tile, which multicast delivers once), if exactly one."""
    uses = set()
    for idx in load.operands[1:]:
        if idx in ranges:
            uses.add(ranges.index(idx))
        elif idx.owner is not None and idx.owner.operands and idx.owner.operands[0] in ranges:
            uses.add(ranges.index(idx.owner.operands[0]))
        elif not (idx.owner is not None and idx.owner.name == "const") and \
                not isinstance(idx.type, RangeType):
            return None  # a runtime index: do not share
    free = {0, 1} - uses
    return free.pop() if len(free) == 1 else None


def grids(fn: Function) -> list[Op]:
    """The kernel's top-level grids, in program order: each is one phase of the mapping."""
    return [op for op in fn.body.ops if op.name == "grid"]


def can_multicast(fn: Function) -> bool:
    """Whether any load of a 2-D grid is shared along a grid axis: otherwise the multicast
    knob changes nothing, and the config space does not offer it."""
    for grid in grids(fn):
        ranges = list(grid.regions[0].args)
        if len(ranges) == 2 and any(shared_axis(op, ranges) is not None
                                    for op in walk(grid.regions[0]) if op.name == "load"):
            return True
    return False


@dataclass
class Segment:
    """Straight-line work of a program: loads, then compute, then stores."""

    loads: list[Op] = field(default_factory=list)
    compute: list[Op] = field(default_factory=list)
    stores: list[Op] = field(default_factory=list)


@dataclass
class Loop:
    range: Value
    body: list[Segment | Loop]
    strided: Op | None = None  # a persistent loop, td.tile(m, n)[p::P] (`Mapping.tile_positions`)


@dataclass
class Branch:
    """A runtime `if`: each program takes one side, known from its condition (`_program`)."""

    op: Op
    then: list[Segment | Loop | Branch]
    other: list[Segment | Loop | Branch]

    @property
    def body(self) -> list[Segment | Loop | Branch]:
        """Both sides, for walks over every load and store."""
        return self.then + self.other


Step = Segment | Loop | Branch


def _dram_layout(v: Value) -> tuple[int, tuple[int, ...]]:
    """The offset of tensor `v`'s first element in its root and its strides, in DRAM, where
    every root tensor is contiguous."""
    t = root(v).type
    assert isinstance(t, TensorType)
    contiguous = tuple(math.prod(t.shape[i + 1:]) for i in range(len(t.shape)))
    if any(op.name == "tensor.bitcast" for op in view_chain(v)):
        raise BackendError(f"'{root(v).hint}' read as another dtype (x.view(dtype)): the "
                           "spatial backend moves typed tiles, not bits",
                           loc=v.owner.loc if v.owner is not None else None,
                           hint="pass the array as that dtype (np.ndarray.view(dtype))")
    if any(op.name == "tensor.memory" for op in view_chain(v)):
        raise BackendError(f"pointer arithmetic on '{root(v).hint}', which the caller laid out "
                           "other than row-major: the spatial backend lays it out contiguously "
                           "in DRAM, so the strides the kernel read from it address nothing "
                           "there", loc=v.owner.loc if v.owner is not None else None,
                           hint="pass it contiguous (np.ascontiguousarray), or index it with "
                                "tiles (x[tm, tn]), which every backend lays out for itself")
    out = strides_of(v, contiguous)
    if out is None:  # a view that holds for the argument's own layout (a transposed array)
        shape = v.type.shape  # type: ignore[union-attr]
        raise BackendError(f"the spatial backend lays out '{root(v).hint}' contiguously in "
                           f"DRAM, where this view of it, of shape {shape}, would need a copy", loc=v.owner.loc if v.owner is not None else None,
                           hint="view the argument as its logical (contiguous) layout allows, "
                                "or pass it contiguous (np.ascontiguousarray) with the view "
                                "that layout needs")
    return offset_of(v, contiguous), out


def _free(op: Op) -> bool:
    """Ops that cost a PE no compute: constants, tile bounds, and views that keep the order of
    the elements in SRAM (a transpose moves them, and is priced as a copy)."""
    return op.name in ("const", "tile.index", "tile.begin", "tile.size") or (
        has_trait(op.name, VIEW) and op.name != "transpose")


def _passes(op: Op, block: Callable[[Dim], int]) -> int:
    """Vector passes over its result an op takes: a scan's or fold's combine ops at every step
    of a lane-by-lane scan, a sort's compare-exchange stages (a bitonic network), else one."""
    if op.name in ("scan", "fold"):
        return max(1, len(op.regions[0].ops) - 1)
    if op.name == "sort":
        t = op.operands[0].type
        assert isinstance(t, TileType)
        log = max(1, (block(t.shape[op.attrs["axis"]]) - 1).bit_length())
        return log * (log + 1) // 2
    return 1


def _structure(block: Block, used: set[Value] | None = None) -> list[Step]:
    """The grid body as segments and loops, in program order."""
    if used is None:  # the values some op of the grid uses
        used = {o for op in walk(block) for o in op.operands}
    steps: list[Step] = []
    current = Segment()
    for op in block.ops:
        if op.name == "for":
            if current.loads or current.compute or current.stores:
                steps.append(current)
                current = Segment()
            steps.append(Loop(op.regions[0].args[0], _structure(op.regions[0], used),
                              op if op.attrs.get("stride") else None))
        elif op.name == "if":  # each program's side is known from its condition (trips.py)
            if current.loads or current.compute or current.stores:
                steps.append(current)
                current = Segment()
            steps.append(Branch(op, _structure(op.regions[0], used),
                                _structure(op.regions[1], used)))
        elif op.name == "load":
            current.loads.append(op)
        elif op.name == "store":
            current.stores.append(op)
        elif op.name == "atomic":  # a store that the DRAM channel applies (`rmw`)
            _unused_old_values(op, used)
            current.stores.append(op)
        elif op.name != "yield":
            current.compute.append(op)
    if current.loads or current.compute or current.stores:
        steps.append(current)
    return steps


def _unused_old_values(op: Op, used: set[Value]) -> None:
    """An atomic is a read-modify-write at the DRAM channel that owns its elements: the writer
    ships the tile there, the channel reads, combines and writes. The old values stay there:
    a kernel that uses them is refused, at the atomic's line."""
    if op.result in used:
        raise BackendError(
            f"backend 'spatial' cannot map 'atomic_{op.attrs['kind']}' whose old values the "
            "kernel uses: the DRAM channel applies an atomic where the elements live, and its "
            "old values do not come back to the PE", loc=op.loc,
            hint="run it on the numpy or triton backend, or leave the returned values unused "
                 "(a reduction: split-K, a histogram)")


@functools.lru_cache(maxsize=65536)
def xy_hops(src: tuple[int, int], dst: tuple[int, int]) -> tuple[tuple[int, int, str], ...]:
    """Dimension-ordered routing: along the row (x) first, then along the column (y). Each hop
    is the link (row, col, direction) it leaves by."""
    (r, c), out = src, []
    while c != dst[1]:
        step = 1 if dst[1] > c else -1
        out.append((r, c, "E" if step > 0 else "W"))
        c += step
    while r != dst[0]:
        step = 1 if dst[0] > r else -1
        out.append((r, c, "S" if step > 0 else "N"))
        r += step
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _nearest(attach: tuple[tuple[int, int], ...], pe: tuple[int, int]) -> int:
    """The DRAM channel (by its attachment PE) nearest `pe`; ties: the lowest-numbered."""
    return min(range(len(attach)),
               key=lambda i: (abs(attach[i][0] - pe[0]) + abs(attach[i][1] - pe[1]), i))


class Mapping:
    """Builds the dataflow config of one phase (the top-level grid number `phase`) of a
    (kernel, config, arch); the phases of a kernel with several grids run one after another."""

    def __init__(self, fn: Function, config: Config, arch: Arch, phase: int = 0,
                 scalars: dict[Value, Any] | None = None, args: list[Any] | None = None,
                 unpriced: bool = False) -> None:
        self.fn = fn
        self.config = config
        self.arch = arch
        self.phase = phase
        self.blocks = fn.block_values(config.block_sizes)
        self.grid = grids(fn)[phase]
        self.ranges = self.grid.regions[0].args
        # per-program iterations of td.tile(stop, start=s) loops (`scalars`: argument values;
        # `args`: all of them, for bounds read from the data; `unpriced`: neither, for an
        # estimate, which guesses the bounds that read them: `trips.py`)
        self.stops = Stops(fn, self.grid, self.blocks, scalars,
                           DataValues(fn, self.grid, phase, config, args),
                           static=arch.timing == "static", unpriced=unpriced)
        self.counts = [_cdiv(self.rt(r).extent, self.block(self.rt(r).block)) for r in self.ranges]
        self.depth = int(config.get("buffer_depth", 2))
        self.steps = _structure(self.grid.regions[0])
        self.links: dict[tuple[int, int, str], int] = {}
        self.routes: list[dict[str, Any]] = []
        self.route_ids: dict[tuple, str] = {}
        self.link_routes: dict[int, set[str]] = {}
        self._op_lists: dict[str, list[Op]] = {}
        self._op_indices: dict[Op, int] = {}
        self._channels: dict[Op, int] = {}
        self._attach = tuple(d.attach for d in arch.dram)
        self.place()

    # ---- basic facts ----------------------------------------------------------------------
    @staticmethod
    def rt(r: Value) -> RangeType:
        t = r.type
        assert isinstance(t, RangeType)
        return t

    def block(self, d: int | str) -> int:
        return d if isinstance(d, int) else self.blocks[d]

    def numel(self, t: TileType) -> int:
        return math.prod(self.block(d) for d in t.shape)

    # ---- placement ------------------------------------------------------------------------
    def pe_indices(self) -> np.ndarray:
        """The PE (row * cols + col) of every program, programs in row-major grid order:
        `fold=rows` (2-D grids) puts program (i, j) on PE (i mod rows, j mod cols), `linear`
        deals programs round robin."""
        arch = self.arch
        i = np.arange(math.prod(self.counts))
        if self.config.get("fold", "rows") == "rows" and len(self.counts) == 2:
            return (i // self.counts[1] % arch.rows) * arch.cols + i % self.counts[1] % arch.cols
        return i % arch.pes

    @functools.cached_property
    def on_pe(self) -> dict[tuple[int, int], list[tuple[int, ...]]]:
        """The programs each occupied PE runs, in grid order."""
        out: dict[tuple[int, int], list[tuple[int, ...]]] = {}
        programs = itertools.product(*(range(c) for c in self.counts))
        for g, q in zip(programs, self.pe_indices().tolist()):
            out.setdefault(divmod(q, self.arch.cols), []).append(g)
        return out

    def place(self) -> None:
        """What the fold decides besides where each program runs (`on_pe`, listed on first
        use): whether whole PE rows and columns share operands, so multicast can act."""
        arch = self.arch
        fold = self.config.get("fold", "rows")
        even = len(self.counts) == 2 and fold == "rows" and \
            self.counts[0] % arch.rows == 0 and self.counts[1] % arch.cols == 0
        self.multicast_possible = arch.multicast and even  # whatever the knob says
        self.multicast = bool(self.config.get("multicast", True)) and self.multicast_possible

    def shared_axis(self, load: Op) -> int | None:
        """The grid axis a load does not depend on (so PEs along it share the tile), if any."""
        return shared_axis(load, list(self.ranges)) if self.multicast else None

    def line_axis(self, load: Op) -> int | None:
        """The grid axis of a multicast load in `td.tile(stop)` loops whose trip counts vary
        along it (None for other loads): the PEs of the line sharing the load run different
        iterations, so its copies go to those that run each one (`_line_copies`)."""
        axis = self.shared_axis(load)
        return axis if axis in self.stops.varying.get(load, ()) else None

    def line_programs(self, pe: tuple[int, int], g: tuple[int, ...], axis: int
                      ) -> list[tuple[tuple[int, int], tuple[int, ...]]]:
        """Each PE of the line `pe` heads along grid axis `axis`, with the program it runs
        while `pe` runs `g` (multicast needs whole lines: program (i, j) runs on PE
        (i mod rows, j mod cols), so line PE d runs g shifted by d along the axis)."""
        return [(d, tuple(x + d[axis] if a == axis else x for a, x in enumerate(g)))
                for d in self._line(pe, axis)]

    # ---- NoC ------------------------------------------------------------------------------
    def link(self, r: int, c: int, d: str) -> int:
        key = (r, c, d)
        if key not in self.links:
            self.links[key] = len(self.links)
        return self.links[key]

    def xy_path(self, src: tuple[int, int], dst: tuple[int, int]) -> list[int]:
        """The ids of the links from `src` to `dst` (`xy_hops`)."""
        return [self.link(*hop) for hop in xy_hops(src, dst)]

    def dram_for(self, pe: tuple[int, int]) -> int:
        """The DRAM channel nearest a PE (ties: the lowest-numbered)."""
        return _nearest(self._attach, pe)

    def route(self, dram: int, dsts: list[tuple[int, int]], stream: str,
              to_dram: bool = False) -> dict[str, Any]:
        """The route from DRAM channel `dram` to PEs `dsts` (a multicast tree when several), or
        with `to_dram` from the single PE in `dsts` back to the channel. Routes of one `stream`
        (one operand from one source) share a packet-switched channel on the links they use."""
        key = (dram, tuple(dsts), to_dram, stream)
        if key in self.route_ids:
            return self.routes[int(self.route_ids[key][1:])]
        attach = self.arch.dram[dram].attach
        links: list[int] = []
        for d in dsts:  # a multicast tree: the union of the XY paths
            path = self.xy_path(d, attach) if to_dram else self.xy_path(attach, d)
            links += [link for link in path if link not in links]
        hops = max((len(self.xy_path(attach, d)) for d in dsts), default=0)
        rid = f"r{len(self.routes)}"
        end = {"dram": self.arch.dram[dram].name}
        route = {"id": rid, "src": {"pe": list(dsts[0])} if to_dram else end,
                 "dst": [end] if to_dram else [{"pe": list(d)} for d in dsts],
                 "links": links, "hops": hops,
                 "kind": "multicast" if len(dsts) > 1 else "unicast"}
        key_stream = f"{end['dram']}:{stream}"
        for link in links:
            self.link_routes.setdefault(link, set()).add(key_stream)
        route["stream"] = key_stream
        route["channel"] = sorted(set().union(*(self.link_routes[x] for x in links))).index(
            key_stream) if links else 0
        self.routes.append(route)
        self.route_ids[key] = rid
        return route

    # ---- tiles ----------------------------------------------------------------------------
    def access(self, op: Op, g: tuple[int, ...], iters: dict[Value, int],
               cover: dict[Value, tuple[int, int]] | None = None
               ) -> tuple[int, list[int], list[int], int]:
        """(offset, sizes, strides, bytes) of the in-range part of a load/store's tile; `cover`
        gives loops' (lower, limit) in place of program `g`'s (a tile several programs share)."""
        tensor = op.operands[0].type
        assert isinstance(tensor, TensorType)
        full = op.attrs.get("full", ())
        offset, strides = _dram_layout(op.operands[0])
        idx_vals = iter(op.operands[1:] if op.name == "load" else op.operands[1:-1])
        sizes: list[int] = []
        out_strides: list[int] = []
        count: int | None = None  # a gather's elements, counted at its first index tile
        sliced = slices_of(op.attrs)
        for d, extent in enumerate(tensor.shape):
            if d in full:
                part = sliced.get(d, Slice(0, extent, 1))
                sizes.append(part.size)
                out_strides.append(strides[d] * part.step)
                offset += part.start * strides[d]
                continue
            idx = next(idx_vals)
            if is_shifted(idx):  # the shifted tile's lanes inside the dimension
                r = idx.owner.operands[0]  # type: ignore[union-attr]
                pos = g[self.ranges.index(r)] if r in self.ranges else iters[r]
                begin, size = self.stops.lanes(r, g, pos, (cover or {}).get(r))
                begin += static_shift(idx) or 0  # a runtime shift: known when it runs
                lo, hi = max(begin, 0), min(begin + size, extent)
                begin = lo
                sizes.append(max(hi - lo, 0))
                out_strides.append(strides[d])
            elif isinstance(idx.type, RangeType):
                pos = g[self.ranges.index(idx)] if idx in self.ranges else iters[idx]
                # the tile starts at a td.tile(stop, start=s)'s start, ends at the extent or stop
                begin, size = self.stops.lanes(idx, g, pos, (cover or {}).get(idx))
                sizes.append(size)
                out_strides.append(strides[d])
            elif is_index_tile(idx.type):  # a gather: as many rows, at run-time addresses
                count = self._gathered(op, g, iters) if count is None else 1
                sizes.append(count)
                out_strides.append(strides[d])
                continue
            else:  # a scalar index: a td.grid position or a constant
                owner = idx.owner
                if owner is not None and owner.name == "tile.begin":
                    r = owner.operands[0]
                    pos = g[self.ranges.index(r)] if r in self.ranges else iters.get(r, 0)
                    begin = pos * self.block(self.rt(r).block)
                elif owner is not None and owner.name == "const":
                    begin = int(owner.attrs["value"])
                else:
                    begin = 0  # a runtime scalar: address unknown until run time
            offset += begin * strides[d]
        return offset, sizes, out_strides, math.prod(sizes) * tensor.dtype.bits // 8

    def _gathered(self, op: Op, g: tuple[int, ...], iters: dict[Value, int]) -> int:
        """How many elements a gather's index tiles select (their broadcast shape's in-range
        lanes). Like a runtime scalar index, the copy is priced by its bytes; where it reads
        is known only when it runs."""
        lay = op_layout(op)
        full = op.attrs.get("full", ())
        dims = [d for d in range(len(lay.axes)) if d not in full]
        axes = {a for d, idx in zip(dims, access_parts(op)[0]) if is_index_tile(idx.type)
                for a in lay.axes[d]}
        return math.prod(self.valid(lay.shape[a], g, iters) for a in sorted(axes))

    def compute_cost(self, ops: list[Op], g: tuple[int, ...], iters: dict[Value, int]) -> tuple[float, int]:
        """(cycles, useful MACs) of a segment's compute on one PE."""
        arch = self.arch
        cycles, macs = 0.0, 0
        dots = {op.result for op in ops if op.name == "dot"}
        for op in ops:
            if op.name == "add" and any(o in dots for o in op.operands):
                continue  # acc + a @ b: the matrix unit accumulates in place
            if op.name == "dot":
                a, b = (o.type for o in op.operands)
                assert isinstance(a, TileType) and isinstance(b, TileType)
                m, k = (self.block(d) for d in a.shape[-2:])
                n = self.block(b.shape[-1])
                batch = self.block(a.shape[0]) if a.rank == 3 else 1  # one product each
                mm, mn, mk = arch.min_mma
                padded = (_cdiv(m, mm) * mm) * (_cdiv(n, mn) * mn) * (_cdiv(k, mk) * mk)
                step = padded / arch.mac_rate(a.dtype.short)  # at the dtype's math fidelity
                if arch.feed_bytes_per_cycle:  # or as long as its operands take to feed
                    feed = arch.feed_bytes(m, n, k, a.dtype.bits / 8, b.dtype.bits / 8)
                    step = max(step, feed / arch.feed_bytes_per_cycle)
                cycles += batch * step
                macs += math.prod(self.valid(d, g, iters) for d in a.shape) * \
                    self.valid(b.shape[-1], g, iters)
            elif op.results and isinstance(op.results[0].type, TileType) and not _free(op):
                per = PHILOX_COST if has_trait(op.name, RANDOM) else \
                    TRANSCENDENTAL_COST if op.name in FLOAT_UNARY else _passes(op, self.block)
                src = op.operands[0].type if op.name == "reduce" else op.results[0].type
                assert isinstance(src, TileType)
                cycles += per * _cdiv(self.numel(src), arch.vector_lanes)
        if ops:
            cycles += arch.op_overhead_cycles
        return cycles, macs

    def valid(self, d: int | str, g: tuple[int, ...], iters: dict[Value, int]) -> int:
        """The in-range length of a tile dimension for program g at these loop positions."""
        if isinstance(d, int):
            return d
        for r in list(self.ranges) + list(iters):
            t = self.rt(r)
            if t.block == d:
                pos = g[self.ranges.index(r)] if r in self.ranges else iters[r]
                return self.stops.lanes(r, g, pos)[1]
        return self.blocks[d]

    # ---- resources ------------------------------------------------------------------------
    def sram_bytes(self) -> int:
        """SRAM one PE needs: every operand/output buffer times its depth, plus accumulators."""
        total = self._carried_bytes()
        for op in self._ops("load") + self._ops("store"):
            t = op.results[0].type if op.results else op.operands[-1].type
            assert isinstance(t, TileType)
            total += self.numel(t) * t.dtype.bits // 8 * self.depth
        return total

    def check(self) -> str | None:
        """Why this mapping cannot run on the architecture (None if it can): SRAM per PE, DMA
        channels per PE. (Routes beyond a link's channels share them: `_share_channels`.)"""
        arch = self.arch
        need = self.sram_bytes()
        if need > arch.sram_bytes:
            return (f"each PE needs {need} bytes of SRAM ({self.depth} slots per buffer), "
                    f"{arch.name} has {arch.sram_bytes}")
        return self._dma_shortfall()

    def _share_channels(self) -> None:
        """Where a link carries more streams than it has channels (`channels_per_link`), the
        streams share them: each route's channel wraps round the link's channels, and a route
        over such a link is marked `shared`, so each of its transfers pays
        `arch.link_share_cycles` (its packets interleave with another stream's on a virtual
        channel, as a DMA shared by streams pays `dma_switch_cycles`)."""
        n = self.arch.channels_per_link
        crowded = {link for link, streams in self.link_routes.items() if len(streams) > n}
        for route in self.routes:
            route["channel"] %= n
            if crowded.intersection(route["links"]):
                route["shared"] = True

    def destinations(self, pe: tuple[int, int], axis: int | None) -> list[tuple[int, int]]:
        """Where the loads `pe`'s reader issues go: to `pe` itself for a load no PEs share
        (`axis` None); to its whole row or column when `pe` heads the line sharing the load
        along grid axis `axis`; nowhere when another PE's multicast feeds it."""
        if axis is None:
            return [pe]
        return self._line(pe, axis) if pe[axis] == 0 else []

    def _line(self, pe: tuple[int, int], axis: int) -> list[tuple[int, int]]:
        """The PEs sharing a tile that does not depend on grid axis `axis`: a row or a column."""
        if axis == 1:
            return [(pe[0], c) for c in range(self.arch.cols)]
        return [(r, pe[1]) for r in range(self.arch.rows)]

    # ---- agents ---------------------------------------------------------------------------
    def build(self) -> dict[str, Any]:
        why = self.check()
        if why is not None:
            raise ConfigError(f"config {self.config} does not fit {self.arch.name}: {why}",
                              kernel=self.fn.name)
        arch = self.arch
        buffers: list[dict[str, Any]] = []
        semaphores: list[dict[str, Any]] = []
        agents: list[dict[str, Any]] = []
        loads = [op for op in self._ops("load")]
        stores = [op for op in self._ops("store")]
        carried = self._carried_bytes()
        for pe, programs in sorted(self.on_pe.items()):
            tag = f"{pe[0]}_{pe[1]}"
            addr = 0
            for op in loads + stores:
                name = f"{'ld' if op.name == 'load' else 'st'}{self._op_index(op)}_{tag}"
                t = op.results[0].type if op.results else op.operands[-1].type
                assert isinstance(t, TileType)
                size = self.numel(t) * t.dtype.bits // 8
                buffers.append({"id": name, "pe": list(pe), "bytes": size, "depth": self.depth,
                                "addr": addr, "role": "operand" if op.name == "load" else "output"})
                addr += size * self.depth
                semaphores.append({"id": f"{name}.empty", "pe": list(pe), "init": self.depth,
                                   "max": self.depth})
                semaphores.append({"id": f"{name}.full", "pe": list(pe), "init": 0,
                                   "max": self.depth})
            if self.waits_for_data:  # the compute agent tells each reader a bound is known
                semaphores += [{"id": f"trip{i}_{tag}", "pe": list(pe), "init": 0,
                                "max": len(programs)} for i in range(self.readers)]
            if carried:
                buffers.append({"id": f"acc_{tag}", "pe": list(pe), "bytes": carried, "depth": 1,
                                "addr": addr, "role": "accumulator"})
                addr += carried
            readers: dict[int, list] = {r: [] for r in range(self.readers)}
            last: dict[int, int] = {}  # reader -> the stream of its last copy
            compute: list = []
            writer: list = []
            lines = [(op, self.line_axis(op)) for op in loads]
            lines = [(op, a) for op, a in lines if a is not None and self.destinations(pe, a)]
            for g in programs:
                self._program(pe, g, self.steps, {}, readers, compute, writer, last)
                for op, axis in lines:
                    self._line_copies(op, pe, self.steps, {}, self.line_programs(pe, g, axis),
                                      readers[self.reader(op)])
            agents.append({"id": f"compute_{tag}", "kind": "compute", "pe": list(pe),
                           "programs": [list(g) for g in programs], "program": compute})
            for i, program in readers.items():
                agents.append({"id": f"reader{i}_{tag}", "kind": "dma", "pe": list(pe),
                               "program": program})
            agents.append({"id": f"writer_{tag}", "kind": "dma", "pe": list(pe), "program": writer})
        self._share_channels()
        return {
            "version": SCHEMA_VERSION, "kernel": self.fn.name, "ir_hash": ir_hash(self.fn),
            "config": self.config.to_dict(), "arch": arch.name, "timing": arch.timing,
            "phase": self.phase, "grid": self.counts, "multicast": self.multicast,
            "tensors": self._tensors(), "buffers": buffers, "semaphores": semaphores,
            "routes": self.routes, "agents": agents, "static_schedule": None,
            "links": [{"id": i, "from": [r, c], "dir": d} for (r, c, d), i in self.links.items()],
        }

    def _ops(self, name: str) -> list[Op]:
        """The grid body's loads or stores, in program order (computed once; do not modify)."""
        if name in self._op_lists:
            return self._op_lists[name]
        out: list[Op] = []

        def walk(steps: list[Step]) -> None:
            for s in steps:
                if isinstance(s, (Loop, Branch)):
                    walk(s.body)
                else:
                    out.extend(s.loads if name == "load" else s.stores)
        walk(self.steps)
        self._op_lists[name] = out
        return out

    def _op_index(self, op: Op) -> int:
        if not self._op_indices:
            for i, o in enumerate(self._ops("load") + self._ops("store")):
                self._op_indices.setdefault(o, i)
        return self._op_indices[op]

    def _channel(self, op: Op) -> int:
        """The stream load `op` belongs to, by the index of its first load: loads of one tensor
        through the same tiles, shifted or not, and any scalar indices (a stencil's neighbours
        `x[tm - 1, tn]`, a convolution's taps) form one (`stream_key`), whose tiles its reader
        copies one after another; a load multicast along a line of PEs with varying trip
        counts (`line_axis`) is a stream of its own."""
        if op not in self._channels:
            loads = self._ops("load")
            first = op
            if self.line_axis(op) is None:
                first = loads[first_of_streams(tuple(loads))[loads.index(op)]]
                if self.line_axis(first) is not None:  # a line load: the first other one
                    k = stream_key(op)
                    first = next(o for o in loads
                                 if self.line_axis(o) is None and stream_key(o) == k)
            self._channels[op] = self._op_index(first)
        return self._channels[op]

    def reader(self, op: Op) -> int:
        """The reader DMA (0, 1, ...) that issues load `op`'s copies (`channels.py`)."""
        return self._assignment[self._channel(op)]

    @property
    def readers(self) -> int:
        """How many reader DMAs each PE runs."""
        return self.shared_readers + len(self._streams[1])

    @functools.cached_property
    def shared_readers(self) -> int:
        """How many readers serve the streams that may share one (all but line loads'): at most
        `dma_readers` (all of them without the knob), and no more than the DMA channels the
        writer and the line loads leave (at least one)."""
        shareable, line = self._streams
        free = self.arch.dma_channels - min(1, len(self._ops("store"))) - len(line)
        limit = int(self.config.get("dma_readers", len(shareable)))
        return max(1, min(limit, len(shareable), free)) if shareable else 0

    @functools.cached_property
    def _streams(self) -> tuple[list[int], list[int]]:
        """The streams that may share a reader and those of line loads (`line_axis`), each in
        the order of their first loads."""
        shareable: dict[int, None] = {}
        line: dict[int, None] = {}
        for op in self._ops("load"):
            (shareable if self.line_axis(op) is None else line)[self._channel(op)] = None
        return list(shareable), list(line)

    @functools.cached_property
    def _assignment(self) -> dict[int, int]:
        """Stream -> reader: the shareable streams dealt onto `shared_readers` readers by the
        bytes each moves (`assign`; one each when there are as many), then a reader for each
        line load's stream."""
        shareable, line = self._streams
        n = self.shared_readers
        if n == len(shareable):
            out = {stream: i for i, stream in enumerate(shareable)}
        else:
            weights = dict.fromkeys(shareable, 0.0)
            for op, trips in self._load_trips():
                if self.line_axis(op) is None:
                    t = op.results[0].type
                    assert isinstance(t, TileType)
                    weights[self._channel(op)] += trips * self.numel(t) * t.dtype.bits
            out = assign(weights, n)
        out.update({stream: n + i for i, stream in enumerate(line)})
        return out

    def _load_trips(self) -> list[tuple[Op, int]]:
        """Each load with how many times a program runs it (its loops' whole trip counts)."""
        out: list[tuple[Op, int]] = []

        def walk(steps: list[Step], trips: int) -> None:
            for s in steps:
                if isinstance(s, Loop) and s.strided is not None:  # about total / stride
                    ranges = loop_ranges(s.strided)
                    total = math.prod(_cdiv(self.rt(r).extent, self.block(self.rt(r).block))
                                      for r in ranges)
                    walk(s.body, trips * _cdiv(total, int(s.strided.attrs["stride"])))
                elif isinstance(s, Loop):
                    t = self.rt(s.range)
                    walk(s.body, trips * _cdiv(t.extent, self.block(t.block)))
                elif isinstance(s, Branch):
                    walk(s.body, trips)
                else:
                    out.extend((op, trips) for op in s.loads)
        walk(self.steps, 1)
        return out

    def _dma_shortfall(self) -> str | None:
        """Why a PE has too few DMA channels for this mapping's readers and writer, or None:
        streams share readers down to one, but each line load needs its own."""
        writers = min(1, len(self._ops("store")))
        need = self.readers + writers
        if need <= self.arch.dma_channels:
            return None
        line = len(self._streams[1])
        own = (f"a reader of its own for each of {line} loads multicast to PE lines that run "
               "different iterations")
        parts = [own] * bool(line) + \
            [f"a reader {'the other' if line else 'its'} loads share"] * (self.readers > line) + \
            ["a writer"] * writers
        return (f"each PE needs {need} DMA channels ({', '.join(parts)}), {self.arch.name} has "
                f"{self.arch.dma_channels}")

    def _carried_bytes(self, block: Block | None = None) -> int:
        """The bytes of the values the grid's loops carry (those of a persistent loop's body
        too: each of its tiles has its own)."""
        total = 0
        for op in (self.grid.regions[0] if block is None else block).ops:
            if op.name == "for":
                for r in op.results:
                    if isinstance(r.type, TileType):
                        total += self.numel(r.type) * r.type.dtype.bits // 8
                if op.attrs.get("stride"):
                    total += self._carried_bytes(op.regions[0])
        return total

    def _tensors(self) -> list[dict[str, Any]]:
        out = []
        roles = {v: "input" for v in self.fn.args if isinstance(v.type, TensorType)}
        for v in map(root, self.fn.outputs):  # a returned view is its root's memory
            roles[v] = "output" if v not in roles else "inout"
        for op in self.fn.body.ops:
            if op.name in ALLOCATIONS:
                roles.setdefault(op.result, "temporary")
        for v, role in roles.items():
            t = v.type
            assert isinstance(t, TensorType)
            out.append({"name": self._tensor_name(v), "dtype": t.dtype.short, "shape": list(t.shape),
                        "home": "dram (tiles interleaved over the channel nearest each PE)",
                        "role": role})
        return out

    def _tensor_name(self, v: Value) -> str:
        v = root(v)  # a view is addressed in its root's memory (access() gives its strides)
        if v in self.fn.args:
            return v.hint or f"arg{self.fn.args.index(v)}"
        allocs = [op.result for op in self.fn.body.ops if op.name in ALLOCATIONS]
        return f"out{allocs.index(v)}"

    @functools.cached_property
    def waits_for_data(self) -> bool:
        """Whether, in dataflow timing, some loop's bound is read from a tensor: its PE's
        readers then wait for the compute agent to have it (`_wait_for_bounds`)."""
        return self.arch.timing != "static" and bool(self.stops.waits)

    def _needs_bound(self, step: Step) -> bool:
        """Whether `step` holds a loop whose bound a PE waits for (`waits_for_data`)."""
        if isinstance(step, Branch):
            return step.op in self.stops.waits or any(self._needs_bound(s) for s in step.body)
        return isinstance(step, Loop) and (
            self.stops.loops.get(step.range) in self.stops.waits or
            any(self._needs_bound(s) for s in step.body))

    def _parts(self, r: Value, g: tuple[int, ...], its: range) -> list[tuple[range, bool]]:
        """The iterations `its` of program `g`'s loop over `r` in runs, each with whether static
        timing predicates it (those before and after the program's own iterations of a loop
        with a data bound, `Stops.predicated`)."""
        if not self.stops.to_bound(r):
            return [(its, False)]
        own = self.stops.iterations(r, g, self.stops.bounds(r, g))
        if not own:
            return [(its, True)]
        parts = [(range(its.start, own.start), True), (own, False),
                 (range(own.stop, its.stop), True)]
        return [(part, p) for part, p in parts if part]

    def tile_positions(self, s: Loop, g: tuple[int, ...]) -> list[dict[Value, int]]:
        """The tiles program `g` runs of a persistent loop (`td.tile(m, n)[first::stride]`), in
        order, each as its position along each of the loop's ranges (numbered row-major)."""
        assert s.strided is not None
        ranges = loop_ranges(s.strided)
        counts = [_cdiv(self.rt(r).extent, self.block(self.rt(r).block)) for r in ranges]
        return [dict(zip(ranges, map(int, np.unravel_index(t, counts))))
                for t in self.stops.tiles(s.strided, g, math.prod(counts))]

    def _program(self, pe: tuple[int, int], g: tuple[int, ...], steps: list[Step],
                 iters: dict[Value, int], readers: dict[int, list], compute: list,
                 writer: list, last: dict[int, int], predicated: bool = False) -> None:
        """Append program `g`'s steps to its PE's agents. `last` (reader -> the stream of its
        last copy) carries on from iteration to iteration, so a copy of another stream than
        its reader's last one is marked a switch (iterations copy the same streams in the same
        order, so the ones `fold_loop` repeats start from the state the built ones did).
        `predicated`: static timing runs these steps in their slots, to no effect."""
        waited = False
        for s in steps:
            if steps is self.steps and not waited and self.waits_for_data and \
                    self._needs_bound(s):
                waited = True  # the readers copy the loop's tiles once the bound is known
                tag = f"{pe[0]}_{pe[1]}"
                for i in readers:
                    compute.append({"release": f"trip{i}_{tag}", "n": 1})
                    readers[i].append({"acquire": f"trip{i}_{tag}", "n": 1})
            if isinstance(s, Branch):  # the side the program takes; in static timing with a
                # condition read from the data, both: the other one predicated
                take = self.stops.condition(s.op, g)
                both = self.stops.static and s.op in self.stops.waits
                for side, taken in ((s.then, take), (s.other, not take)):
                    if taken or both:
                        self._program(pe, g, side, iters, readers, compute, writer, last,
                                      predicated or not taken)
                continue
            if isinstance(s, Loop) and s.strided is not None:  # each of its tiles in turn
                for pos in self.tile_positions(s, g):
                    self._program(pe, g, s.body, {**iters, **pos}, readers, compute, writer,
                                  last, predicated)
                continue
            if isinstance(s, Loop):
                its = self.stops.iterations(s.range, g)  # all, or this program's
                if not its:
                    continue  # a td.tile(stop, start=s) loop this program runs none of
                # Iterations differ only in their copies' offsets (affine in the iteration), except
                # a first one cut at the start and a last one cut at the stop: build the first
                # three (the offset strides, whichever is partial) and the last of each part
                # (predicated or not), and let `fold_loop` turn the rest, copies of the third
                # of their part, into loop counts.
                built: dict[int, tuple] = {}
                order = []
                for part, off in self._parts(s.range, g, its):
                    for it in sorted({*part[:3], part[-1]}):
                        rb: dict[int, list] = {i: [] for i in readers}
                        cb: list = []
                        wb: list = []
                        self._program(pe, g, s.body, {**iters, s.range: it}, rb, cb, wb, last,
                                      predicated or off)
                        built[it] = (rb, cb, wb)
                    order += [built[it] if it in built else built[part[2]] for it in part]
                for i in readers:
                    readers[i].extend(fold_loop([b[0][i] for b in order]))
                compute.extend(fold_loop([b[1] for b in order]))
                writer.extend(fold_loop([b[2] for b in order]))
                continue
            tag = f"{pe[0]}_{pe[1]}"
            for op in s.loads:
                buf = f"ld{self._op_index(op)}_{tag}"
                compute.append({"acquire": f"{buf}.full", "n": 1})
                axis = self.shared_axis(op)
                dsts = self.destinations(pe, axis)
                if dsts and self.line_axis(op) is None:  # (else `_line_copies` issues them)
                    r, stream = self.reader(op), self._channel(op)
                    switch = last.get(r, stream) != stream
                    last[r] = stream
                    readers[r].extend(self._copy(op, pe, g, iters, dsts,
                                                 buf if axis is None else None, switch=switch,
                                                 predicated=predicated))
            cycles, macs = self.compute_cost(s.compute, g, iters)
            step: dict[str, Any] = {"op": {"program": list(g), "cycles": cycles,
                                           "macs": 0 if predicated else macs,
                                           "ops": [o.name for o in s.compute]}}
            if predicated:
                step["predicated"] = True
            compute.append(step)
            for op in s.loads:
                compute.append({"release": f"ld{self._op_index(op)}_{tag}.empty", "n": 1})
            for op in s.stores:
                buf = f"st{self._op_index(op)}_{tag}"
                compute.append({"acquire": f"{buf}.empty", "n": 1})
                compute.append({"release": f"{buf}.full", "n": 1})
                offset, sizes, strides, nbytes = self.access(op, g, iters)
                route = self.route(self.dram_for(pe), [pe], f"st{self._op_index(op)}", to_dram=True)
                writer.append({"acquire": f"{buf}.full", "n": 1})
                copy = {"src": {"buffer": buf},
                        "dst": {"tensor": self._tensor_name(op.operands[0]), "offset": offset,
                                "sizes": sizes, "strides": strides},
                        "route": route["id"], "bytes": nbytes}
                if op.name == "atomic":  # the channel reads the old elements, then writes
                    copy["rmw"] = op.attrs["kind"]
                if predicated:
                    copy["predicated"] = True
                writer.append({"copy": copy})
                writer.append({"release": f"{buf}.empty", "n": 1})

    def _line_copies(self, op: Op, pe: tuple[int, int], steps: list[Step],
                     iters: dict[Value, int], line: list[tuple[tuple[int, int], tuple[int, ...]]],
                     out: list[dict[str, Any]],
                     cover: dict[Value, tuple[int, int]] | None = None) -> None:
        """The copies `pe` issues of a load with a `line_axis`: one per iteration that some PE
        of the line runs, multicast to the PEs that run it (`line`: each with its program), and
        covering from the lowest of their starts to the furthest of their stops (they share the
        tile; each uses its in-range part). The destinations change from iteration to
        iteration, so every iteration of the loops around the load is built, and `fold_loop`
        folds runs of alike ones."""
        for s in steps:
            if isinstance(s, Loop) and _holds(s.body, op):
                its = [self.stops.iterations(s.range, g) for _, g in line]
                bounds = [self.stops.bounds(s.range, g) for _, g in line]
                bodies: list[list[dict[str, Any]]] = []
                for it in range(min((r.start for r in its if r), default=0),
                                max((r.stop for r in its if r), default=0)):
                    bodies.append([])
                    runs = [k for k, r in enumerate(its) if it in r]
                    span = (min(bounds[k][0] for k in runs), max(bounds[k][1] for k in runs)) \
                        if runs else (0, 0)
                    self._line_copies(op, pe, s.body, {**iters, s.range: it},
                                      [line[k] for k in runs], bodies[-1],
                                      {**(cover or {}), s.range: span})
                out.extend(fold_loop(bodies))
            elif isinstance(s, Segment) and op in s.loads and line:
                out.extend(self._copy(op, pe, line[0][1], iters, [d for d, _ in line], None,
                                      cover))

    def _copy(self, op: Op, pe: tuple[int, int], g: tuple[int, ...], iters: dict[Value, int],
              dsts: list[tuple[int, int]], own: str | None,
              cover: dict[Value, tuple[int, int]] | None = None,
              switch: bool = False, predicated: bool = False) -> list[dict[str, Any]]:
        """A DRAM -> SRAM copy, issued by `pe` through its DRAM channel, of a load's tile to one
        PE or (multicast) PEs of a row or column (`cover`: see `access`); `switch`: its reader
        turns to this stream from another one (`channels.py`); `predicated`: it keeps its slot
        in a static schedule and moves nothing."""
        offset, sizes, strides, nbytes = self.access(op, g, iters, cover)
        route = self.route(self.dram_for(pe), dsts, f"ld{self._op_index(op)}")
        bufs = [own] if own is not None else \
            [f"ld{self._op_index(op)}_{d[0]}_{d[1]}" for d in dsts]
        steps: list[dict[str, Any]] = [{"acquire": f"{b}.empty", "n": 1} for b in bufs]
        copy = {"src": {"tensor": self._tensor_name(op.operands[0]), "offset": offset,
                        "sizes": sizes, "strides": strides},
                "dst": {"buffers": bufs}, "route": route["id"], "bytes": nbytes}
        if switch:
            copy["switch"] = True
        if predicated:
            copy["predicated"] = True
        steps.append({"copy": copy})
        steps += [{"release": f"{b}.full", "n": 1} for b in bufs]
        return steps


def _holds(steps: list[Step], op: Op) -> bool:
    """Whether `op` is among the loads of `steps` (loops included)."""
    return any(_holds(s.body, op) if isinstance(s, (Loop, Branch)) else op in s.loads
               for s in steps)
