"""An analytic estimate of a mapping's simulated cycles, from the mapping alone (no dataflow
config built, nothing simulated): cheap enough to rank a whole config space, so the tuner can
try the configs it ranks best first (`ConfigSpace.estimate`).

The model follows what the simulator does with the agents the mapper builds:

* Every reader DMA issues its transfers one after another; each costs the per-transfer
  overhead, the latency (hops + DRAM round trip), its bytes at the slower of link and DRAM
  channel, and, below the channel's minimum burst, the wasted burst time. A reader that
  several streams share (`channels.py`) issues theirs in program order, one at a time, and
  pays the switch cost on each turn to another stream. A transfer whose route crosses a NoC
  link that carries more streams (an operand or a store from one DRAM channel) than the link
  has channels pays the link's sharing cost (`Arch.link_share_cycles`), as in the mapper.
* A DRAM channel serves every PE it is nearest to, and a NoC link every route over it: the
  loads and stores of those PEs queue on it.
* A multicast load is issued by the PE heading its line; inside `td.tile(stop, start=s)` loops
  whose iterations vary along the line, it issues the copies of a program running from the
  line's lowest start to its furthest stop (what the mapper's copies cover).
* Transfers share the channel and links they cross packet by packet, served in the order
  the packets are ready. Every PE's first transfers start at once, so each waits for the first
  transfers of all the PEs on its channel and links. Later transfers of one packet fall out of
  step and mostly pass alone; those of several packets interleave, end together and start
  their next ones together, so they share the bandwidth with the other such streams there for
  good (a key and a value tile, the PEs of one channel).
* Buffers let each reader run ahead of compute, so a PE is a pipeline (`_pipeline`): a step
  computes once its loads have arrived and the step before it is done. The PE is done at the
  latest of that, its channel's and its links' total busy time (the loads of every PE they
  serve) plus the last step, and its stores; then its last store lands. The kernel takes as
  long as its slowest PE.

Programs differ only in whether they hold a ragged last tile along each grid axis and, in
kernels with `td.tile(stop, start=s)` loops (causal and sliding-window attention), in where each
such loop starts and stops, so the work of a program is worked out once per such class and the
programs of each PE are counted by class (a NumPy histogram); the sequential tile loops'
iterations, and their first and last ones cut at a start or stop, are counted exactly.

Measured over whole spaces (`python benchmarks/tune_spatial.py`), the estimate's rank
correlation with the simulated cycles is 0.96 to 1.0 on wormhole-like, 0.97 to 1.0 on
generic-8x8 and 0.85 to 1.0 on aie-like-4x8 (13 spaces each). It does not model the order in
which streams that drift apart contend later on (single-packet transfers on a busy channel wait
more than their share), so configs it ranks within a few percent of each other are ties to the
simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lowering.backends.spatial.arch import Arch
from lowering.backends.spatial.mapper import Branch, Loop, Mapping, Step, xy_hops
from tiledsl.ir.core import Value

Cover = dict[Value, tuple[int, int]]  # loops' (lower, limit) in place of a program's own


@dataclass
class Stream:
    """The transfers one load or the stores make for one program."""

    axis: int | None = None  # a multicast load: the grid axis its line of PEs shares
    transfers: int = 0
    bytes: int = 0
    short: int = 0  # bytes the transfers fall short of the DRAM minimum burst, summed
    free: int = 0  # bytes of predicated transfers: their reader's time, no channel or link's
    first: int = -1  # bytes of the first transfer (-1: none yet)
    last: int = 0  # bytes of the last transfer


@dataclass
class Segment:
    """A step of a program, in order, run `count` times in a row: each time, one transfer per
    loaded operand (its bytes), then `compute` cycles."""

    count: int
    compute: float
    loads: dict[int, int]


@dataclass
class Work:
    """What one program does: compute cycles, its loads by operand, its stores, and its steps
    in order (for the pipeline of loads and compute, `_pipeline`)."""

    compute: float = 0.0
    last_compute: float = 0.0
    loads: dict[int, Stream] = field(default_factory=dict)
    stores: Stream = field(default_factory=Stream)
    segments: list[Segment] = field(default_factory=list)


def _add(stream: Stream, count: int, nbytes: int, burst: int, free: bool = False) -> None:
    stream.transfers += count
    stream.bytes += count * nbytes
    if free:  # a predicated transfer (`Stops.predicated`): the engine moves no data
        stream.free += count * nbytes
    else:
        stream.short += count * max(0, burst - nbytes)
    if stream.first < 0:
        stream.first = nbytes
    stream.last = nbytes


def program_work(m: Mapping, g: tuple[int, ...], burst: int,
                 cycles: dict[int, float] | None = None, cover: Cover | None = None) -> Work:
    """The work of program `g` (loops counted by its iterations; a first and a last iteration
    cut at a start or stop apart), or with `cover`, of one running the loops over those bounds.
    `cycles` caches each segment's compute cycles across programs: the matrix and vector units
    work on whole (padded) tiles, so they do not depend on the program."""
    work = Work()
    cache = {} if cycles is None else cycles

    def walk(steps: list[Step], count: int, iters: dict[Value, int], off: bool = False
             ) -> None:
        for s in steps:
            if isinstance(s, Branch):  # the side(s) the program runs (`Stops.sides`)
                for side, runs in zip((s.then, s.other), m.stops.sides(s.op, g)):
                    if runs:
                        walk(side, count, iters, off)
                continue
            if isinstance(s, Loop) and s.strided is not None:  # a persistent loop's tiles
                for pos in m.tile_positions(s, g):
                    walk(s.body, count, {**iters, **pos}, off)
                continue
            if isinstance(s, Loop):
                bounds = (cover or {}).get(s.range)
                its = m.stops.iterations(s.range, g, bounds)  # all, or this program's
                for it, k, predicated in _kinds(m, s.range, g, its, bounds):
                    walk(s.body, count * k, {**iters, s.range: it}, off or predicated)
                continue
            segment = Segment(count, 0.0, {})
            for op in s.loads:
                i = m._op_index(op)
                stream = work.loads.setdefault(i, Stream(axis=m.shared_axis(op)))
                segment.loads[i] = m.access(op, g, iters, cover)[3]
                _add(stream, count, segment.loads[i], burst, off)
            if id(s) not in cache:
                cache[id(s)] = m.compute_cost(s.compute, g, iters)[0]
            segment.compute = cache[id(s)]
            work.segments.append(segment)
            work.compute += count * cache[id(s)]
            work.last_compute = cache[id(s)] or work.last_compute
            for op in s.stores:  # an atomic's channel reads, then writes: twice the time
                _add(work.stores, count, m.access(op, g, iters)[3] * (1 + (op.name == "atomic")),
                     burst, off)

    walk(m.steps, 1, {})
    return work


def _kinds(m: Mapping, r: Value, g: tuple[int, ...], its: range, bounds: tuple[int, int] | None
           ) -> list[tuple[int, int, bool]]:
    """Program `g`'s iterations `its` of the loop over `r` by kind: (an iteration, how many,
    whether static timing predicates them). The first and last may be cut at the start and
    stop, the middle ones are whole; predicated ones (past the program's own) keep a whole
    tile's slot."""
    kinds: dict[tuple[int, bool], list[int]] = {}  # (in-range lanes, predicated) -> [it, k]
    n = len(its)
    ends = [(its[0], 1), (its[-1], 1)][:n] if n else []  # none: no iterations
    own = m.stops.iterations(r, g, m.stops.bounds(r, g)) if bounds is None and \
        m.stops.to_bound(r) else its
    for it, k in ends[:1] + ([(its[1], n - 2)] if n > 2 else []) + ends[1:]:
        if k > 1 and own is not its:  # the middle ones: split them at the program's own
            inside = len(range(max(it, own.start), min(it + k, own.stop)))
            off = it if it not in own else max(it, own.stop)  # one that is predicated
            parts = [(max(it, own.start), inside, False), (off, k - inside, True)]
        else:
            parts = [(it, k, it not in own)]
        for at, j, predicated in parts:
            if j:
                kind = kinds.setdefault((m.stops.lanes(r, g, at, bounds)[1], predicated),
                                        [at, 0])
                kind[1] += j
    return [(it, k, p) for (_, p), (it, k) in kinds.items()]


def estimate_cycles(m: Mapping) -> float:
    """About how many cycles the simulator will take for this mapping: each occupied PE's
    traffic (what it loads and stores, queued on its channel and links), then how fast each of
    its operands moves given who shares those, then its pipeline; the slowest PE."""
    e = _Estimate(m)
    per_pe = e.traffic()
    moving = e.moving(per_pe)
    return max([0.0] + [e.finish(p, moving) for p in per_pe])


Link = tuple[int, int, str]  # a NoC link: (row, col, direction)
Resource = object  # a DRAM channel (its index) or a NoC link (row, col, direction)
# operand -> the bytes of its first transfer, the links its transfers cross, how many
# transfers and bytes in all
Issued = dict[int, tuple[int, set[Link], int, int]]
# (PE, operand) -> cycles its first transfer moves (None: as later ones), cycles a byte moves
Moving = dict[tuple[tuple[int, int], int], tuple[float | None, float]]


@dataclass
class _Site:
    """A PE and the DRAM channel nearest it: what a transfer between them costs."""

    pe: tuple[int, int]
    ch: int
    attach: tuple[int, int]  # where the channel attaches to the NoC
    burst: int  # the channel's minimum burst (bytes)
    dram_bw: float  # the channel's bytes a cycle
    bw: float  # bytes a cycle, at the slower of link and channel
    fixed: float  # a transfer's overhead and latency (hops + DRAM round trip)

    @staticmethod
    def of(m: Mapping, q: int) -> _Site:
        arch = m.arch
        pe = divmod(q, arch.cols)
        ch = m.dram_for(pe)
        dram = arch.dram[ch]
        hops = abs(dram.attach[0] - pe[0]) + abs(dram.attach[1] - pe[1])
        bw = min(arch.link_bytes_per_cycle, dram.bytes_per_cycle) if hops else dram.bytes_per_cycle
        fixed = arch.transfer_overhead_cycles + hops * arch.hop_latency_cycles + dram.latency_cycles
        return _Site(pe, ch, dram.attach, dram.min_burst_bytes, dram.bytes_per_cycle, bw, fixed)

    def time(self, s: Stream) -> float:
        """The transfers of `s` one after another, alone."""
        return s.transfers * self.fixed + s.short / self.dram_bw + s.bytes / self.bw

    def last_store(self, stores: Stream) -> float:
        """Cycles the last of `stores` takes to land (none: 0)."""
        if not stores.transfers:
            return 0.0
        return self.fixed + max(0, self.burst - stores.last) / self.dram_bw + \
            stores.last / self.bw


@dataclass
class _PE:
    """What an occupied PE does: the operands it issues (`Issued`), which of them lead on their
    readers and each reader's flow (`_readers`), its programs in order (a program's work, how
    many in a row), the last one's last compute, its stores' time and its last store's, and
    its store transfers and the links they cross."""

    site: _Site
    issued: Issued
    leads: set[int]
    flows: dict[int, tuple[int, int, set[Resource]]]
    blocks: list[tuple[Work, int]]
    last_compute: float
    writer: float
    last_store: float
    store_transfers: int = 0
    store_path: set[Link] = field(default_factory=set)


@dataclass
class _Sharing:
    """Who shares each channel and link (see the module's docstring): the bytes of the first
    transfer of every stream there, which all start at once, and the streams whose transfers
    span several packets (bytes a transfer, transfers), which share it in step (`_in_step`)."""

    arch: Arch
    firsts: dict[Resource, list[float]] = field(default_factory=dict)
    steady: dict[Resource, list[tuple[float, int]]] = field(default_factory=dict)
    waits: dict[tuple[Resource, int], float] = field(default_factory=dict)
    in_step: dict[Resource, np.ndarray] = field(default_factory=dict)

    def note(self, ch: int, issued: Issued, flows: dict[int, tuple[int, int, set[Resource]]]
             ) -> None:
        """Records the streams of a PE (`issued`, and its readers' flows: `_readers`)."""
        for first_bytes, links, _, _ in issued.values():  # (a shared reader's later streams
            for r in [ch, *links]:  # contend with the first transfers it issues after them)
                self.firsts.setdefault(r, []).append(first_bytes)
        for nbytes, transfers, resources in flows.values():
            for r in resources if nbytes > transfers * self.arch.packet_bytes else []:
                self.steady.setdefault(r, []).append((nbytes / transfers, transfers))

    def first_wait(self, r: Resource, nbytes: int) -> float:
        """Cycles a first transfer of `nbytes` takes on `r`, alongside every other first one."""
        if (r, nbytes) not in self.waits:
            self.waits[r, nbytes] = sum(min(x, nbytes) for x in self.firsts[r]) / \
                _bandwidth(self.arch, r)
        return self.waits[r, nbytes]

    def per_byte(self, resources: list[Resource], size: float, transfers: int) -> float:
        """Cycles a byte of a later transfer (`size` bytes, `transfers` of them) moves across
        `resources`, shared with the streams in step with it."""
        arch = self.arch
        per_byte = max(1.0 / _bandwidth(arch, r) for r in resources)
        if size > arch.packet_bytes:
            per_byte = max(per_byte, *(_in_step(self._in_step(r), size, transfers) /
                                       _bandwidth(arch, r) for r in resources))
        return per_byte

    def _in_step(self, r: Resource) -> np.ndarray:
        if r not in self.in_step:
            self.in_step[r] = np.array(self.steady[r], dtype=float).T
        return self.in_step[r]


class _Estimate:
    """The steps of `estimate_cycles`, in order: `traffic` (each PE's loads and stores, with
    the time they keep its channel and links busy), `moving` (how fast each operand moves),
    `finish` (when each PE is done). Programs are worked out once per class (`_classes`)."""

    def __init__(self, m: Mapping) -> None:
        self.m = m
        self.n = n = math.prod(m.counts)
        self.pes = m.pe_indices()
        self.coords = coords = np.unravel_index(np.arange(n), m.counts)
        lowers, limits = m.stops.spans(coords)
        self.program_class, self.reps = _classes(m, coords, limits, lowers)
        self.table = _histogram(m.arch, self.pes, self.program_class, len(self.reps))
        # Multicast loads in td.tile(stop, start=s) loops that vary along their line: the line's
        # head issues, for each of its programs, copies from the line's lowest start to its
        # furthest stop (a line class: the head's class and those bounds).
        self.line_ops = {m._op_index(op): a for op in m._ops("load")
                         if (a := m.line_axis(op)) is not None}
        self.lines = {a: _line_classes(m, coords, lowers, limits, self.program_class, a)
                      for a in set(self.line_ops.values())}
        self.line_tables = {a: _histogram(m.arch, self.pes[heads], cls, len(covers))
                            for a, (heads, cls, covers) in self.lines.items()}
        self.streams = {m._op_index(op): (m.reader(op), m._channel(op)) for op in m._ops("load")}
        self.axes = {m._op_index(op): m.shared_axis(op) for op in m._ops("load")}
        self.works: dict[tuple[int, int], Work] = {}
        self.line_works: dict[tuple[int, int, int], Work] = {}
        self.cycles: dict[int, float] = {}  # compute cycles by step, across programs
        self.channel_busy: dict[int, float] = {}  # cycles of DRAM channel time
        self.link_busy: dict[Link, float] = {}  # cycles of NoC link time
        self.link_streams: dict[Link, set[tuple]] = {}  # (channel, load/store, op) on each
        self.crowded: set[Link] | None = None  # links with more streams than channels
        self.issued_links: dict[tuple[tuple[int, int], int], set[Link]] = {}  # (PE, operand)
        self.store_ops = [m._op_index(op) for op in m._ops("store")]
        self.sharing = _Sharing(m.arch)

    def work(self, cls: int, burst: int) -> Work:
        if (cls, burst) not in self.works:
            self.works[cls, burst] = program_work(self.m, self.reps[cls], burst, self.cycles)
        return self.works[cls, burst]

    def line_work(self, a: int, cls: int, burst: int) -> Work:
        if (a, cls, burst) not in self.line_works:
            g, cover = self.lines[a][2][cls]
            self.line_works[a, cls, burst] = program_work(self.m, g, burst, self.cycles, cover)
        return self.line_works[a, cls, burst]

    def traffic(self) -> list[_PE]:
        """Each occupied PE's traffic, in PE order."""
        occupied, first_program = np.unique(self.pes, return_index=True)
        last_program = self.n - 1 - np.unique(self.pes[::-1], return_index=True)[1]
        by_pe: dict[int, list[tuple[int, int]]] = {}  # PE -> (class, programs of it)
        for q, cls in zip(*(a.tolist() for a in self.table.nonzero())):
            by_pe.setdefault(q, []).append((cls, int(self.table[q, cls])))
        return [self.pe_traffic(q, first, last, by_pe[q]) for q, first, last
                in zip(occupied.tolist(), first_program.tolist(), last_program.tolist())]

    def pe_traffic(self, q: int, first: int, last: int, classes: list[tuple[int, int]]) -> _PE:
        """PE `q`'s programs (`classes`: class, programs of it; `first` and `last`: its first
        and last program), the operands it issues and its stores."""
        site = _Site.of(self.m, q)
        issued: Issued = {}
        store_path = set(xy_hops(site.pe, site.attach))
        writer = 0.0
        store_transfers = 0
        head, tail = int(self.program_class[first]), int(self.program_class[last])
        programs = sorted(classes, key=lambda ck: (ck[0] != head, ck[0] == tail))  # in order
        for cls, k in programs:
            w = self.work(cls, site.burst)
            writer += k * site.time(w.stores)
            store_transfers += k * w.stores.transfers
            if w.stores.transfers:
                self.occupy(site, store_path, w.stores, k)
                for j in self.store_ops:  # each store a stream of its own on the links
                    self.crossing(store_path, (site.ch, "st", j))
            for i, s in w.loads.items():
                if i not in self.line_ops:
                    self.read(site, issued, i, s, k)
        for i, a in self.line_ops.items():
            for cls in self.line_tables[a][q].nonzero()[0].tolist():
                s = self.line_work(a, cls, site.burst).loads.get(i)
                if s is not None:
                    self.read(site, issued, i, s, int(self.line_tables[a][q, cls]))
        leads, flows = _readers(issued, self.streams, site.ch)
        self.sharing.note(site.ch, issued, flows)
        tail_work = self.work(tail, site.burst)
        return _PE(site, issued, leads, flows,
                   [(self.work(c, site.burst), k) for c, k in programs], tail_work.last_compute,
                   writer, site.last_store(tail_work.stores), store_transfers, store_path)

    def read(self, site: _Site, issued: Issued, i: int, s: Stream, k: int) -> None:
        """`k` programs' loads of operand `i` (`s`), if this PE issues them."""
        dsts = self.m.destinations(site.pe, s.axis)
        if dsts:  # it issues this operand's transfers
            links = set().union(*(xy_hops(site.attach, d) for d in dsts))
            first_bytes, crossed, transfers, nbytes = issued.get(i, (s.first, set(), 0, 0))
            issued[i] = (first_bytes, crossed | links, transfers + k * s.transfers,
                         nbytes + k * s.bytes)
            self.occupy(site, links, s, k)
            self.crossing(links, (site.ch, "ld", i))
            self.issued_links[site.pe, i] = crossed | links

    def crossing(self, links: set[Link], stream: tuple) -> None:
        """`stream` (a DRAM channel, load or store, the op) crosses `links`."""
        for link in links:
            self.link_streams.setdefault(link, set()).add(stream)

    def share_cost(self, links: set[Link]) -> float:
        """What a transfer over `links` pays for sharing a link's channels with other streams
        (`Arch.link_share_cycles` where one carries more streams than it has channels)."""
        arch = self.m.arch
        if self.crowded is None:
            self.crowded = {x for x, s in self.link_streams.items()
                            if len(s) > arch.channels_per_link}
        return arch.link_share_cycles if self.crowded.intersection(links) else 0.0

    def occupy(self, site: _Site, links: set[Link], s: Stream, k: int) -> None:
        """`k` times the transfers of `s` keep the channel and `links` busy."""
        # The simulator charges a short burst's shortfall as latency only; charging it to the
        # channel as well stands in for the idle channel time that many small transfers
        # leave, and ranks better (axpby on aie-like-4x8: rank correlation 0.88, not 0.84).
        self.channel_busy[site.ch] = self.channel_busy.get(site.ch, 0.0) + \
            k * (s.bytes - s.free + s.short) / site.dram_bw
        for link in links:
            self.link_busy[link] = self.link_busy.get(link, 0.0) + \
                k * (s.bytes - s.free) / self.m.arch.link_bytes_per_cycle

    def moving(self, per_pe: list[_PE]) -> Moving:
        """(PE, operand) -> cycles its first transfer moves (None: as later ones) and cycles a
        byte of the later ones moves: the first ones of every stream on a channel or link at
        once, each up to its own size; later ones of several packets with the streams in step
        with them."""
        moving: Moving = {}
        for p in per_pe:
            for i, (b, links, _, _) in p.issued.items():
                resources: list[Resource] = [p.site.ch, *links]
                nbytes, transfers, _ = p.flows[self.streams[i][0]]  # its reader's, in step
                per_byte = self.sharing.per_byte(resources, nbytes / transfers, transfers)
                first = max(self.sharing.first_wait(r, b) for r in resources) \
                    if i in p.leads else None
                moving[p.site.pe, i] = (first, per_byte)
        return moving

    def finish(self, p: _PE, moving: Moving) -> float:
        """When PE `p`'s last store lands: after its pipeline of loads and compute, its
        channel's and links' busy time plus its last compute, and its stores."""
        site = p.site
        costs: dict[int, tuple[float | None, float]] = {}  # operand -> as `moving`
        share: dict[int, float] = {}  # operand -> what a transfer pays for sharing a link
        for w, _ in p.blocks:
            for s in w.segments:
                for i in s.loads.keys() - costs.keys():
                    axis = self.axes.get(i)  # a multicast operand arrives as its line's head
                    source = site.pe if i in p.issued or axis is None else \
                        tuple(0 if d == axis else x for d, x in enumerate(site.pe))  # sends it
                    costs[i] = moving.get((source, i), (None, 1.0 / site.bw))
                    share[i] = self.share_cost(self.issued_links.get((source, i), set()))
        paths = set().union(*(links for _, links, _, _ in p.issued.values()))
        loaded = max([self.channel_busy.get(site.ch, 0.0)] + [self.link_busy[x] for x in paths])
        # an operand this PE issues queues on its reader, shared or not; one a line's head
        # sends it arrives as that reader issues it (not modelled: as if on a reader alone)
        readers = {i: self.streams[i] if i in p.issued else (("fed", i), i) for i in costs}
        done = _pipeline(p.blocks, costs, site.fixed, site.burst, site.dram_bw, readers,
                         self.m.arch.dma_switch_cycles, share)
        store_share = self.share_cost(p.store_path) if p.store_transfers else 0.0
        return max(done, loaded + p.last_compute, p.writer + p.store_transfers * store_share) \
            + p.last_store + store_share


def _histogram(arch: Arch, pes: np.ndarray, cls: np.ndarray, classes: int) -> np.ndarray:
    """PE x class -> programs."""
    return np.bincount(pes * classes + cls, minlength=arch.pes * classes).reshape(arch.pes,
                                                                                  classes)


def _readers(issued: dict[int, tuple], streams: dict[int, tuple[int, int]], ch: int
             ) -> tuple[set[int], dict[int, tuple[int, int, set[Resource]]]]:
    """How a PE's readers issue the operands it issues (`issued`, in program order; `streams`:
    operand -> (reader, stream)): the operands that come first on their readers, whose first
    transfers start at once with the other PEs' (a shared reader issues its other streams'
    first transfers later, one after another), and each reader's transfers as one flow (its
    bytes and transfers in all, and the channel and links they cross), since a shared reader
    moves one transfer at a time."""
    leads: dict[int, int] = {}
    flows: dict[int, tuple[int, int, set[Resource]]] = {}
    for i, (_, links, transfers, nbytes) in issued.items():
        r = streams[i][0]
        leads.setdefault(r, i)
        b, t, res = flows.get(r, (0, 0, {ch}))
        flows[r] = (b + nbytes, t + transfers, res | links)
    return set(leads.values()), flows


def _bandwidth(arch: Arch, r: Resource) -> float:
    return arch.dram[r].bytes_per_cycle if isinstance(r, int) else arch.link_bytes_per_cycle


def _in_step(streams: np.ndarray, size: float, transfers: int) -> float:
    """How many streams share a resource in step with one making `transfers` transfers of
    `size` bytes (itself included). `streams`: the bytes a transfer and the transfers of each
    stream there whose transfers span several packets. Each counts for the fraction of a
    transfer's bytes it matches and of the transfers it lasts."""
    sizes, counts = streams
    return float((np.minimum(sizes / size, 1.0) * np.minimum(counts / transfers, 1.0)).sum())


def _pipeline(blocks: list[tuple[Work, int]], costs: dict[int, tuple[float | None, float]],
              fixed: float, burst: int, dram_bw: float,
              readers: dict[int, tuple[object, int]], switch: float,
              share: dict[int, float] | None = None) -> float:
    """When a PE's compute is done, running its programs in order (each block: a program's work
    and how many such programs in a row). Each operand's reader issues its transfers one after
    another as early as it can (buffers let loads run ahead of compute); a step computes once
    its loads have arrived and the step before it is done. A transfer takes `fixed` cycles, a
    short burst's shortfall, and its bytes moving (`costs`: operand -> cycles its first
    transfer moves, if known, and cycles a byte moves). A run of `count` equal steps finishes
    at the later end of its chain (the first arrival, then all the compute; the last arrival,
    then one step); a block of k programs runs the first and the last exactly, the ones
    between as a whole.

    Operands whose transfers one reader issues (`readers`: operand -> (reader, stream)) queue
    on it in program order, and a transfer of another stream than the one before it on that
    reader pays `switch` cycles (`channels.py`); one whose route shares a link's channels
    pays `share[operand]` more."""
    ready = {readers[i][0]: 0.0 for i in costs}  # reader -> when its transfers so far arrived
    last: dict[object, int] = {}  # reader -> the stream of its last transfer
    started: set[int] = set()
    done = 0.0

    def transfer(i: int, nbytes: int) -> float:
        return fixed + (share or {}).get(i, 0.0) + max(0, burst - nbytes) / dram_bw + \
            nbytes * costs[i][1]

    def queues(s: Segment) -> dict[object, list[int]]:
        out: dict[object, list[int]] = {}  # reader -> its operands in the segment, in order
        for i in s.loads:
            out.setdefault(readers[i][0], []).append(i)
        return out

    def again(ops: list[int], s: Segment) -> float:
        """Cycles a reader takes to repeat its transfers of a step (switching streams as it
        goes round)."""
        return sum(transfer(i, s.loads[i]) + switch * (readers[ops[j - 1]][1] != readers[i][1])
                   for j, i in enumerate(ops))

    def run(segments: list[Segment]) -> None:
        nonlocal done
        for s in segments:
            if not s.loads:
                done += s.count * s.compute
                continue
            arrived = latest = 0.0
            for r, ops in queues(s).items():
                for i in ops:
                    b = s.loads[i]
                    head = transfer(i, b) + switch * (last.get(r, readers[i][1]) != readers[i][1])
                    last[r] = readers[i][1]
                    if i not in started:
                        started.add(i)
                        if costs[i][0] is not None:
                            head += costs[i][0] - b * costs[i][1]
                    ready[r] += head
                    arrived = max(arrived, ready[r])
                ready[r] += (s.count - 1) * again(ops, s)
                latest = max(latest, ready[r])
            done = max(done + s.count * s.compute, arrived + s.count * s.compute,
                       latest + s.compute)

    for w, k in blocks:
        run(w.segments)
        if k > 2:
            for s in w.segments:
                for r, ops in queues(s).items():
                    ready[r] += (k - 2) * s.count * again(ops, s)
            done = max(done + (k - 2) * w.compute, max(ready.values(), default=0.0))
        if k > 1:
            run(w.segments)
    return done


def _classes(m: Mapping, coords: tuple[np.ndarray, ...], limits: np.ndarray,
             lowers: np.ndarray | None = None) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Each program's class and a program of each class. Programs of a class do the same work:
    they agree on whether they are the last along each grid axis (a ragged tile) and on where
    each td.tile(stop, start=s) loop starts and stops for them (`lowers`, `limits`: a row per
    loop)."""
    counts = m.counts
    cls = np.zeros(len(coords[0]), dtype=np.int64)  # bit d: the last program along axis d
    for d, c in enumerate(counts):
        cls |= (coords[d] == c - 1).astype(np.int64) << d
    if not len(limits):
        return cls, [tuple(c - 1 if k >> d & 1 else 0 for d, c in enumerate(counts))
                     for k in range(1 << len(counts))]
    if lowers is None:
        lowers = m.stops.spans(coords)[0]
    for r, low, high in zip(m.stops.loops, lowers, limits):  # refine by each loop's bounds
        extent = m.rt(r).extent + 1
        cls = np.unique((cls * extent + low) * extent + high, return_inverse=True)[1].reshape(-1)
    first = np.unique(cls, return_index=True)[1]
    return cls, [tuple(int(x[i]) for x in coords) for i in first.tolist()]


def _line_classes(m: Mapping, coords: tuple[np.ndarray, ...], lowers: np.ndarray,
                  limits: np.ndarray, cls: np.ndarray, axis: int
                  ) -> tuple[np.ndarray, np.ndarray, list[tuple[tuple[int, ...], Cover]]]:
    """The heads of the multicast lines along grid axis `axis` (program numbers), each one's
    line class, and for each class a head and the loop bounds its copies cover: from the
    lowest start to the furthest stop among the line's programs that run the loop (as the
    mapper's `_line_copies`; exactly so with one loop whose bounds rise along the line)."""
    length = m.arch.cols if axis == 1 else m.arch.rows
    stride = 1 if axis == 1 else m.counts[1]  # programs are numbered row-major
    heads = np.nonzero(coords[axis] % length == 0)[0]
    members = heads[:, None] + stride * np.arange(length)[None, :]  # whole lines (multicast)
    runs = limits > lowers  # (loops, programs): whether it runs any iteration
    big = np.iinfo(np.int64).max
    high = limits[:, members].max(axis=2)  # (loops, heads)
    low = np.where(runs, lowers, big)[:, members].min(axis=2)
    low = np.where(high > 0, low, 0)
    keys = np.concatenate([cls[heads][None, :], low, high]).T
    unique, first, line_cls = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    covers = []
    for k, h in zip(unique.tolist(), heads[first].tolist()):
        g = tuple(int(x[h]) for x in coords)
        n = len(m.stops.loops)
        covers.append((g, {r: (k[1 + j], k[1 + n + j]) for j, r in enumerate(m.stops.loops)}))
    return heads, line_cls.reshape(-1), covers
