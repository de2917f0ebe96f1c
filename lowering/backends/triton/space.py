"""The Triton backend's knobs, the constraints that rule configs out before any compile, and the
cost model's estimate that ranks the rest (cost.py)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from lowering.backends.triton.cost import (EPILOGUE_MATH, estimate_us, gpu_for, heavy_epilogue,
                                           numel, shared_bytes, shared_tiles)
from lowering.backends.triton.emit import in_bounds, padded, tl_dot_takes
from lowering.backends.triton.widen import MMA_MIN_K8, mma_min
from tiledsl import dtypes
from tiledsl.runtime.config import Config, ConfigSpace, Constraint, Param
from tiledsl.ir.core import Function, block_index, walk
from tiledsl.ir.slices import slices_of
from tiledsl.ir.types import RangeType, TensorType, TileType

MAX_NUMEL = 1 << 20  # Triton's limit on the elements of one tile
MAX_PER_THREAD = 128  # values of the largest tile per thread: beyond this, registers spill
                      # (a 65536-element row spilled 3264 to 4832 bytes at 256 per thread)
DOT_MIN = 16  # tl.dot needs M, N, K >= 16
SHARED_BYTES = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_89": 99 * 1024,
                "sm_90": 227 * 1024}
DEFAULT_TILE = 2048  # elements of the largest tile under the default blocks, without dots
FP32_DOT_WORDS = 48  # per thread at 8 warps: all fp32 dots' operands and results, by default
FMA_DOT_STAGES = 2  # the default pipeline depth of kernels whose dots run on FMAs
WORDS_PER_THREAD = 64  # of the largest tile under the default blocks, before the default
                       # number of warps doubles
WARPS = (2, 4, 8)
WIDE_WARPS = (16, 32)  # offered when even the smallest blocks need them (vocabulary-wide rows)
# what Triton compiles, which a config may pin though the search does not try it (Helion's
# longsum pins `num_warps=32, num_stages=5`)
PINNABLE_WARPS = (1, 2, 4, 8, 16, 32)
PINNABLE_STAGES = tuple(range(1, 9))
SMS = 132  # an H100's SMs
MIN_PROGRAMS = 4 * SMS  # the grid the default aims for: programs to hide each other's latency
# The tensor-core GEMM defaults tried, best first (block M, N, K, warps): Triton's matmul
# tutorial's Hopper configs and the old 64x64x64 default, all with 3 stages. The cost model
# (cost.py) picks one, so a small problem keeps enough programs.
MMA_CANDIDATES = ((128, 256, 64, 8), (128, 128, 64, 8), (64, 128, 64, 4), (64, 64, 64, 4))
MMA_STAGES = 3
ACC_WORDS = 128  # fp32 dot results per thread under the default (128x256 over 8 warps); half
                 # when transcendental math runs on them after the loop: gemm_bias_gelu's erf
                 # at 128x256, 8 warps spilled 120 bytes per thread on sm_90, at 128x128 none


def _facts(fn: Function) -> tuple[list[TileType], dict[str, int],
                                  list[tuple[TileType, TileType]]]:
    """The kernel's tiles (with the products of the dots that become a multiply and a sum),
    the block symbols tl.dot sees with the least block each may have (widen.py `mma_min`),
    and the dots' operand types."""
    tiles: list[TileType] = []
    dot_dims: dict[str, int] = {}
    dots = []
    for op in walk(fn.body):
        for r in op.results:
            if isinstance(r.type, TileType):
                tiles.append(r.type)
        if op.name == "dot":
            a, b = (o.type for o in op.operands)
            assert isinstance(a, TileType) and isinstance(b, TileType)
            dots.append((a, b))
            if tl_dot_takes(a.dtype):
                roles = [(None, d) for d in a.shape[:-2]] + \
                    [("m", a.shape[-2]), ("k", a.shape[-1]), ("n", b.shape[-1])]
                for role, d in roles:
                    if isinstance(d, str):
                        need = DOT_MIN if role is None else mma_min(a.dtype.bits, role)
                        dot_dims[d] = max(dot_dims.get(d, 0), need)
            else:
                tiles.append(_product_tile(a, b))
    return tiles, dot_dims, dots


