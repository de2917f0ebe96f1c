"""The spatial accelerator's architecture: a 2-D grid of PEs with SRAM, a mesh NoC, DRAM at
the edges. JSON-serializable; every preset value says whether it is published or assumed.

    arch = preset("wormhole-like")
    arch.to_json(); Arch.from_json(text)
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

import numpy as np

from tiledsl.checks import is_int, is_number
from tiledsl.dtypes import BY_SHORT
from tiledsl.errors import BackendError, ConfigError

TIMINGS = ("dataflow", "static")
# Cycles a DMA channel that serves several streams (time-multiplexed) pays when it moves on to a
# transfer of another stream: loading that stream's descriptor (AIE: the next buffer
# descriptor of a chain and its lock; Tenstorrent: a data-movement core turning to another
# circular buffer's address generator and write pointer). The default of an Arch that does not
# state it; assumed, a third of generic-8x8's per-transfer overhead.
DMA_SWITCH_CYCLES = 32.0
# Cycles a transfer pays where its route crosses a link that carries more streams than the link
# has (virtual) channels, so streams share them: its packets wait for another stream's on the
# shared channel at each such switch, as a shared DMA turns to another stream. The default of an
# Arch that does not state it; assumed, half of DMA_SWITCH_CYCLES (a router's arbitration, no
# descriptor to load).
LINK_SHARE_CYCLES = 16.0
MAX_PACKET_BYTES = 2**62  # the simulator counts bytes in 64-bit integers


def _plain(v: Any) -> Any:
    """A NumPy scalar as the Python number it holds (an architecture is JSON: `to_json`, and
    the kernel's caches key on it); anything else as is, for the checks to judge."""
    return v.item() if isinstance(v, np.generic) else v


@dataclass(frozen=True)
class Value:
    """A number with its provenance: `source` is "published: <where>" or "assumed: <why>"."""

    value: float
    source: str


@dataclass(frozen=True)
class DramChannel:
    name: str
    attach: tuple[int, int]  # the PE (row, col) where the channel enters the mesh
    bytes_per_cycle: float
    latency_cycles: float
    min_burst_bytes: int  # transfers below this use the channel at proportionally lower efficiency

    def __post_init__(self) -> None:
        if isinstance(self.attach, (list, tuple)):  # JSON-style [row, col]: the mapper keys on it
            object.__setattr__(self, "attach", tuple(_plain(x) for x in self.attach))
        for name in ("bytes_per_cycle", "latency_cycles", "min_burst_bytes"):
            object.__setattr__(self, name, _plain(getattr(self, name)))


@dataclass(frozen=True)
class Arch:
    name: str
    rows: int
    cols: int
    clock_ghz: float
    macs_per_cycle: dict[str, float]  # per PE, by dtype ("bf16", "f16", "f32", "i8")
    min_mma: tuple[int, int, int]  # (m, n, k): smaller operands run at proportionally lower rate
    vector_lanes: int
    sram_bytes: int
    dma_channels: int  # DMA engines per PE (readers, a writer; streams share readers)
    op_overhead_cycles: float  # issuing one compute step
    link_bytes_per_cycle: float
    hop_latency_cycles: float
    transfer_overhead_cycles: float  # per DMA transfer (descriptor setup, NoC handshake)
    channels_per_link: int  # streams one link carries on channels of their own (stream switch
    # ports / colors / virtual channels); more share them (`link_share_cycles` a transfer)
    multicast: bool
    packet_bytes: int
    dram: tuple[DramChannel, ...]
    timing: str = "dataflow"  # or "static": every step has a start cycle fixed at compile time
    dma_switch_cycles: float = DMA_SWITCH_CYCLES  # a shared DMA channel turning to another stream
    link_share_cycles: float = LINK_SHARE_CYCLES  # a transfer over a link channel streams share
    sources: dict[str, str] = field(default_factory=dict)  # field -> provenance
    # Passes through the matrix unit a product of a dtype takes (Tenstorrent's math fidelity:
    # LoFi 1, HiFi2 2, HiFi3 3, HiFi4 4): its MAC rate is `macs_per_cycle` over these. Dtypes
    # not listed take one pass.
    math_fidelity: dict[str, int] = field(default_factory=dict)
    # Operand bytes per cycle that the matrix unit's feed (Tenstorrent's unpacker: SRAM to the
    # source registers) moves; 0: not a limit. A product feeds each A element once per
    # min_mma n output columns and each B element once per min_mma m output rows
    # (`feed_bytes`), so a step takes at least its feed bytes over this rate.
    feed_bytes_per_cycle: float = 0.0

    def __post_init__(self) -> None:
        """Check every field, so a custom architecture that the mapper or the simulator cannot
        use (no PEs, no DRAM, a zero bandwidth) is a ConfigError naming the field. NumPy
        numbers become Python ones."""
        for f in fields(self):
            object.__setattr__(self, f.name, _plain(getattr(self, f.name)))
        if isinstance(self.min_mma, (tuple, list)):
            object.__setattr__(self, "min_mma", tuple(_plain(x) for x in self.min_mma))
        for name in ("macs_per_cycle", "math_fidelity"):
            if isinstance(getattr(self, name), dict):
                object.__setattr__(self, name,
                                   {k: _plain(v) for k, v in getattr(self, name).items()})
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"spatial architecture: name must be a non-empty string, got "
                              f"{self.name!r}")
        for name in ("rows", "cols", "vector_lanes", "sram_bytes", "dma_channels",
                     "channels_per_link", "packet_bytes"):
            v = getattr(self, name)
            self._require(name, v, is_int(v) and v >= 1, "an integer of at least 1")
        self._require("packet_bytes", self.packet_bytes, self.packet_bytes <= MAX_PACKET_BYTES,
                      "an integer of at least 1 and at most 2**62")
        for name in ("clock_ghz", "link_bytes_per_cycle"):
            v = getattr(self, name)
            self._require(name, v, is_number(v, finite=True) and v > 0, "a number above 0")
        for name in ("op_overhead_cycles", "hop_latency_cycles", "transfer_overhead_cycles",
                     "dma_switch_cycles", "feed_bytes_per_cycle", "link_share_cycles"):
            v = getattr(self, name)
            self._require(name, v, is_number(v, finite=True) and v >= 0, "a number of at least 0")
        macs = self.macs_per_cycle
        self._require("macs_per_cycle", macs, isinstance(macs, dict) and "f32" in macs
                      and set(macs) <= set(BY_SHORT),
                      f"a dict of MACs per cycle by dtype ({', '.join(sorted(BY_SHORT))}) with "
                      "an 'f32' rate (used for the dtypes it does not list)")
        for dtype, rate in macs.items():
            self._require(f"macs_per_cycle[{dtype!r}]", rate,
                          is_number(rate, finite=True) and rate > 0,
                          "a number above 0")
        fidelity = self.math_fidelity
        self._require("math_fidelity", fidelity, isinstance(fidelity, dict)
                      and set(fidelity) <= set(BY_SHORT)
                      and all(is_int(v) and 1 <= v <= 4 for v in fidelity.values()),
                      "a dict of matrix-unit passes (1 to 4) by dtype")
        mma = self.min_mma
        self._require("min_mma", mma, isinstance(mma, (tuple, list)) and len(mma) == 3
                      and all(is_int(x) and x >= 1 for x in mma),
                      "three integers (m, n, k) of at least 1")
        self._require("multicast", self.multicast, isinstance(self.multicast, bool),
                      "True or False")
        self._require("timing", self.timing, self.timing in TIMINGS,
                      f"one of {', '.join(map(repr, TIMINGS))}")
        self._require("sources", self.sources, isinstance(self.sources, dict),
                      "a dict (field -> provenance)")
        self._require("dram", self.dram,
                      isinstance(self.dram, (tuple, list)) and len(self.dram) > 0,
                      "a non-empty tuple of DramChannel")
        names: set[str] = set()
        for i, d in enumerate(self.dram):
            self._require(f"dram[{i}]", d, isinstance(d, DramChannel), "a DramChannel")
            self._require(f"dram[{i}].name", d.name, isinstance(d.name, str) and d.name != ""
                          and d.name not in names, "a non-empty name no other channel has")
            names.add(d.name)
            self._require(f"dram[{i}].attach", d.attach, isinstance(d.attach, (tuple, list))
                          and len(d.attach) == 2 and all(is_int(x) for x in d.attach)
                          and 0 <= d.attach[0] < self.rows and 0 <= d.attach[1] < self.cols,
                          f"a PE (row, col) of the {self.rows}x{self.cols} grid")
            self._require(f"dram[{i}].bytes_per_cycle", d.bytes_per_cycle,
                          is_number(d.bytes_per_cycle, finite=True) and d.bytes_per_cycle > 0,
                          "a number above 0")
            self._require(f"dram[{i}].latency_cycles", d.latency_cycles,
                          is_number(d.latency_cycles, finite=True) and d.latency_cycles >= 0,
                          "a number of at least 0")
            self._require(f"dram[{i}].min_burst_bytes", d.min_burst_bytes,
                          is_int(d.min_burst_bytes) and d.min_burst_bytes >= 0,
                          "an integer of at least 0")

    def _require(self, name: str, value: Any, ok: bool, rule: str) -> None:
        if not ok:
            raise ConfigError(f"spatial architecture {self.name!r}: {name} must be {rule}, "
                              f"got {value!r}")

    @property
    def pes(self) -> int:
        return self.rows * self.cols

    def mac_rate(self, dtype: str) -> float:
        """MACs per cycle of one PE's matrix unit on `dtype` (the f32 rate for a dtype it does
        not list), at the dtype's math fidelity."""
        rate = self.macs_per_cycle.get(dtype, self.macs_per_cycle.get("f32", 1.0))
        return rate / self.math_fidelity.get(dtype, 1)

    def peak_macs(self, dtype: str) -> float:
        return self.mac_rate(dtype) * self.pes

    def feed_bytes(self, m: int, n: int, k: int, a_bytes: float, b_bytes: float) -> float:
        """Operand bytes the matrix unit's feed moves for an m x k by k x n product (elements
        of `a_bytes` and `b_bytes` bytes): each A element once per min_mma n output columns,
        each B element once per min_mma m output rows."""
        mm, mn, _ = self.min_mma
        return m * k * math.ceil(n / mn) * a_bytes + k * n * math.ceil(m / mm) * b_bytes

    @property
    def dram_bytes_per_cycle(self) -> float:
        return sum(d.bytes_per_cycle for d in self.dram)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["min_mma"] = list(self.min_mma)
        d["dram"] = [dict(asdict(c), attach=list(c.attach)) for c in self.dram]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Arch:
        _check_keys(cls, d, "spatial architecture")
        d = dict(d)
        for name in ("min_mma", "dram"):
            if not isinstance(d[name], (list, tuple)):
                raise ConfigError(f"spatial architecture: {name} must be a list, got "
                                  f"{d[name]!r}")
        d["min_mma"] = tuple(d["min_mma"])
        dram = []
        for i, c in enumerate(d["dram"]):
            _check_keys(DramChannel, c, f"spatial architecture dram[{i}]")
            if not isinstance(c["attach"], (list, tuple)):
                raise ConfigError(f"spatial architecture dram[{i}]: attach must be a list "
                                  f"[row, col], got {c['attach']!r}")
            dram.append(DramChannel(**dict(c, attach=tuple(c["attach"]))))
        d["dram"] = tuple(dram)
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> Arch:
        try:
            d = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"spatial architecture: not valid JSON: {e}") from None
        return cls.from_dict(d)


