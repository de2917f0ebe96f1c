"""The NumPy backend's interpreter: runs lowered IR for one config, all grid programs at once.

Inside a grid every value has shape `prefix + tile` (see `memory`), so each op is one NumPy call
for the whole grid; only `for` loops iterate in Python.
"""

from __future__ import annotations

import dataclasses
import functools
from types import TracebackType
from typing import Any, Callable

import numpy as np

from lowering.backends.numpy import (active_box, arg_memory, compiled, conflicts, disjoint, locks,
                                     memory, prepared)
from lowering.backends.numpy.branches import run_if
from lowering.backends.numpy.whiles import run_while
from lowering.backends.numpy.dots import grid_dot
from lowering.backends.numpy.persistent import run_strided
from lowering.backends.numpy.plan import last_uses, plan_of
from lowering.backends.numpy.room import check_room
from lowering.backends.numpy.elementwise import ELEMENTWISE, apply, compute
from lowering.backends.numpy.memory import GridScalar, RangeRT
from tiledsl.lang import fp8
from tiledsl.runtime.config import Config
from tiledsl.errors import OutOfBoundsError, RaceError
from tiledsl.ir import views
from tiledsl.ir.core import Block, Function, Op, Value, loop_inits, loop_start, loop_stop
from tiledsl.ir.gathers import access_parts, gathers, op_layout
from tiledsl.ir.ops import ALLOCATIONS, ARG_REDUCTIONS
from tiledsl.ir.slices import slices_of
from tiledsl.ir.types import Dim, RangeType, TensorType, TileType

