"""The Triton backend's knobs, the constraints that rule configs out before any compile, and the
cost model's estimate that ranks the rest (cost.py)."""

from __future__ import annotations

from lowering.backends.triton.cost import dot_shared_bytes, estimate_us, numel
from lowering.backends.triton.emit import tl_dot_takes
from tiledsl import dtypes
from tiledsl.config import Config, ConfigSpace, Constraint, Param
from tiledsl.ir.core import Function, walk
from tiledsl.ir.types import TileType

MAX_NUMEL = 1 << 20  # Triton's limit on the elements of one tile
MAX_PER_THREAD = 256  # values of the largest tile per thread: beyond this, registers spill
DOT_MIN = 16  # tl.dot needs M, N, K >= 16
SHARED_BYTES = {"sm_80": 163 * 1024, "sm_90": 227 * 1024}
DEFAULT_TILE = 2048  # elements of the largest tile under the default blocks, without dots
FP32_DOT_WORDS = 48  # per thread at 8 warps: all fp32 dots' operands and results, by default
WORDS_PER_THREAD = 64  # of the largest tile under the default blocks, before the default
                       # number of warps doubles


def _facts(fn: Function) -> tuple[list[TileType], set[str], list[tuple[TileType, TileType]]]:
    """The kernel's tiles (with the products of the dots that become a multiply and a sum),
    the block symbols tl.dot sees, and the dots' operand types."""
    tiles, dot_dims, dots = [], set(), []
    for op in walk(fn.body):
        for r in op.results:
            if isinstance(r.type, TileType):
                tiles.append(r.type)
        if op.name == "dot":
            a, b = (o.type for o in op.operands)
            assert isinstance(a, TileType) and isinstance(b, TileType)
            dots.append((a, b))
            if tl_dot_takes(a.dtype):
                dot_dims |= {d for d in a.shape + b.shape if isinstance(d, str)}
            else:
                tiles.append(_product_tile(a, b))
    return tiles, dot_dims, dots


def _product_tile(a: TileType, b: TileType) -> TileType:
    """The elementwise products `a[:, :, None] * b[None, :, :]` of a dot that tl.dot does not
    take (int16 to int64), which emit.py sums over axis 1."""
    return TileType((a.shape[0], a.shape[1], b.shape[1]), dtypes.accumulator(a.dtype))


def _default_tiles_of(space: ConfigSpace, tiles: list[TileType], symbols: list[str]
                      ) -> ConfigSpace:
    """Default blocks that make the largest tile of a kernel without dots DEFAULT_TILE elements
    (or as near as its extents allow), as Triton's tutorials size them (1024 for a vector add,
    whole rows a few at a time for a softmax). The generic default of 64 per dimension gives a
    vector add 64 elements over 128 threads, and a softmax over 300 fp32 columns 64 rows of 512
    (it spilled 3336 bytes per thread on sm_90 with 4 warps; 4 rows, none)."""
    params = _block_params(space, symbols)
    blocks = {s: p.default for s, p in params.items()}
    if not tiles or not blocks:
        return space

    def largest() -> TileType:
        return max(tiles, key=lambda t: numel(t, blocks))

    def step(sym: str, up: bool) -> int | None:
        return _step(params[sym], blocks[sym], up)

    while numel(largest(), blocks) > DEFAULT_TILE:  # halve the largest block of the largest tile
        dims = [d for d in largest().shape if isinstance(d, str) and step(d, False)]
        if not dims:
            break
        sym = max(dims, key=lambda d: blocks[d])
        blocks[sym] = step(sym, False) or blocks[sym]
    grown = True
    while grown:  # double the innermost block that keeps the largest tile within DEFAULT_TILE
        grown = False
        for d in reversed(largest().shape):
            if isinstance(d, str) and (up := step(d, True)) is not None:
                trial = {**blocks, d: up}
                if max(numel(t, trial) for t in tiles) <= DEFAULT_TILE:
                    blocks, grown = trial, True
                    break
    return _with_default_blocks(space, params, blocks)


def _default_fp32_dot_blocks(space: ConfigSpace, dots: list[tuple[TileType, TileType]],
                             symbols: list[str]) -> ConfigSpace:
    """Halve the largest default block of the fp32 dots until their operands and results
    together fit FP32_DOT_WORDS per thread at 8 warps. fp32 dots run on FMAs, from registers:
    attention's two fp32 dots at 64x64 spilled 312 bytes per thread at 8 warps on sm_90 (more
    at 16), at 32x32 none. So do integer dots that tl.dot does not take, with their products
    (an int16 matmul at 64x64x64 spilled 13736 bytes per thread with 4 warps)."""
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