def _check_keys(cls: type, d: Any, what: str) -> None:
    """`d` is a dict with every field of dataclass `cls` that has no default, and no others."""
    if not isinstance(d, dict):
        raise ConfigError(f"{what} must be a JSON object, got {type(d).__name__}")
    known = {f.name for f in fields(cls)}
    required = {f.name for f in fields(cls)
                if f.default is MISSING and f.default_factory is MISSING}
    missing, unknown = sorted(required - set(d)), sorted(set(d) - known)
    if missing or unknown:
        raise ConfigError(f"{what}: " + "; ".join(
            ([f"missing fields {', '.join(missing)}"] if missing else [])
            + ([f"unknown fields {', '.join(unknown)}"] if unknown else [])))


def _build(name: str, timing: str, **values: Value | Any) -> Arch:
    plain = {k: (v.value if isinstance(v, Value) else v) for k, v in values.items()}
    sources = {k: v.source for k, v in values.items() if isinstance(v, Value)}
    for k in ("rows", "cols", "vector_lanes", "sram_bytes", "dma_channels", "channels_per_link",
              "packet_bytes"):
        plain[k] = int(plain[k])
    return Arch(name=name, timing=timing, sources=sources, **plain)


def _edge_dram(rows: int, cols: int, total: Value, latency: Value,
               burst: int) -> tuple[DramChannel, ...]:
    """DRAM ports on the west edge (one per row) and the north edge (one per column), sharing
    `total` bytes/cycle: row operands enter from the west, column operands from the north."""
    each = total.value / (rows + cols)
    west = [DramChannel(f"dram_w{r}", (r, 0), each, latency.value, burst) for r in range(rows)]
    north = [DramChannel(f"dram_n{c}", (0, c), each, latency.value, burst) for c in range(cols)]
    return tuple(west + north)