Env = dict[Value, Any]
COMPILED = True  # run the function's blocks compiled (compiled.py); False: step by step


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Executor:
    """Runs `fn` under `config`; with `programs` (rows of grid indices) only those programs of
    grid number `phase` run, stacked on one prefix axis, and the other grids not at all (how
    the spatial backend executes each PE's share of one phase)."""

    def __init__(self, fn: Function, config: Config, programs: np.ndarray | None = None,
                 phase: int = 0, writers: disjoint.Writers | None = None) -> None:
        self.fn = fn
        self.shared_writers = writers  # one grid's, shared by the runs over its programs
        self.plan = plan_of(fn)  # made once per function
        self.quiet = False  # inside np.errstate(all="ignore") (block)
        self.tensors: dict[Value, np.ndarray] = {}  # run's `tensors`
        self.drawn: dict[Value, np.ndarray] | None = None  # tensor.random's, kept if a dict
        self.programs = programs
        self.phase = phase
        self.grids_seen = 0
        self.blocks = fn.block_values(config.block_sizes)
        self.config_key = tuple(config.block_sizes)  # what per-config caches are keyed on
        self.rank = 0  # number of grid axes while inside a grid
        self.grid_sizes: tuple[int, ...] = ()
        self.ranges: dict[Value, RangeRT] = {}  # the grid's ranges (for td.grid indices)
        self.active: np.ndarray | None = None  # programs inside every `td.tile(stop)` loop
        self.covered: set[int] = set()  # ids of the tensors a store wrote whole
        self.writers: disjoint.Writers | None = None  # in a grid with a disjoint store
        self.locks: Any = None  # in a grid that takes a spin lock: its locks.Guards

    def block_size(self, d: Dim) -> int:
        return d if isinstance(d, int) else self.blocks[d]

    def tile_shape(self, t: TileType) -> tuple[int, ...]:
        return tuple(self.block_size(d) for d in t.shape)

    def run(self, args: list[Any], tensors: dict[Value, np.ndarray] | None = None) -> list[Any]:
        """Run on `args`; host allocations listed in `tensors` reuse those arrays (so several
        runs over different programs fill the same outputs)."""
        self.tensors = tensors or {}
        self.grids_seen = 0
        env: Env = {}
        for v, a in zip(self.fn.args, args):
            if isinstance(v.type, TensorType):
                env[v] = a
            else:
                env[v] = np.asarray(a, dtype=v.type.dtype.np)  # type: ignore[union-attr]
        if self.quiet:
            return self.block(self.fn.body, env)
        with np.errstate(all="ignore"):  # (as `block` does: entered here, one call fewer)
            self.quiet = True
            try:
                return self.block(self.fn.body, env)
            finally:
                self.quiet = False

    def block(self, block: Block, env: Env, release: bool = False) -> list[Any]:
        """Run `block` in `env`; with `release`, values leave `env` after their last use there
        (a grid's or loop's temporaries: NumPy reuses their memory instead of faulting in new
        pages for each)."""
        if not self.quiet:  # the outermost block: floating-point errors are values here
            with np.errstate(all="ignore"):
                self.quiet = True
                try:
                    return self.block(block, env, release)
                finally:
                    self.quiet = False
        run = self.compiled(block, release) if COMPILED else None
        return self.interpret(block, env, release) if run is None else run(self, env)

    def compiled(self, block: Block, release: bool) -> compiled.Compiled | None:
        """`block` compiled (compiled.py), once per function; None for a block not of the
        function (the spatial backend runs lists of its ops)."""
        run = self.plan.compiled.get((id(block), release))
        if run is None and id(block) in self.plan.dead:
            run = self.plan.compiled[(id(block), release)] = compiled.compile_block(
                self, block, release)
        return run

    def interpret(self, block: Block, env: Env, release: bool = False) -> list[Any]:
        """`block` run step by step (what compiled.py's functions do in one call each)."""
        for op, kind, rule, operands, results, drop in self.steps(block):
            if release and drop:
                for v in drop:
                    env.pop(v, None)
            if kind is _RULE:
                if self.tensors and op.name in ALLOCATIONS \
                        and op.result in self.tensors:
                    outs = [self.tensors[op.result]]
                else:
                    outs = rule(self, op, [env[o] for o in operands])
            elif kind is _ELEMENTWISE:
                env[results[0]] = compute(op.name, [env[o] for o in operands], rule)
                continue
            elif kind is _RETURN:
                return [env[o] for o in operands]
            elif kind is _GRID:
                if self.programs is None or self.grids_seen == self.phase:
                    self.grid(op, env)
                self.grids_seen += 1
                continue
            elif kind is _FOR:
                outs = self.loop(op, env)
            elif kind is _IF:
                outs = run_if(self, op, env)
            elif kind is _WHILE:
                outs = run_while(self, op, env)
            else:
                raise NotImplementedError(f"numpy backend: no rule for op '{op.name}'")
            for r, o in zip(results, outs):
                env[r] = o
        return []

    def steps(self, block: Block) -> list[tuple[Op, str, Any, tuple, tuple, tuple]]:
        """Each op of `block` with how it runs (its kind, and its rule or result dtype), its
        operands and results, and the values dead before it (released inside a grid or loop),
        resolved once per block of the function."""
        steps = self.plan.steps.get(id(block))
        if steps is None:
            dead = self.plan.dead.get(id(block)) or last_uses(block)
            steps = [(*_step(op), tuple(op.operands), tuple(op.results), tuple(dead.get(i, ())))
                     for i, op in enumerate(block.ops)]
            if id(block) in self.plan.dead:  # a block of the function: it lives as long
                self.plan.steps[id(block)] = steps
        return steps

    def allocate(self, op: Op, rule: Any, xs: list[Any]) -> list[Any]:
        """A td.empty or td.full: the array `run`'s `tensors` lists for it, else a new one."""
        if self.tensors and op.result in self.tensors:
            return [self.tensors[op.result]]
        return rule(self, op, xs)

    def grid_step(self, op: Op, env: Env, body: compiled.Compiled | None = None) -> list[Any]:
        """A grid op: run unless the executor runs another grid's programs."""
        if self.programs is None or self.grids_seen == self.phase:
            self.grid(op, env, body)
        self.grids_seen += 1
        return []

    def no_rule(self, op: Op) -> list[Any]:
        raise NotImplementedError(f"numpy backend: no rule for op '{op.name}'")

    def grid(self, op: Op, env: Env, body: compiled.Compiled | None = None) -> None:
        """Every program of grid `op` at once (`body`: its region compiled); one after another
        where they take a spin lock (locks.py)."""
        if op in self.plan.serial and (self.programs is None or len(self.programs) > 1):
            return self._serial(op, env, body)
        region = op.regions[0]
        subset = self.programs is not None
        self.rank = 1 if subset else len(region.args)
        made = None if subset else self.plan.grids.get((op, self.config_key))
        if made is not None:
            self.grid_sizes = made[0]
        else:
            ranges = [a.type for a in region.args]
            self.grid_sizes = tuple(_cdiv(r.extent, self.block_size(r.block))  # type: ignore[union-attr]
                                    for r in ranges)
        inner = {v: (x.reshape((1,) * self.rank) if isinstance(x, np.ndarray) and x.ndim == 0
                     and not isinstance(v.type, TensorType) else x) for v, x in env.items()}
        if subset:  # one prefix axis: the listed programs
            assert self.programs is not None
            for i, (a, r) in enumerate(zip(region.args, ranges)):
                block = self.block_size(r.block)  # type: ignore[union-attr]
                inner[a] = RangeRT(r.extent, block, self.programs[:, i] * block, None)  # type: ignore[union-attr]
        else:
            self.ranges = made[1] if made is not None else self._grid_ranges(op, ranges)
            inner.update(self.ranges)
        self.writers = (self.shared_writers or disjoint.Writers()) if self.plan.tracked \
            else None
        if body is None:
            self.block(region, inner, release=True)
        else:
            body(self, inner)
        self.rank, self.grid_sizes, self.ranges, self.writers = 0, (), {}, None

    def _serial(self, op: Op, env: Env, body: compiled.Compiled | None) -> None:
        """Grid `op`'s programs one at a time, in grid order (C order of their indices), with
        one record of the disjoint stores and of the locks across them."""
        sizes = tuple(_cdiv(r.type.extent, self.block_size(r.type.block))  # type: ignore[union-attr]
                      for r in op.regions[0].args)
        every = self.programs if self.programs is not None else \
            np.indices(sizes).reshape(len(sizes), -1).T
        saved = self.programs, self.shared_writers
        self.shared_writers = self.shared_writers or disjoint.Writers()
        self.locks = locks.Guards()
        try:
            for row in every:
                self.programs = row[None, :]
                self.grid(op, env, body)
        finally:
            (self.programs, self.shared_writers), self.locks = saved, None

    def _grid_ranges(self, op: Op, ranges: list[Any]) -> dict[Value, RangeRT]:
        """The whole grid's ranges (their begins read-only), made once per config."""
        out = {}
        for i, (a, r) in enumerate(zip(op.regions[0].args, ranges)):
            assert isinstance(r, RangeType)
            block = self.block_size(r.block)
            begin = _begins(self.grid_sizes[i], block).reshape(
                [self.grid_sizes[i] if j == i else 1 for j in range(self.rank)])
            out[a] = RangeRT(r.extent, block, begin, i)
        self.plan.grids[(op, self.config_key)] = (self.grid_sizes, out)
        return out

    def loop(self, op: Op, env: Env, body: compiled.Compiled | None = None) -> list[Any]:
        """The carried values after loop `op` (`body`: its region compiled)."""
        facts = self.plan.facts.get(op)
        if facts is None:  # per op: its kind, carried values' initial values, stop and start
            facts = self.plan.facts[op] = (bool(op.attrs.get("stride")), loop_inits(op),
                                           loop_stop(op), loop_start(op))
        strided, inits, stop, start = facts
        if strided:  # td.tile(m, n)[p::P]
            return run_strided(self, op, env)
        if body is not None and stop is None and self.active is None:
            return self._plain_loop(op, env, body, inits)
        region = op.regions[0]
        r = region.args[0].type
        assert isinstance(r, RangeType)
        block = self.block_size(r.block)
        carried = [env[o] for o in inits]
        inner = dict(env)
        limit = lower = first = last = None
        if stop is None:
            iterations = range(_cdiv(r.extent, block))
        else:  # each program runs its own iterations: all that any runs, the others idle
            limit = np.clip(np.asarray(env[stop], dtype=np.int64), 0, r.extent)
            first, last = np.zeros_like(limit), -(-limit // block)
            if start is not None:  # the tiles that meet [start, stop): none if start >= stop
                lower = np.clip(np.asarray(env[start], dtype=np.int64), 0, limit)
                first = lower // block
                last = np.where(lower < limit, last, first)
            iterations = range(int(first.min(initial=0)), int(last.max(initial=0)))
        outer_active = self.active
        owned: dict[int, np.ndarray] = {}  # the carried arrays this loop made (active_box.merge)
        for j in iterations:
            for a, v in zip(region.args[1:], carried):
                inner[a] = v
            active = None if limit is None else (first <= j) & (j < last)
            if active is not None and outer_active is not None:
                active = active & outer_active
            self.active = outer_active if active is None or active.all() else active
            inner[region.args[0]] = _loop_range(r.extent, block, self.rank, j) \
                if limit is None or active_box.whole_tiles(limit, lower, self.active, j, block,
                                                           r.extent) else \
                RangeRT(r.extent, block, _loop_begin(self.rank, j * block), None, limit, lower)
            box = None if self.active is None or self.programs is not None else \
                active_box.box_of(self.active, self.grid_sizes)
            if box is not None:  # the active programs alone (active_box.py)
                try:
                    carried = self.in_box(region, inner, box, carried, owned)
                finally:
                    self.active = outer_active
                continue
            try:
                new = self.block(region, inner, release=True) if body is None else \
                    body(self, inner)
            finally:
                self.active = outer_active
            if active is not None and not active.all():  # idle programs keep their values
                new = [np.where(active.reshape(active.shape + (1,) * (np.ndim(n) - active.ndim)),
                                n, c) for n, c in zip(new, carried)]
            carried = new
        return carried

    def _plain_loop(self, op: Op, env: Env, body: compiled.Compiled, inits: list[Value]
                    ) -> list[Any]:
        """`loop` where every program runs every iteration: each one the compiled body."""
        region = op.regions[0]
        ranges = self.plan.grids.get((op, self.config_key, self.rank))
        if ranges is None:  # its tiles' ranges, made once per config and grid rank
            r = region.args[0].type
            block = self.block_size(r.block)  # type: ignore[union-attr]
            ranges = self.plan.grids[(op, self.config_key, self.rank)] = [
                _loop_range(r.extent, block, self.rank, j)  # type: ignore[union-attr]
                for j in range(_cdiv(r.extent, block))]  # type: ignore[union-attr]
        carried = [env[o] for o in inits]
        inner = dict(env)
        index, args = region.args[0], region.args[1:]
        for rt in ranges:
            inner[index] = rt
            for a, v in zip(args, carried):
                inner[a] = v
            carried = body(self, inner)
        return carried

    def in_box(self, region: Block, inner: Env, box: active_box.Box, carried: list[Any],
               owned: dict[int, np.ndarray]) -> list[Any]:
        """One loop iteration of the programs in `box` (the active ones): `carried` with theirs
        replaced (in place in the arrays in `owned`, which this loop made)."""
        used = self.plan.facts.get(region)  # type: ignore[call-overload]
        if used is None:
            used = self.plan.facts[region] = active_box.used_in(region)  # type: ignore[index]
        sizes, ranges, outer_active = self.grid_sizes, self.ranges, self.active
        self.grid_sizes, self.active = active_box.sizes_in(box, sizes), None
        self.ranges = {v: r for v, r in ranges.items() if box[r.grid_axis] == slice(None)}  # type: ignore[index]
        active_box.sliced += 1
        try:
            new = self.block(region, active_box.cut_env(inner, used, box, sizes), release=True)
        finally:
            self.grid_sizes, self.ranges, self.active = sizes, ranges, outer_active
        if any(id(c) in owned and isinstance(n, np.ndarray) and np.may_share_memory(n, c)
               for n in new for c in carried):  # (yields of carried views: `a, b = b, a`)
            owned = {}  # not in place: one write would change what another merge reads
        return [active_box.merge(c, n, box, sizes, owned) for c, n in zip(carried, new)]

    def indices(self, op: Op, operands: list[Any], tensor: TensorType) -> list[memory.Index]:
        """One index per tensor dimension: a range, a grid scalar, an int array or None (`:`)."""
        full, sliced, _, _, plain = _facts(self, op)
        if plain:  # each dimension indexed by an operand, none a grid index: the operands
            return operands[1:len(tensor.shape) + 1]
        values = iter(zip(op.operands[1:], operands[1:]))
        out: list[memory.Index] = []
        for d in range(len(tensor.shape)):
            if d in full:
                out.append(sliced.get(d))  # None: the whole dimension
                continue
            v, x = next(values)
            producer = v.owner
            if producer is not None and producer.name == "tile.begin":
                rt = self.ranges.get(producer.operands[0])
                if rt is not None and rt.grid_axis is not None and rt.block == 1 \
                        and rt.extent == tensor.shape[d]:  # the grid spans the whole dimension
                    out.append(GridScalar(rt.grid_axis))
                    continue
            out.append(x)
        return out


_RULE, _ELEMENTWISE, _RETURN, _GRID, _FOR, _IF, _WHILE, _NONE = (
    "rule", "elementwise", "return", "grid", "for", "if", "while", "none")


def _step(op: Op) -> tuple[Op, str, Any]:
    if op.name in ("return", "yield"):
        return op, _RETURN, None
    if op.name in RULES:
        return op, _RULE, RULES[op.name]
    if op.name in ELEMENTWISE:
        return op, _ELEMENTWISE, op.result.type.dtype.np  # type: ignore[union-attr]
    kind = {"grid": _GRID, "for": _FOR, "if": _IF, "while": _WHILE}.get(op.name, _NONE)
    return op, kind, None


@functools.lru_cache(maxsize=16)
def _begins(programs: int, block: int) -> np.ndarray:
    """Where each program's tile of a grid axis begins (read-only: shared by every run, so a
    grid of a million programs does not allocate it each time)."""
    begin = np.arange(0, programs * block, block, dtype=np.int64)
    begin.setflags(write=False)
    return begin


@functools.lru_cache(maxsize=256)
def _loop_begin(rank: int, begin: int) -> np.ndarray:
    """Where a loop's tile begins, for every program (read-only: shared by every run)."""
    out = np.full((1,) * rank, begin)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=256)