def _block_params(space: ConfigSpace, symbols: list[str]) -> dict[str, Param]:
    return {symbols[int(p.name[12:-1])]: p for p in space.params
            if p.name.startswith("block_sizes[")}


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


def extend(space: ConfigSpace, fn: Function, arch: str = "sm_90") -> ConfigSpace:
    """Add num_warps, num_stages and group_m, and constraints known before compiling."""
    tiles, dot_dims, dots = _facts(fn)
    symbols = list(fn.symbols)
    space = space.with_param(Param("num_warps", (2, 4, 8), 4, "warps per program"))
    space = space.with_param(Param("num_stages", (1, 2, 3, 4), 3, "software pipeline depth"))
    grid_2d = any(op.name == "grid" and len(op.regions[0].args) == 2 for op in fn.body.ops)
    if grid_2d:
        space = space.with_param(Param("group_m", (1, 4, 8), 8, "L2-friendly program order"))
    if dots:  # Hopper knobs, for the kernels they are made for (GEMM-like ones)
        space = space.with_param(Param("tma", (False, True), False,
                                       "tensor descriptors (TMA on sm_90; plain loads before)"))
        space = space.with_param(Param("persistent", (False, True), False,
                                       "one program per SM, each walking many tiles"))
    for sym, p in _block_params(space, symbols).items():  # dot dimensions start at the minimum
        if sym in dot_dims and max(p.choices) < DOT_MIN:
            # A dimension shorter than tl.dot's minimum (n=5 outputs): one masked block.
            space = space.with_choices(p.name, (DOT_MIN,), DOT_MIN)
        elif sym in dot_dims and p.default < DOT_MIN:
            space = space.with_default(p.name, DOT_MIN)

    if not dots:
        space = _default_tiles_of(space, tiles, symbols)
    else:
        space = _default_fp32_dot_blocks(space, dots, symbols)

    # Big default tiles get 8 warps: with 4, each thread would hold more than WORDS_PER_THREAD
    # values of the largest tile, or of the fp32 dots' operands and results together (fp32 dots
    # run on FMAs, from registers). On sm_90, 4 warps spilled 440 bytes per thread for an fp32
    # batched matmul, 8 warps none; softmax, layer and RMS norm over 300 fp32 columns, 64 rows
    # at a time, spilled 600 to 3144 with 4 warps and none with 8 (they now take 4 rows).
    default_blocks = {s: p.default for s, p in _block_params(space, symbols).items()}
    held = [numel(t, default_blocks) * max(t.dtype.bits, 32) // 32 for t in tiles]
    held.append(_fp32_dot_words(dots, default_blocks))  # all fp32 dots together
    if max(held, default=1) > WORDS_PER_THREAD * 32 * 4:
        space = space.with_default("num_warps", 8)

    def blocks(c: Config) -> dict[str, int]:
        return dict(zip(symbols, c.block_sizes))

    def dot_min(c: Config) -> str | None:
        small = [s for s in dot_dims if blocks(c)[s] < DOT_MIN]
        return f"tl.dot needs blocks >= {DOT_MIN}, got {small}" if small else None

    def tile_size(c: Config) -> str | None:
        b = blocks(c)
        biggest = max((numel(t, b) for t in tiles), default=1)
        if biggest > MAX_NUMEL:
            return f"a tile of {biggest} elements exceeds Triton's {MAX_NUMEL}"
        threads = 32 * int(c.get("num_warps", 4))
        if biggest > MAX_PER_THREAD * threads:
            return f"a tile of {biggest} elements over {threads} threads would spill registers"
        return None

    def shared(c: Config) -> str | None:
        b = blocks(c)
        stages = int(c.get("num_stages", 3))
        need = max((dot_shared_bytes(a, bb, b, stages) for a, bb in dots), default=0)
        limit = SHARED_BYTES[arch]
        return f"{need} bytes of shared memory > {limit} on {arch}" if need > limit else None

    for name, check in (("dot-min", dot_min), ("tile-size", tile_size), ("shared-memory", shared)):
        space = space.with_constraint(Constraint(name, check))
    # The cost model on resources guessed without compiling: tuners try its favourites first.
    return space.with_estimate(lambda c: estimate_us(fn, c))