A = "assumed: "
TT = "published: tt-metal tech_reports/GEMM_FLOPS and METALIUM_GUIDE (Wormhole)"
TTL = "published: tt-lang CycleEstimator (Wormhole N300 profile, noc_latencies.yaml)"
AIE = "published: AMD AIE-ML architecture manual AM020 / MLIR-AIE docs"


def _generic() -> Arch:
    dram_bw = Value(256.0, A + "256 B/cycle in all (HBM-class at 1 GHz)")
    lat = Value(300.0, A + "typical DRAM round trip in cycles")
    return _build(
        "generic-8x8", "dataflow",
        rows=Value(8, A + "a square 8x8 mesh"), cols=Value(8, A + "a square 8x8 mesh"),
        clock_ghz=Value(1.0, A + "round number"),
        macs_per_cycle={"bf16": 1024.0, "f16": 1024.0, "f32": 256.0, "i8": 2048.0, "f64": 64.0},
        min_mma=(8, 16, 16), vector_lanes=Value(32, A + "one 32-lane vector unit"),
        sram_bytes=Value(1 << 20, A + "1 MiB per PE"), dma_channels=Value(4, A),
        dma_switch_cycles=Value(32.0, A + "a third of the per-transfer overhead: the other "
                                "stream's descriptor is loaded, its route set up"),
        op_overhead_cycles=Value(16.0, A + "issue cost of one compute step"),
        link_bytes_per_cycle=Value(32.0, A + "256-bit links"),
        hop_latency_cycles=Value(1.0, A), transfer_overhead_cycles=Value(100.0, A),
        channels_per_link=Value(8, A), multicast=True, packet_bytes=Value(2048, A),
        dram=_edge_dram(8, 8, dram_bw, lat, 256),
    )