def _loop_range(extent: int, block: int, rank: int, j: int) -> RangeRT:
    """A loop's range at its `j`-th tile, without a runtime stop (shared by every run)."""
    return RangeRT(extent, block, _loop_begin(rank, j * block), None)


Rule = Callable[[Executor, Op, list[Any]], list[Any]]
RULES: dict[str, Rule] = {}


def rule(name: str) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        RULES[name] = fn
        return fn
    return deco


@rule("const")
def _const(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    key = (op, ex.rank)  # the same array on every call (read-only: tiles are values)
    x = ex.plan.consts.get(key)
    if x is None:
        dtype = op.result.type.dtype.np  # type: ignore[union-attr]
        x = ex.plan.consts[key] = np.full((1,) * ex.rank, op.attrs["value"], dtype=dtype)
        x.setflags(write=False)
    return [x]


@rule("cast")
def _cast(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    return [fp8.convert(xs[0], op.result.type.dtype.np)]  # type: ignore[union-attr]


@rule("where")
def _where(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    return [np.where(xs[0], xs[1], xs[2])]


@rule("broadcast")
def _broadcast(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    x = xs[0]
    source = op.operands[0].owner
    if source is not None and source.name == "const":  # td.zeros, td.full: x is the plan's
        key = (op, ex.rank, ex.config_key)  # (the config fixes the tile's shape)
        made = ex.plan.consts.get(key)  # array (_const), so its view is the same every call
        if made is not None and made[0] is x:
            return [made[1]]
        out = _broadcast_to(ex, op, x)
        ex.plan.consts[key] = (x, out)
        return [out]
    return [_broadcast_to(ex, op, x)]


def _broadcast_to(ex: Executor, op: Op, x: np.ndarray) -> np.ndarray:
    tile = ex.tile_shape(op.result.type)  # type: ignore[arg-type]
    x = x.reshape(x.shape[:ex.rank] + (1,) * (len(tile) - (x.ndim - ex.rank)) + x.shape[ex.rank:])
    return np.broadcast_to(x, x.shape[:ex.rank] + tile)


@rule("expand_dims")
def _expand_dims(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    return [np.expand_dims(xs[0], ex.rank + op.attrs["axis"])]


@rule("transpose")
def _transpose(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    perm = list(range(ex.rank)) + [ex.rank + p for p in op.attrs["perm"]]
    return [np.transpose(xs[0], perm)]


@rule("dot")
def _dot(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    dtype = op.result.type.dtype.np  # type: ignore[union-attr]
    a, b = xs
    if a.shape[-1] != b.shape[-2]:  # one operand was loaded trimmed (plan.trimmed_loads): the
        k = min(a.shape[-1], b.shape[-2])  # lanes the other has past it are zeros
        a, b = a[..., :k], b[..., :k, :]
    # Floats below float64 multiply in float64, rounded once: NumPy's float32 matmul rounds
    # equal rows of a tile differently by their place in it, where a GPU's are equal (Triton's
    # `rm % M` matmuls store one row from several lanes: flash-attn's linear).
    td_dtype = op.result.type.dtype  # type: ignore[union-attr]
    work = np.float64 if td_dtype.is_float and td_dtype.itemsize < 8 else dtype
    a, b = a.astype(work, copy=False), b.astype(work, copy=False)
    out = grid_dot(a, b, ex.rank) if a.ndim == ex.rank + 2 else np.matmul(a, b)
    return [out.astype(dtype, copy=False)]


@rule("pow")
def _pow(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    """`x ** 0.5` with a constant 0.5 is a square root, as NumPy's `x ** 0.5` and the Triton
    backend compute it: (-inf) ** 0.5 is NaN and (-0.0) ** 0.5 is -0.0. np.power, which a
    tile exponent gets, gives inf and 0.0."""
    dtype = op.result.type.dtype.np  # type: ignore[union-attr]
    exponent = op.operands[1]
    while exponent.owner is not None and exponent.owner.name == "broadcast":
        exponent = exponent.owner.operands[0]
    if exponent.owner is not None and exponent.owner.name == "const" \
            and exponent.owner.attrs["value"] == 0.5:
        return [apply("sqrt", xs[:1], dtype)]
    return [apply("pow", xs, dtype)]


@rule("reduce")
def _reduce(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    kind, keep = op.attrs["kind"], op.attrs["keepdims"]
    axis = ex.rank + op.attrs["axis"]
    dtype = op.result.type.dtype.np  # type: ignore[union-attr]
    x = xs[0]
    if kind == "sum":  # (np.add.reduce is np.sum without its Python wrapper)
        return [np.asarray(np.add.reduce(x.astype(dtype, copy=False), axis, dtype, None, keep))]
    if kind == "mean":
        return [np.asarray(np.mean(x.astype(dtype, copy=False), axis=axis, keepdims=keep,
                                   dtype=dtype))]
    if kind in ARG_REDUCTIONS:  # the first NaN, else the first extreme (NumPy's rule)
        f = np.argmax if kind == "argmax" else np.argmin
        return [np.asarray(f(x, axis=axis, keepdims=keep)).astype(dtype)]
    f = np.maximum if kind == "max" else np.minimum  # (np.max is np.maximum.reduce)
    return [np.asarray(f.reduce(x, axis, None, None, keep))]


@rule("cumsum")
def _cumsum(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    dtype = op.result.type.dtype.np  # type: ignore[union-attr]
    return [np.cumsum(xs[0].astype(dtype, copy=False), axis=ex.rank + op.attrs["axis"],
                      dtype=dtype)]


@rule("mask")
def _mask(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    x = xs[0]
    if all(memory.in_range(r) for r in xs[1:]):  # no lane to mask (every loop tile but the last)
        return [x]
    t = op.operands[0].type
    assert isinstance(t, TileType)
    ranges = iter(xs[1:])
    valid = None
    for axis in op.attrs["axes"]:
        if isinstance(t.shape[axis], int):
            continue  # constant axes are never padded here
        r: RangeRT = next(ranges)
        idx = r.index()
        shape = [1] * t.rank
        shape[axis] = r.block
        limit, lower = np.asarray(r.limit()), np.asarray(r.lower())
        ok = (idx < limit[..., None]) & (idx >= lower[..., None])
        ok = ok.reshape(ok.shape[:-1] + tuple(shape))
        valid = ok if valid is None else valid & ok
    if valid is not None and ex.active is not None:  # idle programs' lanes are never used
        valid = valid | ~ex.active.reshape(ex.active.shape + (1,) * t.rank)
    if valid is None or valid.all():
        return [x]
    return [np.where(valid, x, np.asarray(op.attrs["value"]).astype(x.dtype))]


@rule("tile.index")
def _tile_index(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    return [xs[0].index().astype(op.result.type.dtype.np)]  # type: ignore[union-attr]


@rule("arange")
def _arange(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    key = (op, ex.rank, ex.config_key)  # the config sets a block-size length
    x = ex.plan.consts.get(key)
    if x is None:
        t = op.result.type
        assert isinstance(t, TileType)
        n, start = ex.tile_shape(t)[0], op.attrs["start"]
        x = np.arange(start, start + n, dtype=t.dtype.np)
        x = ex.plan.consts[key] = x.reshape((1,) * ex.rank + (n,))
        x.setflags(write=False)
    return [x]


@rule("tile.begin")
def _tile_begin(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    return [xs[0].begin.astype(op.result.type.dtype.np)]  # type: ignore[union-attr]


@rule("tile.size")
def _tile_size(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    r: RangeRT = xs[0]
    size = np.minimum(r.block, r.limit() - r.begin)  # the in-range lanes: past the start
    if r.start is not None:
        size = size - np.clip(r.start - r.begin, 0, r.block)
    return [size.astype(op.result.type.dtype.np)]  # type: ignore[union-attr]


def _access(ex: Executor, op: Op, xs: list[Any], tensor: TensorType
            ) -> tuple[list[memory.Index], tuple[tuple[int, ...], ...] | None, Any]:
    """A load's or store's indices, its layout's axes (for a gather, else None) and mask."""
    indices = ex.indices(op, xs, tensor)
    _, _, mask_at, axes, _ = _facts(ex, op)
    mask = None if mask_at is None else xs[mask_at]
    if axes is not None:
        indices = [memory.TileIndex(np.asarray(i), axes[d]) if isinstance(i, np.ndarray) and
                   np.ndim(i) > ex.rank else i for d, i in enumerate(indices)]
    owner = op.operands[0].owner
    if owner is not None and owner.name == "tensor.memory":  # pointers into an argument
        arg_memory.check(ex, op, indices, axes, mask)  # laid out other than row-major
    return indices, axes, mask


def _facts(ex: Executor, op: Op) -> tuple[Any, dict[int, Any], int | None, Any, bool]:
    """A load's or store's `full` dimensions, slices, mask operand's position (or None), a
    gather's layout axes (or None), and whether its index operands are its indices as they
    are (no `:` dimension, no `tile.begin` that may be a GridScalar), worked out once per op."""
    facts = ex.plan.facts.get(op)
    if facts is None:
        parts = access_parts(op)[0]
        mask_at = len(parts) + 1 if op.attrs.get("mask") else None
        full = op.attrs.get("full", ())
        plain = not full and not any(v.owner is not None and v.owner.name == "tile.begin"
                                     for v in parts)
        facts = ex.plan.facts[op] = (full, slices_of(op.attrs), mask_at,
                                     op_layout(op).axes if gathers(op) else None, plain)
    return facts


@rule("tile.shift")
def _tile_shift(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    """The range's tiles moved by the shift (memory.py masks the lanes it moves off a tensor)."""
    return [dataclasses.replace(xs[0], shift=np.asarray(xs[1], dtype=np.int64))]


@rule("load")
def _load(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    tensor = op.operands[0].type
    assert isinstance(tensor, TensorType)
    ntile = len(op.result.type.shape)  # type: ignore[union-attr]
    with _bounds(ex, op):
        indices, axes, mask = _access(ex, op, xs, tensor)
        if ex.writers is not None and views.root(op.operands[0]) in ex.plan.tracked:
            ex.writers.access(ex, op, xs[0], indices, axes, mask, None)
        if ex.locks is not None and op.attrs.get("locked"):
            ex.locks.access(ex, op, xs[0], indices, axes, mask)
        axis = ex.plan.trimmed.get(op)
        out = _prepared_load(ex, op, xs[0], indices, axis) if axes is None and mask is None \
            else None
        if out is None and axes is None and mask is None:  # a `td.tile(stop)` loop's tile
            plain, valid = memory.without_stops(indices, ex.rank, ntile)
            out = None if valid is None else _prepared_load(ex, op, xs[0], plain, None,
                                                            untrimmed=axis is not None)
            if out is not None and ex.active is not None:  # idle programs' lanes: never used
                valid = valid | ~ex.active.reshape(ex.active.shape + (1,) * ntile)
            if out is not None and not valid.all():
                out = np.where(valid, out, np.asarray(memory._fill(xs[0], op.attrs.get("other"))
                                                      ).astype(out.dtype))
        if out is None and axis is not None:
            out = memory.trimmed(xs[0], indices, ex.rank, axis, op.attrs.get("other"))
        if out is None:
            out = memory.load(xs[0], indices, ex.rank, ntile, op.attrs.get("other"), ex.active,
                              axes, mask)
    if views.root(op.operands[0]) in _written(ex) and isinstance(out, np.ndarray) and \
            np.may_share_memory(out, xs[0]):
        out = out.copy()  # a view of memory a later store changes: the load's value is now's
    return [out]


def _prepared_load(ex: Executor, op: Op, arr: np.ndarray, indices: list[memory.Index],
                   axis: int | None, untrimmed: bool = False) -> np.ndarray | None:
    """The load by its recipe for this layout (prepared.py); None: the general path.
    `untrimmed`: a load that may be trimmed (plan.trimmed_loads) read whole, under a key of its
    own (a loop tile with a runtime stop, its lanes past the stop set afterwards)."""
    k = prepared.key(op, arr, indices, ex.rank)
    if k is None:
        return None
    if untrimmed:  # (the same indices without a stop take the trimmed recipe)
        k = (*k, "untrimmed")
    r = prepared.recipe(ex.plan.accesses, k,
                        lambda: prepared.load_recipe(arr, indices, ex.rank, axis))
    if r.view is None:  # neither a view nor a padded copy serves: a gather
        ntile = len(op.result.type.shape)  # type: ignore[union-attr]
        active = None if ex.active is None else \
            ex.active.reshape(ex.active.shape + (1,) * ntile)
        return memory.gather(arr, indices, ex.rank, ntile, op.attrs.get("other"), active)
    return prepared.load(r, arr, op.attrs.get("other"))


def _written(ex: Executor) -> set[Value]:
    """The tensors (roots of views) that the function stores to."""
    return ex.plan.written


@rule("store")
def _store(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    tensor = op.operands[0].type
    assert isinstance(tensor, TensorType)
    value = op.operands[-1].type
    assert isinstance(value, TileType)
    with _bounds(ex, op):
        indices, axes, mask = _access(ex, op, xs[:-1], tensor)
        if ex.writers is not None and views.root(op.operands[0]) in ex.plan.tracked:
            ex.writers.access(ex, op, xs[0], indices, axes, mask, xs[-1])
        if ex.locks is not None and op.attrs.get("locked"):
            ex.locks.access(ex, op, xs[0], indices, axes, mask)
        k = None if ex.active is not None or axes is not None or mask is not None else \
            prepared.key(op, xs[0], indices, ex.rank)
        if k is not None:
            r = prepared.recipe(ex.plan.accesses, k,
                                lambda: prepared.store_recipe(xs[0], indices, ex.rank))
            if r.covers:
                ex.covered.add(id(xs[0]))
            if prepared.store(r, xs[0], xs[-1]):
                return []
        memory.store(xs[0], indices, ex.rank, value.rank, xs[-1], ex.active, axes, mask)
    if ex.active is None and axes is None and mask is None and memory.covers(xs[0], indices):
        ex.covered.add(id(xs[0]))
    return []


class _bounds:
    """A scalar index out of range becomes an OutOfBoundsError naming the tensor and line (a
    class, not a generator: loads and stores enter it on every call)."""

    __slots__ = ("ex", "op")

    def __init__(self, ex: Executor, op: Op) -> None:
        self.ex, self.op = ex, op

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if kind is not None and issubclass(kind, conflicts.Conflict):
            assert isinstance(e, conflicts.Conflict)
            raise RaceError(
                f"store to {_tensor_name(self.op)}: equal indices write "
                f"{e.first!r} and {e.second!r} to element {e.index}; a GPU keeps either",
                kernel=self.ex.fn.name, loc=self.op.loc,
                hint="mask the lanes that must not write (td.store(x, [idx], v, mask=m)), or "
                     "combine the values with an atomic (td.atomic_add)") from None
        if kind is None or not issubclass(kind, memory.OutOfRange):
            return False
        assert isinstance(e, memory.OutOfRange)
        op = self.op
        what = "load from" if op.name == "load" else "store to"
        flat = op.operands[0].owner
        if flat is not None and flat.name == "tensor.reshape" and \
                len(op.operands[0].type.shape) == 1:  # type: ignore[union-attr]
            src = flat.operands[0]  # (Triton's pointers address a tensor's flat view)
            shape = src.type.shape  # type: ignore[union-attr]
            raise OutOfBoundsError(
                f"{what} '{src.hint or 'a tensor the kernel allocates'}' (shape "
                f"{shape}) through its flat view: offset {e.value} is "
                f"{'before its first' if e.value < 0 else 'past its last'} element "
                f"(offset {e.size - 1})", kernel=self.ex.fn.name, loc=op.loc,
                hint="mask the lanes that leave the tensor (td.load(ptr, mask=offs < n)); "
                     "on the GPU they would read or write other memory") from None
        raise OutOfBoundsError(
            f"{what} {_tensor_name(op)}: index {e.value} is out of bounds for dimension {e.dim} "
            f"(size {e.size})",
            kernel=self.ex.fn.name, loc=op.loc,
            hint="a scalar index (an int argument, or arithmetic on td.grid indices) or an "
                 "index tile's element must lie in the dimension; only a tile's lanes past the "
                 "edge are masked (and what td.load's mask= leaves out)") from None


def _tensor_name(op: Op) -> str:
    """The accessed tensor as errors name it: 'x', or a tensor the kernel allocates."""
    hint = op.operands[0].hint
    return f"'{hint}'" if hint else "a tensor the kernel allocates"


@rule("tensor.empty")
def _tensor_empty(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    t = op.result.type
    assert isinstance(t, TensorType)
    if op.result in ex.plan.unfilled and ex.programs is None:  # a store writes it whole
        if op not in ex.plan.facts:  # (static shape: checked once per op)
            check_room(t.shape, t.dtype.np, op.loc)
            ex.plan.facts[op] = True
        out = np.empty(t.shape, t.dtype.np)
        ex.covered.add(id(out))
        return [out]
    return [memory.empty(t.shape, t.dtype.np, op.loc)]


@rule("tensor.full")
def _tensor_full(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    t = op.result.type
    assert isinstance(t, TensorType)
    check_room(t.shape, t.dtype.np, op.loc)
    return [np.full(t.shape, xs[0], dtype=t.dtype.np)]
