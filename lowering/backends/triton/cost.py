"""The Triton backend's cost model: predicted microseconds of a config on an H100, from the
lowered IR and the kernels' resource usage.

The roofline of the tile traffic and FLOPs, derated by how many programs fit on an SM
(registers, shared memory, warps) and by the last partial wave; spills add their local-memory
traffic; loads and math add up instead of overlapping when nothing can run meanwhile (one
pipeline stage, one program per SM). It ranks configs; it does not time them.

The resource usage is either measured (a compiled cubin's, autotune/model.py) or guessed
before compiling (`estimated_resources`, the config space's `estimate`), so a tuner can rank a
whole space without compiling anything and start from the configs it ranks best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lowering.backends.triton.emit import padded
from lowering.backends.triton.registers import MAX_REGISTERS, feeds_dots_only, uses_of
from lowering.backends.triton.registers import registers as register_estimate
from tiledsl.runtime.config import Config
from tiledsl.ir.bounds import interval
from tiledsl.ir.core import Function, loop_ranges, loop_start, loop_stop, walk
from tiledsl.ir.types import UNBOUNDED, TensorType, TileType

EPILOGUE_MATH = frozenset({"erf", "exp", "exp2", "log", "tanh", "sigmoid", "sqrt", "rsqrt"})

# An H100 SXM, as published by NVIDIA (dense).
H100 = {"sms": 132, "tflops": {"f16": 989.0, "bf16": 989.0, "f32": 67.0, "i8": 1979.0,
                               "f64": 67.0, "f8e4m3": 1979.0, "f8e5m2": 1979.0},
        "hbm_gbps": 3350.0, "regs_per_sm": 65536, "smem_per_sm": 228 * 1024,
        "max_warps_per_sm": 64, "max_programs_per_sm": 32, "launch_us": 3.0,
        "program_us": 1.0, "clock_ghz": 1.98}
# An A100 SXM (80 GB), likewise.
A100 = {"sms": 108, "tflops": {"f16": 312.0, "bf16": 312.0, "f32": 19.5, "i8": 624.0,
                               "f64": 19.5},
        "hbm_gbps": 2039.0, "regs_per_sm": 65536, "smem_per_sm": 164 * 1024,
        "max_warps_per_sm": 64, "max_programs_per_sm": 32, "launch_us": 3.0,
        "program_us": 1.0, "clock_ghz": 1.41}
GPUS = {"sm_80": A100, "sm_90": H100}


def gpu_for(arch: str) -> dict[str, Any]:
    """The model of `arch`: an A100's before Hopper (sm_86 and sm_89 included), an H100's
    from it."""
    return H100 if int(arch.removeprefix("sm_")) >= 90 else A100
# Each trip of a loop that feeds the tensor cores waits for its stage's loads, then issues its
# MMAs and the next addresses: a cost per trip, in cycles, that short K blocks pay many times
# (on an H200, BLOCK_K=16 ran 1.5x slower than 64 at 8192^3). TMA hands the addresses to the
# copy engine (SASS at 128x256x64, 8 warps: 86 instructions per trip against 102). Fitted on
# the H200's GEMM timings (benchmarks/results/h200-run2/gemm.json).
TRIP_CYCLES = 160
TMA_TRIP_SAVING = 20
# Two stages leave each trip's loads one trip to land, not enough for DRAM's latency: at
# 128x256x64 (4096^3 fp16) 2 stages took 0.263 ms where 3 took 0.189 on the H200, about 570
# cycles more per trip (benchmarks/results/h200-run3/tune.json).
TWO_STAGE_TRIP_CYCLES = 570
# A loop with math beside its dots (attention's softmax) issues more per tile at 8 warps than at
# 4: each warpgroup keeps its own row state and loop bookkeeping (SASS at 128x64, d64, TMA: 1255
# instructions a warp at 8 warps against 1991 at 4, 26% more a tile; 15% more in the loop after
# the exp2 and scale folds, issue 30). Per extra warpgroup, on the trip's cycles.
WARPGROUP_ISSUE = 0.15
# A persistent kernel overlaps the next tile's pipeline fill with this tile's epilogue, unless
# the epilogue is heavy math (a GELU): then the accumulator and the next tile's buffers
# compete (GEMM+bias+GELU at 128x128x64 on the H200: 1.27x slower persistent).
PERSISTENT_HEAVY_EPILOGUE = 1.2


@dataclass(frozen=True)
class Resources:
    """What one compiled kernel uses per program."""

    num_warps: int
    registers: int  # per thread
    shared_bytes: int  # dynamic and static shared memory
    spill_bytes: int  # local memory per thread


def predict_us(fn: Function, config: Config, resources: list[Resources],
               gpu: dict[str, Any] = H100) -> float:
    """Predicted microseconds of lowered function `fn` under `config` on `gpu`."""
    blocks = fn.block_values(config.block_sizes)

    def size(d: Any) -> int:
        return blocks.get(d, d) if isinstance(d, str) else d

    flops, traffic, dtype, programs = 0.0, 0.0, "f32", 1
    for op in walk(fn.body):
        if op.name == "grid":
            programs = math.prod(-(-r.type.extent // size(r.type.block))
                                 for r in op.regions[0].args)  # type: ignore[union-attr]
    trips = _trip_counts(fn, blocks)
    for op in walk(fn.body):
        mult = trips.get(id(op), 1)
        if op.name == "dot":
            a, b = (o.type for o in op.operands)
            assert isinstance(a, TileType) and isinstance(b, TileType)
            m, k, n = (size(d) for d in (*a.shape[-2:], b.shape[-1]))
            batch = size(a.shape[0]) if a.rank == 3 else 1
            flops += 2.0 * batch * m * k * n * mult * programs
            dtype = a.dtype.short
        elif op.name in ("load", "store"):
            tt = op.result.type if op.name == "load" else op.operands[-1].type
            tensor = op.operands[0].type
            assert isinstance(tt, TileType) and isinstance(tensor, TensorType)
            elems = math.prod(size(d) for d in tt.shape)
            traffic += elems * tensor.dtype.bits / 8 * mult * programs
    # L2 catches re-reads of shared operands; grouped ordering helps it (a rough factor).
    traffic /= 4.0 if config.get("group_m", 1) > 1 else 2.0
    threads = 32 * max(r.num_warps for r in resources)
    regs = max(r.registers for r in resources)
    smem = max(r.shared_bytes for r in resources)
    per_sm = min(gpu["regs_per_sm"] // max(1, regs * threads),
                 gpu["smem_per_sm"] // max(1, smem) if smem else 32,
                 gpu["max_warps_per_sm"] * 32 // threads, gpu["max_programs_per_sm"]) or 1
    waves = programs / (gpu["sms"] * per_sm)
    quantization = math.ceil(waves) / waves if waves > 0 else 1.0
    # Spilled values (a GEMM's accumulator) go out and come back in every trip of the hot
    # loop, not once per program: 512 bytes per thread over a 64-trip K loop is 64 reloads.
    hot = max(trips.values(), default=1)
    spill = sum(r.spill_bytes for r in resources) * threads * programs * hot
    t_compute = flops / (gpu["tflops"].get(dtype, 67.0) * 1e12)
    t_memory = (traffic + 2 * spill) / (gpu["hbm_gbps"] * 1e9)
    # Loads overlap the math only when something runs meanwhile: a second pipeline stage (the
    # next iteration's loads in flight) or a second program on the SM. One stage and one
    # program per SM wait for each load, then compute.
    overlapped = (config.num_stages or 3) >= 2 or per_sm >= 2
    t_compute += _trips_us(fn, config, trips, waves, gpu) * 1e-6
    t_body = max(t_compute, t_memory) if overlapped else t_compute + t_memory
    if config.get("persistent", False) and heavy_epilogue(fn):
        t_body *= PERSISTENT_HEAVY_EPILOGUE
    occupancy = min(1.0, per_sm * threads / 256)  # latency hiding needs ~8 warps per SM
    # A wave of programs takes at least one dependent load-to-store round trip through DRAM,
    # whatever its tiles: a vector add of a million elements in programs of one element
    # (249 waves) is not at the roofline.
    t_floor = math.ceil(waves) * gpu["program_us"] * 1e-6
    return max(t_body * quantization / max(occupancy, 0.25), t_floor) * 1e6 + gpu["launch_us"]


def _trips_us(fn: Function, config: Config, trips: dict[int, int], waves: float,
              gpu: dict[str, Any]) -> float:
    """Microseconds the SMs spend on the trips of loops that feed the tensor cores
    (TRIP_CYCLES), less what a persistent kernel hides: each tile's pipeline fill."""
    mma_trips = max((trips.get(id(op), 1) for op in walk(fn.body) if op.name == "dot"),
                    default=0)
    if mma_trips <= 1:
        return 0.0
    per_trip = TRIP_CYCLES - (TMA_TRIP_SAVING if config.get("tma", False) else 0)
    if int(config.num_stages or 3) == 2:
        per_trip += TWO_STAGE_TRIP_CYCLES
    if looped_math(fn):  # each warpgroup beyond the first issues the row math again
        per_trip *= 1 + WARPGROUP_ISSUE * max(0, int(config.num_warps or 4) // 4 - 1)
    if config.get("persistent", False) and not heavy_epilogue(fn):
        mma_trips = max(1, mma_trips - max(0, int(config.num_stages or 3) - 1))
    return math.ceil(waves) * mma_trips * per_trip / (gpu["clock_ghz"] * 1e3)


def looped_math(fn: Function) -> bool:
    """Transcendental math in a loop beside its dots (attention's online softmax)."""
    return any(op.name in EPILOGUE_MATH for loop in walk(fn.body) if loop.name == "for"
               and any(o.name == "dot" for o in walk(loop.regions[0]))
               for op in walk(loop.regions[0]))


def heavy_epilogue(fn: Function) -> bool:
    """Transcendental math on a dot result's shape after the dot's loop (a GELU epilogue; not
    attention's exp, which runs in the loop beside its dots)."""
    looped = {id(op) for loop in walk(fn.body) if loop.name == "for"
              and any(o.name == "dot" for o in walk(loop.regions[0]))
              for op in walk(loop.regions[0])}
    shapes = {op.result.type.shape for op in walk(fn.body) if op.name == "dot"}  # type: ignore[union-attr]
    return any(op.name in EPILOGUE_MATH and id(op) not in looped and op.results and
               isinstance(op.results[0].type, TileType) and op.results[0].type.shape in shapes
               for op in walk(fn.body))


def _trip_counts(fn: Function, blocks: dict[str, int]) -> dict[int, int]:
    """How many times each op runs per program (the product of its enclosing loop trips). A
    loop to a runtime size with no static bound is priced as running over the largest
    dimension of the kernel's tensors (a grouped GEMM's row loop: all the rows)."""
    out: dict[int, int] = {}
    typical = max((d for a in fn.args if isinstance(a.type, TensorType) for d in a.type.shape),
                  default=1)

    def visit(block: Any, mult: int) -> None:
        for op in block.ops:
            out[id(op)] = mult
            if op.name == "for" and op.attrs.get("stride"):  # a program's share of the tiles
                tiles = math.prod(-(-r.type.extent // size_of(r.type.block, blocks))  # type: ignore
                                  for r in loop_ranges(op))
                visit(op.regions[0], mult * -(-tiles // op.attrs["stride"]))
            elif op.name == "for":
                r = op.regions[0].args[0].type
                b = blocks.get(r.block, r.block) if isinstance(r.block, str) else r.block
                extent = r.extent if r.extent != UNBOUNDED else typical
                visit(op.regions[0], mult * _mean_trips(op, extent, b))
            else:  # a grid, the branches of an `if` (counted as if taken), or a `while` loop's
                # body (counted once: its trips are known only when it runs)
                for region in op.regions:
                    visit(region, mult)
    visit(fn.body, 1)
    return out


def size_of(d: Any, blocks: dict[str, int]) -> int:
    return blocks.get(d, d) if isinstance(d, str) else d


def _mean_trips(op: Any, extent: int, block: int) -> int:
    """A loop's trip count, averaged over programs for a `td.tile(stop)` loop: the middle of the
    stop's static interval (`tq.end` over [1, seq] gives about half the tiles, as causal
    attention runs)."""
    stop, start = loop_stop(op), loop_start(op)
    bound = None if stop is None else interval(stop)
    if bound is None:
        return -(-extent // block)
    lo, hi = max(bound[0], 0), min(bound[1], extent)
    first = None if start is None else interval(start)  # a start skips the tiles before it
    skipped = 0 if first is None else max(0, (first[0] + first[1]) // 2) // block
    return max(1, -(-((lo + hi) // 2) // block) - skipped)


def numel(t: TileType, blocks: dict[str, int]) -> int:
    """Elements of a tile under these block sizes (fixed dimensions padded to a power of two)."""
    return math.prod(blocks[d] if isinstance(d, str) else padded(d) for d in t.shape)


@dataclass(frozen=True)
class SharedTiles:
    """What a function keeps in shared memory, read from its IR (`shared_tiles`): each
    dot-operand load as (type, whether in a loop), and each stored 2-D tile's type."""

    staged: tuple[tuple[TileType, bool], ...]
    stored: tuple[tuple[TileType, TensorType], ...]


def shared_tiles(fn: Function) -> SharedTiles:
    """The IR's part of `shared_bytes`: a search over a space's whole product reads it once."""
    ops = list(walk(fn.body))
    uses = uses_of(ops)
    in_loops = {id(op) for loop in ops if loop.name == "for" for op in walk(loop.regions[0])}
    staged = tuple((op.result.type, id(op) in in_loops) for op in ops  # type: ignore[misc]
                   if op.name == "load" and feeds_dots_only(op.result, uses))
    stored = tuple((op.operands[-1].type, op.operands[0].type) for op in ops  # type: ignore
                   if op.name == "store" and isinstance(op.operands[-1].type, TileType)
                   and op.operands[-1].type.rank >= 2
                   and isinstance(op.operands[0].type, TensorType))
    return SharedTiles(staged, stored)


def epilogue_shared_bytes(fn: Function, config: Config, tiles: SharedTiles | None = None
                          ) -> int:
    """Shared memory a persistent TMA kernel keeps for its output tile: its descriptor store
    stages the tile there while the next tile's loads are in flight (128x256 fp16: 64 KiB;
    sm_90, 3 stages: 144 KiB without it, 208 KiB with it). Non-persistent kernels reuse the
    pipeline's buffers."""
    if not (config.get("tma", False) and config.get("persistent", False)):
        return 0
    blocks = fn.block_values(config.block_sizes)
    return max((numel(tile, blocks) * tensor.dtype.bits // 8
                for tile, tensor in (tiles or shared_tiles(fn)).stored), default=0)


def shared_bytes(fn: Function, config: Config, tiles: SharedTiles | None = None) -> int:
    """Shared memory a config needs: every tile loaded for the tensor cores (once if loaded
    before the loop, once per pipeline stage if loaded in it), and the output tile of a
    persistent TMA epilogue. Causal attention at 128x128, d128, 3 stages, TMA and persistent:
    q once, k and v three times, the output tile once, 262,144 bytes (compiled: 263,168);
    counting each dot's operands per stage said 229,376 and let it past an H100's 232,448.
    `tiles`: `shared_tiles(fn)`, where the caller prices many configs."""
    tiles = tiles or shared_tiles(fn)
    blocks = fn.block_values(config.block_sizes)
    stages = int(config.get("num_stages", 3) or 3)
    operands = sum(numel(t, blocks) * t.dtype.bits // 8 * (stages if looped else 1)
                   for t, looped in tiles.staged)
    return operands + epilogue_shared_bytes(fn, config, tiles)


def estimated_resources(fn: Function, config: Config) -> list[Resources]:
    """What the kernels will use, guessed without compiling: registers for the tiles live at
    once (registers.py), spilling past 255; shared memory for the dot operands of every
    pipeline stage and a persistent TMA epilogue."""
    blocks = fn.block_values(config.block_sizes)
    warps = int(config.num_warps or 4)
    needed = register_estimate(fn, blocks, warps, bool(config.get("tma", False)),
                               int(config.num_stages or 3))
    registers = min(MAX_REGISTERS, needed)
    shared = shared_bytes(fn, config)
    return [Resources(warps, registers, shared, 4 * max(0, needed - MAX_REGISTERS))]


def estimate_us(fn: Function, config: Config, gpu: dict[str, Any] = H100) -> float:
    """The predicted microseconds of `config` on `gpu` with estimated resources (no
    compile)."""
    return predict_us(fn, config, estimated_resources(fn, config), gpu)