def _aie_like() -> Arch:
    return _build(
        "aie-like-4x8", "dataflow",
        rows=Value(4, AIE + " (4x8 compute tiles of the Ryzen AI NPU / AIE-ML array)"),
        cols=Value(8, AIE),
        clock_ghz=Value(1.25, AIE + " (AIE-ML 1.25 GHz class)"),
        macs_per_cycle={"bf16": 256.0, "f16": 256.0, "i8": 512.0, "f32": 32.0, "f64": 8.0},
        min_mma=(4, 8, 8), vector_lanes=Value(32, AIE + " (512-bit vector unit)"),
        sram_bytes=Value(64 * 1024, AIE + " (64 KB data memory per compute tile)"),
        dma_channels=Value(4, AIE + " (2 MM2S + 2 S2MM DMA channels per tile)"),
        dma_switch_cycles=Value(16.0, A + "a channel chains buffer descriptors (AM020): the "
                                "next stream's BD is fetched in hardware; its lock is taken"),
        op_overhead_cycles=Value(32.0, A + "kernel call overhead on the core"),
        link_bytes_per_cycle=Value(4.0, AIE + " (32-bit stream switch ports per cycle)"),
        hop_latency_cycles=Value(2.0, A), transfer_overhead_cycles=Value(50.0, A + "BD setup"),
        channels_per_link=Value(6, AIE + " (stream switch ports per direction)"),
        multicast=True, packet_bytes=Value(1024, A),
        dram=_edge_dram(4, 8, Value(64.0, A + "shim DMAs, 64 B/cycle in all"),
                        Value(200.0, A), 128),
    )