def _product_tile(a: TileType, b: TileType) -> TileType:
    """The elementwise products `a[:, :, None] * b[None, :, :]` of a dot that tl.dot does not
    take (int16 to int64), which emit.py sums over axis 1."""
    return TileType(a.shape + b.shape[-1:], dtypes.accumulator(a.dtype))


def _grids(fn: Function) -> list[list[RangeType]]:
    """The ranges of each launch grid, outermost first."""
    return [[a.type for a in op.regions[0].args if isinstance(a.type, RangeType)]
            for op in fn.body.ops if op.name == "grid"]


def _programs(grids: list[list[RangeType]], blocks: dict[str, int]) -> int:
    """Programs of the smallest grid under these blocks."""
    return min((math.prod(-(-r.extent // (blocks[r.block] if isinstance(r.block, str)
                                           else r.block)) for r in g) for g in grids), default=1)


def _default_tiles_of(space: ConfigSpace, tiles: list[TileType], symbols: dict[str, int],
                      grids: list[list[RangeType]]) -> ConfigSpace:
    """Default blocks that make the largest tile of a kernel without dots DEFAULT_TILE elements
    (or as near as its extents allow), as Triton's tutorials size them (1024 for a vector add,
    whole rows a few at a time for a softmax), with at least MIN_PROGRAMS programs where tiles
    of DEFAULT_TILE elements allow (a grid block halves only where a loop block can double).
    Loop blocks shrink first, grid blocks last: a row sum over
    8192x4096 at 32x64 ran 256 programs on 132 SMs (the model: 49.5 us; 8x256, 1024
    programs: 17 us). The generic default of 64 per dimension gave a softmax over 300 fp32
    columns 64 rows of 512 (it spilled 3336 bytes per thread on sm_90 with 4 warps)."""
    params = _block_params(space, symbols)
    blocks = {s: p.default for s, p in params.items()}
    if not tiles or not blocks:
        return space
    in_grid = {r.block for g in grids for r in g if isinstance(r.block, str)}

    def largest(b: dict[str, int]) -> TileType:
        return max(tiles, key=lambda t: numel(t, b))

    def step(b: dict[str, int], sym: str, up: bool) -> int | None:
        return _step(params[sym], b[sym], up)

    def grow(b: dict[str, int], grid_too: bool) -> dict[str, int]:
        """Double the innermost block that keeps the largest tile within DEFAULT_TILE (a grid
        block only if `grid_too`, and not to below MIN_PROGRAMS programs)."""
        grown = True
        while grown:
            grown = False
            for d in reversed(largest(b).shape):
                if isinstance(d, str) and (up := step(b, d, True)) is not None:
                    trial = {**b, d: up}
                    if max(numel(t, trial) for t in tiles) <= DEFAULT_TILE and (
                            d not in in_grid or grid_too and (
                                _programs(grids, trial) >= MIN_PROGRAMS
                                or _programs(grids, b) < MIN_PROGRAMS)):
                        b, grown = trial, True
                        break
        return b

    while numel(largest(blocks), blocks) > DEFAULT_TILE:  # halve the largest block, loops first
        dims = [d for d in largest(blocks).shape if isinstance(d, str) and step(blocks, d, False)]
        if not dims:
            break
        sym = max(dims, key=lambda d: (blocks[d], d not in in_grid))
        blocks[sym] = step(blocks, sym, False) or blocks[sym]
    blocks = grow(blocks, True)
    while _programs(grids, blocks) < MIN_PROGRAMS:  # halve the outermost grid block
        dims = [d for d in largest(blocks).shape if d in in_grid and step(blocks, d, False)]
        if not dims:
            break
        trial = grow({**blocks, dims[0]: step(blocks, dims[0], False) or blocks[dims[0]]},
                     False)
        if numel(largest(trial), trial) < DEFAULT_TILE:
            break
        blocks = trial
    return _with_default_blocks(space, params, blocks)