# Tenstorrent's matrix unit: 8x16 @ 16x16 a cycle (2048 MACs) per pass; LoFi takes one pass,
# HiFi2 two, HiFi3 three, HiFi4 four (a 32x32x32 tile in 16/32/48/64 cycles).
TENSIX_MACS = {"bf16": 2048.0, "f16": 2048.0, "i8": 2048.0, "f8e4m3": 2048.0, "f8e5m2": 2048.0,
               "f32": 256.0, "f64": 64.0}
TT_FIDELITY = ("published: tt-metal tech_reports/GEMM_FLOPS (cycles per 32x32 tile: LoFi 16, "
               "HiFi2 32, HiFi3 48, HiFi4 64); bf16 and f16 at HiFi2, ttnn's matmul default")
TT_FEED = ("fitted: benchmarks/spatial_validation.py --fit on the training half of tt-metal "
           "tech_reports/GEMM_FLOPS's all-DRAM shapes ({}): no limit (0) fits best or within 1% "
           "of the best (320 B/cycle on Wormhole: rms log ratio 0.564 against 0.569), so none "
           "is set; the term stays for the table's hint (bf16 at HiFi2 tops out below bfp8 at "
           "HiFi2 and bf16 at HiFi4 on the same cores). The one published feed figure is L1's "
           "rate to the unpackers, not this source-register rate: 80 B/cycle (tt-isa-"
           "documentation WormholeB0/TensixTile/L1.md: both unpackers jointly five 128-bit "
           "reads a cycle; tt-metal's eltwise perf model: '80 B/cycle unpacker BW'). The matmul "
           "LLK streams one operand's 32x32 tiles and reuses the other's across a 4-tile "
           "subblock row, 1.25 tiles read per tile product: 80 B/cycle for bf16 at HiFi2 and "
           "for 1-byte data at LoFi, so it does not bind on any validation row")


def _wormhole_like() -> Arch:
    # Wormhole: 2048 / 1024 / 512 MAC/cycle per Tensix at LoFi / HiFi2 / HiFi4 (8x16x16 per cycle
    # at LoFi); bf16 at HiFi2. 288 GB/s DRAM per chip at 1 GHz = 288 B/cycle.
    return _build(
        "wormhole-like", "dataflow",
        rows=Value(8, TT + " (8x8 Tensix grid used for the GEMM report)"), cols=Value(8, TT),
        clock_ghz=Value(1.0, TT),
        macs_per_cycle=Value(dict(TENSIX_MACS), TT + " (8x16 @ 16x16 a cycle per pass)"),
        math_fidelity=Value({"bf16": 2, "f16": 2}, TT_FIDELITY),
        feed_bytes_per_cycle=Value(WORMHOLE_FEED, TT_FEED.format("Wormhole n150")),
        min_mma=(8, 16, 16), vector_lanes=Value(32, TT + " (SFPU 32 lanes)"),
        sram_bytes=Value(1536 * 1024, TT + " (~1.5 MB L1 per Tensix on Wormhole)"),
        dma_channels=Value(4, TT + " (2 data-movement RISC-Vs x 2 NoCs)"),
        dma_switch_cycles=Value(40.0, A + "a data-movement RISC-V turning to another circular "
                                "buffer (cb_reserve_back, get_write_ptr, its address generator)"),
        op_overhead_cycles=Value(20.0, A + "LLK call overhead"),
        link_bytes_per_cycle=Value(25.3, TTL + " (25.3 B/cycle NoC)"),
        hop_latency_cycles=Value(1.0, A), transfer_overhead_cycles=Value(293.0, TTL + " (293-cycle floor)"),
        channels_per_link=Value(16, A + "virtual channels"), multicast=True,
        packet_bytes=Value(2048, TT + " (2 KB bf16 32x32 tile)"),
        dram=_edge_dram(8, 8, Value(288.0, TTL + " (288 GB/s per chip at 1 GHz)"),
                        Value(400.0, A + "DRAM latency"), 256),
    )


def _lpu_like() -> Arch:
    return _build(
        "lpu-like", "static",
        rows=Value(8, A + "functional slices folded onto an 8x8 grid"), cols=Value(8, A),
        clock_ghz=Value(0.9, "published: Abts et al., ISCA 2020 (TSP at 900 MHz)"),
        macs_per_cycle={"bf16": 1024.0, "f16": 1024.0, "i8": 4096.0, "f32": 256.0, "f64": 64.0},
        min_mma=(16, 16, 16), vector_lanes=Value(320, "published: Abts et al., ISCA 2020 (320-lane SIMD)"),
        sram_bytes=Value(3 * 1024 * 1024, A + "220 MiB on-chip SRAM spread over the slices"),
        dma_channels=Value(4, A), op_overhead_cycles=Value(4.0, A + "statically issued"),
        dma_switch_cycles=Value(4.0, A + "the schedule interleaves streams; no handshakes"),
        link_bytes_per_cycle=Value(64.0, A), hop_latency_cycles=Value(1.0, A),
        transfer_overhead_cycles=Value(8.0, A + "no handshakes: the schedule is static"),
        channels_per_link=Value(16, A), multicast=True, packet_bytes=Value(4096, A),
        dram=_edge_dram(8, 8, Value(512.0, A + "host/HBM stream ports"), Value(200.0, A), 512),
    )


def _blackhole_like() -> Arch:
    """Blackhole p150 as tt-metal's GEMM report runs it: a 13x10 Tensix grid at 1.35 GHz. Not
    in `PRESETS` (the test suite sweeps those): named by `preset("blackhole-like")`."""
    w = _wormhole_like()
    return _build(
        "blackhole-like", "dataflow",
        rows=Value(10, TT.replace("Wormhole", "Blackhole p150") + " (13x10 grid of the report)"),
        cols=Value(13, TT.replace("Wormhole", "Blackhole p150")),
        clock_ghz=Value(1.35, TT.replace("Wormhole", "Blackhole p150") + " (1.35 GHz)"),
        macs_per_cycle=Value(dict(TENSIX_MACS), TT + " (the same matrix unit on Blackhole)"),
        math_fidelity=Value({"bf16": 2, "f16": 2}, TT_FIDELITY),
        feed_bytes_per_cycle=Value(BLACKHOLE_FEED, TT_FEED.format("Blackhole p150, 13x10")),
        min_mma=w.min_mma, vector_lanes=Value(32, TT + " (SFPU 32 lanes)"),
        sram_bytes=Value(1536 * 1024, A + "~1.5 MB L1 per Tensix, as on Wormhole"),
        dma_channels=Value(4, TT + " (2 data-movement RISC-Vs x 2 NoCs)"),
        dma_switch_cycles=Value(w.dma_switch_cycles, A + "as on Wormhole"),
        op_overhead_cycles=Value(w.op_overhead_cycles, A + "as on Wormhole"),
        link_bytes_per_cycle=Value(64.0, A + "512-bit NoC links, twice Wormhole's width"),
        hop_latency_cycles=Value(1.0, A), transfer_overhead_cycles=Value(
            w.transfer_overhead_cycles, A + "Wormhole's (tt-lang) per-transfer floor"),
        channels_per_link=Value(16, A + "virtual channels"), multicast=True,
        packet_bytes=Value(2048, TT + " (2 KB bf16 32x32 tile)"),
        dram=_edge_dram(10, 13, Value(512.0 / 1.35, "published: Tenstorrent p150 (512 GB/s "
                                      "GDDR6) at 1.35 GHz"), Value(400.0, A + "as on Wormhole"),
                        256),
    )


# The matrix unit's operand feed, fitted (see TT_FEED): `python benchmarks/spatial_validation.py
# --fit` prints the fit.
WORMHOLE_FEED = 0.0
BLACKHOLE_FEED = 0.0

PRESETS = {"generic-8x8": _generic, "aie-like-4x8": _aie_like, "wormhole-like": _wormhole_like,
           "lpu-like": _lpu_like}

# Presets of silicon with published GEMM measurements, for benchmarks/spatial_validation.py
VALIDATION_PRESETS = {"blackhole-like": _blackhole_like}


def preset(name: str | Arch) -> Arch:
    """An architecture by preset name (or an Arch, returned as is)."""
    if isinstance(name, Arch):
        return name
    if isinstance(name, str) and name in VALIDATION_PRESETS:
        return VALIDATION_PRESETS[name]()
    if not isinstance(name, str) or name not in PRESETS:
        raise BackendError(f"unknown spatial architecture {name!r}; presets: "
                           f"{sorted(PRESETS) + sorted(VALIDATION_PRESETS)} (or an Arch)")
    return PRESETS[name]()