def _default_fp32_dot_blocks(space: ConfigSpace, dots: list[tuple[TileType, TileType]],
                             symbols: dict[str, int]) -> ConfigSpace:
    """Halve the largest default block of the fp32 dots until their operands and results
    together fit FP32_DOT_WORDS per thread at 8 warps. fp32 dots run on FMAs, from registers:
    attention's two fp32 dots at 64x64 spilled 312 bytes per thread at 8 warps on sm_90 (more
    at 16), at 32x32 none. So do integer dots that tl.dot does not take, with their products
    (an int16 matmul at 64x64x64 spilled 13736 bytes per thread with 4 warps).

    Such kernels then default to FMA_DOT_STAGES: under triton 3.6, sm_90, an fp32 GEMM with a
    bias + GELU epilogue at 1024^3, 64x64x64, 8 warps compiled to 32 registers and 3432 bytes
    of spills per thread at 3 or 4 stages (2964 SASS instructions per K trip; triton 3.9:
    1226), and to 108 registers, no spills and 1190 instructions at 2 (triton 3.9: 80 and
    1195). A trip of some 1200 instructions per warp hides a global load without a deeper
    pipeline; plain fp32 matmul: 1211 instructions at 3 stages, 1190 at 2."""
    params = _block_params(space, symbols)
    blocks = {s: p.default for s, p in params.items()}
    while _fp32_dot_words(dots, blocks) > FP32_DOT_WORDS * 32 * 8:
        dims = [d for t in _fp32_dot_tiles(dots) for d in t.shape
                if isinstance(d, str) and (_step(params[d], blocks[d], False) or 0) >= DOT_MIN]
        if not dims:
            break
        sym = max(dims, key=lambda d: blocks[d])
        blocks[sym] = _step(params[sym], blocks[sym], False) or blocks[sym]
    return _with_default_blocks(space, params, blocks)


def _mma_roles(dots: list[tuple[TileType, TileType]]) -> dict[str, int]:
    """Each block symbol of the dots as an index into MMA_CANDIDATES' (M, N, K): a symbol that
    some dot reduces over is K (attention's key block: 64, as in Triton's tutorial), one that
    indexes some dot's rows is M, the rest N."""
    reduced = {a.shape[1] for a, _ in dots}
    rows = {a.shape[0] for a, _ in dots}
    dims = {d for a, b in dots for d in (*a.shape, b.shape[1]) if isinstance(d, str)}
    return {d: 2 if d in reduced else 0 if d in rows else 1 for d in dims}


def _default_mma(space: ConfigSpace, fn: Function, dots: list[tuple[TileType, TileType]],
                 symbols: dict[str, int], arch: str) -> ConfigSpace:
    """The tensor-core dots' default: of MMA_CANDIDATES (clamped to the extents) in the space
    whose fp32 results stay within ACC_WORDS per thread, and that fill the SMs (or, if none
    does, run the most programs), the one the cost model prices lowest (estimated resources,
    no compile; ties, as blocks clamped to the same extents, go to fewer warps). The model
    alone gave a 512^3 GEMM 128x256 blocks: 8 programs on 132 SMs."""
    params = _block_params(space, symbols)
    roles = _mma_roles(dots)
    limit = ACC_WORDS // (2 if heavy_epilogue(fn) else 1)
    base = {p.name: p.default for p in space.params}
    grids = _grids(fn)
    fits: list[tuple[int, Config]] = []  # (programs, config)
    for cand in MMA_CANDIDATES:
        values = {**base, "num_warps": cand[3], "num_stages": MMA_STAGES}
        for sym, p in params.items():
            if sym in roles:
                values[p.name] = min(cand[roles[sym]], max(p.choices))
        config = space.make(values)
        blocks = fn.block_values(config.block_sizes)
        words = sum(numel(TileType((a.shape[0], b.shape[1]), dtypes.float32), blocks)
                    for a, b in dots)
        if words <= limit * 32 * cand[3] and space.reason(config) is None:
            fits.append((_programs(grids, blocks), config))
    if not fits:
        return space
    most = max(n for n, _ in fits)
    gpu = gpu_for(arch)
    pool = [c for n, c in fits if n >= min(gpu["sms"], most)]
    best = min(pool, key=lambda c: (estimate_us(fn, c, gpu), c.num_warps))
    best = _hopper_knobs(space, fn, best, arch)
    for name, value in space.values(best).items():
        space = space.with_default(name, value)
    return space


def shared_limit(arch: str) -> int:
    """Shared memory a program may take on `arch` (an unlisted one: its generation's)."""
    if arch in SHARED_BYTES:
        return SHARED_BYTES[arch]
    capability = int(arch.removeprefix("sm_"))
    return SHARED_BYTES["sm_90"] if capability >= 90 else SHARED_BYTES["sm_86"] \
        if capability > 80 else 48 * 1024


def _hopper_knobs(space: ConfigSpace, fn: Function, config: Config, arch: str) -> Config:
    """On sm_90, a GEMM without heavy epilogue math loads through TMA in a persistent grid: on
    an H200 that ran 1-2.5% faster than pointer loads at the same tiles in all 8 GEMM cases
    (fp16/bf16, 4096^3 to 8192^3 and two LLM shapes), where GEMM+bias+GELU ran 1.04x slower
    with TMA and 1.27x slower persistent (benchmarks/results/h200-run2/gemm.json). Causal
    attention takes TMA (2-6% faster at its best tiles, h200-run3/rows.json), not persistence."""
    if int(arch.removeprefix("sm_")) < 90 or heavy_epilogue(fn) or "tma" not in space.values(
            config):
        return config
    # a persistent grid only for plain GEMMs: attention's was not measured
    plain = not any(op.name in EPILOGUE_MATH for op in walk(fn.body))
    for knobs in ({"tma": True, "persistent": True} if plain else {"tma": True}, {"tma": True}):
        candidate = config.replace(**knobs)
        if space.reason(candidate) is None and space.duplicate(candidate) is None:
            return candidate
    return config


def _tma_idle(fn: Function) -> Callable[[Config], str | None]:
    """The redundancy rule of `tma=True`: no load or store could take a tensor descriptor
    (emit.py `descriptor`) under the config, so it generates what `tma=False` does. An access
    can when it has 2 to 5 dimensions, each a tile, `:` or a scalar index that stays in range
    (emit.py `in_bounds`), no padded constant block, boxes of at most 256 with 16 bytes or more in
    the last, and loads whose masked lanes read zero. Strides, and whether a loop's runtime
    stop cuts its tiles, are not known here: they count as fit."""
    boxes: list[tuple[tuple[int | str, ...], int]] = []  # (box dims, element bytes)
    for op in walk(fn.body):
        if op.name not in ("load", "store"):
            continue
        tensor = op.operands[0].type
        assert isinstance(tensor, TensorType)
        if not 2 <= len(tensor.shape) <= 5 or op.attrs.get("mask") or \
                op.attrs.get("other") not in (None, 0, 0.0, False):
            continue
        indices = iter(op.operands[1:])
        box: list[int | str] = []
        for d, extent in enumerate(tensor.shape):
            if d in op.attrs.get("full", ()):
                part = slices_of(op.attrs).get(d)
                if part is not None and (part.step != 1 or padded(part.size) != part.size):
                    break  # as emit.py `descriptor`: no box for this slice
                box.append(part.size if part is not None else padded(extent))
                continue
            idx = next(indices)
            r = idx.type
            if isinstance(r, RangeType) and r.shifted:
                break  # shifted tiles take pointers (shift_rules.py)
            if not isinstance(r, RangeType):
                if not in_bounds(idx, extent):
                    break
                box.append(1)  # a scalar index: a box of 1 (attention's k[b, tk, :])
                continue
            if isinstance(r.block, int) and padded(r.block) != r.block:
                break
            box.append(r.block)
        else:
            boxes.append((tuple(box), tensor.dtype.bits // 8))

    def idle(c: Config) -> str | None:
        if not c.get("tma", False):
            return None
        blocks = fn.block_values(c.block_sizes)
        for box, size in boxes:
            dims = [blocks[d] if isinstance(d, str) else d for d in box]
            if max(dims) <= 256 and dims[-1] * size >= 16:
                return None
        return "tma=True generates what tma=False does: no access can take a tensor descriptor"
    return idle


def _default_warps(space: ConfigSpace, words: int) -> ConfigSpace:
    """The fewest warps (at least 4) holding `words` 32-bit words of the largest tile within
    WORDS_PER_THREAD each, else the most. On sm_90, 4 warps spilled 440 bytes per thread for an
    fp32 batched matmul, 8 none; layer norm over 32000 fp32 columns used 254 registers at 8
    warps, 128 at 16; over 50257 (65536 words, the whole register file) every count spills,
    32 warps least (rms norm 320 bytes vs 3264 at 8, softmax none)."""
    choices = next(p.choices for p in space.params if p.name == "num_warps")
    fit = [w for w in choices if w >= 4 and words <= WORDS_PER_THREAD * 32 * w]
    return space.with_default("num_warps", min(fit) if fit else max(choices))


def _fp32_dot_tiles(dots: list[tuple[TileType, TileType]]) -> list[TileType]:
    """The operands and results of the dots that run on FMAs, from registers: fp32 dots, and
    the multiply-and-sum of those tl.dot does not take, with their products."""
    out: list[TileType] = []
    for a, b in dots:
        if a.dtype.short == "f32" or not tl_dot_takes(a.dtype):
            out += [a, b, TileType((a.shape[0], b.shape[1]), dtypes.accumulator(a.dtype))]
        if not tl_dot_takes(a.dtype):
            out.append(_product_tile(a, b))
    return out


def _fp32_dot_words(dots: list[tuple[TileType, TileType]], blocks: dict[str, int]) -> int:
    return sum(numel(t, blocks) for t in _fp32_dot_tiles(dots))


def _block_params(space: ConfigSpace, symbols: dict[str, int]) -> dict[str, Param]:
    """Each symbol's block param (`symbols`: `block_index` of the function's symbols)."""
    params = {p.name: p for p in space.params}
    return {s: params[f"block_sizes[{i}]"] for s, i in symbols.items()
            if f"block_sizes[{i}]" in params}


def _step(param: Param, block: int, up: bool) -> int | None:
    """The next larger (or smaller) choice of a block param, if any."""
    options = sorted(c for c in param.choices if (c > block if up else c < block))
    return (options[0] if up else options[-1]) if options else None


def _with_default_blocks(space: ConfigSpace, params: dict[str, Param],
                         blocks: dict[str, int]) -> ConfigSpace:
    for sym, p in params.items():
        if blocks[sym] != p.default:
            space = space.with_default(p.name, blocks[sym])
    return space


def _words(tiles: list[TileType], dots: list[tuple[TileType, TileType]],
           blocks: dict[str, int]) -> int:
    """32-bit words a program holds at most: the largest tile, or all fp32 dots' operands and
    results together (they run on FMAs, from registers)."""
    held = [numel(t, blocks) * max(t.dtype.bits, 32) // 32 for t in tiles]
    return max(held + [_fp32_dot_words(dots, blocks)])


def extend(space: ConfigSpace, fn: Function, arch: str = "sm_90") -> ConfigSpace:
    """Add num_warps, num_stages, group_m, tma and persistent, the constraints known before
    compiling, the redundancy of tma, the cost model's estimate, and the default config."""
    tiles, dot_dims, dots = _facts(fn)
    symbols = block_index(fn.symbols)  # each symbol's block param (tied ones too)
    smallest = {s: min(p.choices) for s, p in _block_params(space, symbols).items()}
    wide = _words(tiles, dots, smallest) > WORDS_PER_THREAD * 32 * max(WARPS)
    space = space.with_param(Param("num_warps", WARPS + (WIDE_WARPS if wide else ()), 4,
                                   "warps per program", PINNABLE_WARPS))
    space = space.with_param(Param("num_stages", (1, 2, 3, 4), 3, "software pipeline depth",
                                   PINNABLE_STAGES))
    grid_2d = any(op.name == "grid" and len(op.regions[0].args) == 2 for op in fn.body.ops)
    if grid_2d:  # grouped order pays where neighbouring programs share operand tiles (a dot's)
        space = space.with_param(Param("group_m", (1, 4, 8), 8 if dots else 1,
                                       "L2-friendly program order"))
    if dots:  # Hopper knobs, for the kernels they are made for (GEMM-like ones)
        space = space.with_param(Param("tma", (False, True), False,
                                       "tensor descriptors (TMA on sm_90; plain loads before)"))
        space = space.with_param(Param("persistent", (False, True), False,
                                       "one program per SM, each walking many tiles"))
        space = space.with_redundancy(Constraint("tma-idle", _tma_idle(fn)))
    for sym, p in _block_params(space, symbols).items():  # dot dimensions start at the minimum
        least = dot_dims.get(sym)
        if least is not None and max(p.choices) < least:
            # A dimension shorter than tl.dot's minimum (n=5 outputs): one masked block.
            space = space.with_choices(p.name, (least,), least)
        elif least is not None and p.default < least:
            space = space.with_default(p.name, least)

    # A search checks the whole product of the space (200,000 GEMM configs): what depends on
    # the block sizes alone is worked out once per block-size tuple.
    @functools.cache
    def blocks(sizes: tuple[int, ...]) -> dict[str, int]:
        return fn.block_values(sizes)

    @functools.cache
    def dot_min(sizes: tuple[int, ...]) -> str | None:
        small = [s for s in dot_dims if blocks(sizes)[s] < dot_dims[s]]
        return f"tl.dot needs blocks >= {DOT_MIN} (K >= {MMA_MIN_K8} for 8-bit operands), " \
            f"got {small}" if small else None

    @functools.cache
    def largest_tile(sizes: tuple[int, ...]) -> int:
        return max((numel(t, blocks(sizes)) for t in tiles), default=1)

    def tile_size(c: Config) -> str | None:
        biggest = largest_tile(c.block_sizes)
        if biggest > MAX_NUMEL:
            return f"a tile of {biggest} elements exceeds Triton's {MAX_NUMEL}"
        threads = 32 * int(c.get("num_warps", 4))
        if biggest > MAX_PER_THREAD * threads:
            return f"a tile of {biggest} elements over {threads} threads would spill registers"
        return None

    in_shared = shared_tiles(fn)  # the IR read once
    needs: dict[tuple, int] = {}

    def shared(c: Config) -> str | None:
        key = (c.block_sizes, c.get("num_stages"), c.get("tma"), c.get("persistent"))
        need = needs.get(key)
        if need is None:
            need = needs[key] = shared_bytes(fn, c, in_shared)
        limit = shared_limit(arch)
        return f"{need} bytes of shared memory > {limit} on {arch}" if need > limit else None

    checks = (("dot-min", lambda c: dot_min(c.block_sizes)), ("shared-memory", shared),
              ("tile-size", tile_size))
    for name, check in checks:
        space = space.with_constraint(Constraint(name, check))
    # The cost model on resources guessed without compiling: tuners try its favourites first.
    gpu = gpu_for(arch)
    space = space.with_estimate(lambda c: estimate_us(fn, c, gpu))

    mma = bool(dots) and all(a.dtype.is_float and a.dtype.bits <= 16 for a, _ in dots)
    if mma:
        picked = _default_mma(space, fn, dots, symbols, arch)
        if picked is not space:
            return picked
    if not dots:
        space = _default_tiles_of(space, tiles, symbols, _grids(fn))
    else:
        space = _default_fp32_dot_blocks(space, dots, symbols)
        if _fp32_dot_tiles(dots):
            space = space.with_default("num_stages", FMA_DOT_STAGES)
    default_blocks = {s: p.default for s, p in _block_params(space, symbols).items()}
    return _default_warps(space, _words(tiles, dots, default_blocks))
