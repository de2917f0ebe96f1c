"""Per-program iterations of `td.tile(stop)` and `td.tile(stop, start=s)` loops (causal
attention's `td.tile(tq.end)`, sliding-window attention's `td.tile(tq.end, start=tq.begin - w + 1)`).

A spatial config is planned before it runs: every DMA agent lists the copies it will issue and
every loop step its count. A loop with a runtime stop and start covers the lanes
[lower, limit), limit = clip(stop, 0, extent) and lower = clip(start, 0, limit); its tiles stay
aligned to the block, so a program runs iterations `lower // block` to `cdiv(limit, block)`
(none if lower >= limit), its first tile cut at the lower bound and its last at the limit. These
differ from program to program, so the mapper works them out for each program here, exactly as
the NumPy backend does at run time (`Executor.loop`): the stop and start are evaluated from the
grid's tile bounds, constants and (where the caller passes their values) the kernel's scalar
arguments, in the dtypes of the ops that compute them (an i32 sum wraps as it would at run time).

A bound computed from loaded data (a jagged row's length, `td.tile(n, stop=(ends -
starts).max())`) is evaluated from the arguments the plan is given (`data_values.py`). In
dataflow timing each program runs its own iterations, and its readers wait for the loaded
bound before their copies of the loop (`Mapping._program`); in static timing the schedule is
fixed before the data is seen, so every program is scheduled to the loop's bound (the range's
extent) and the iterations past its own are predicated: they keep their slots, move no data
and do no useful work (`predicated`).

A bound that depends on anything else (an enclosing sequential loop's tile, a tensor the
kernel writes), or on arguments whose values this plan was not given, is not known per
program before the run, and is a BackendError naming the kernel and the loop's line.

A config space is built per argument spec (shapes), without values, yet its analytic estimate
(`estimate.py`) ranks the configs of jagged kernels too. A plan made `unpriced` runs every
loop whose bound reads argument values over a guessed span (`guess`): a jagged loop's extent
is the total of the rows' lengths and its bound the longest of a tile's rows, so each row of
the grid axes the bound varies along gets a guessed length (`guessed_lengths`: spread evenly
from 0 to twice the extent's even share, shuffled the same way every time) and each program
the longest of its tile's rows. The estimate thus sees which PEs get the long rows, and how
larger tiles over the rows raise their longest. Static timing still schedules every program
to the bound, and the estimate prices the iterations past a program's own as the engine does:
a predicated copy takes its reader's time for a whole tile of the bound, but moves nothing
over DRAM channels or links. An `if` whose condition reads them runs both sides (`sides`).
`benchmarks/spatial_default.py` checks the defaults so picked.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

import numpy as np

from lowering.backends.spatial.data_values import DataValues, Unknowable
from lowering.passes.unroll_counted import UnrollCountedPass
from tiledsl.errors import BackendError
from tiledsl.ir.core import (Block, Function, Op, Value, loop_first, loop_ranges, loop_start,
                             loop_stop)
from tiledsl.ir.counted import counted_loop, int_const, users
from tiledsl.ir.types import UNBOUNDED, RangeType, TileType

LEVELS = 4  # how many lengths the guessed rows take (`guessed_lengths`)
ARITH = ("add", "sub", "mul", "minimum", "maximum")
_NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "minimum": np.minimum,
       "maximum": np.maximum}


def _cdiv(a: Any, b: int) -> Any:
    return -(-a // b)


def _extent(r: Value) -> int:
    rt = r.type
    assert isinstance(rt, RangeType)
    return rt.extent


class Stops:
    """The runtime bounds of one grid's `td.tile(stop)` / `td.tile(stop, start=s)` loops,
    checked when built and evaluated per program (`bounds`, `iterations`, `lanes`) or for many
    programs at once (`limits`, for the estimate). `scalars` holds the kernel's scalar argument
    values where the caller knows them (`run`, `simulate`, `source`): a bound may then depend
    on them."""

    def __init__(self, fn: Function, grid: Op, blocks: dict[str, int],
                 scalars: dict[Value, Any] | None = None, data: DataValues | None = None,
                 static: bool = False, unpriced: bool = False) -> None:
        self.fn = fn
        self.ranges = list(grid.regions[0].args)
        self.blocks = blocks
        self.scalars = scalars
        self.data = DataValues(fn, grid, 0, None, None) if data is None else data
        self.static = static  # static timing: loops with data bounds run to their extent
        self.unpriced = unpriced  # no argument values: those reading them run a guessed span
        self.valued: set[Op] = set()  # loops and ifs whose bounds read scalar args or data
        self.from_data: set[Op] = set()  # loops and ifs evaluated by the NumPy rules
        self.waits: set[Op] = set()  # those that read a tensor: a PE waits for its copy, and
        # static timing, which does not know it, schedules to the bound or both sides
        self.loops: dict[Value, Op] = {}  # a stop loop's range -> the loop
        self.axes: dict[Value, tuple[int, ...]] = {}  # grid axes its stop and start depend on
        self.varying: dict[Op, frozenset[int]] = {}  # a load -> axes its stop loops vary along
        self._scan(grid.regions[0], frozenset())
        self._memo: dict[tuple[Value, tuple[int, ...]], tuple[int, int]] = {}
        self._memo_rows: dict[Value, np.ndarray] = {}  # `_longest`

    def _scan(self, block: Block, varying: frozenset[int]) -> None:
        """Find the stop loops and, for each load, the grid axes along which the iterations
        of the stop loops around it vary: programs along such an axis run different
        iterations of its copies, so a multicast of it along that axis feeds, iteration by
        iteration, only the PEs that run the iteration (`Mapping.line_axis`)."""
        for op in block.ops:
            if op.name == "load" and varying:
                self.varying[op] = varying
            if op.name == "while":
                self._refuse_while(op)
            if op.name == "if":  # its side per program: known if its condition is (`condition`)
                self._depends(op, op.operands[0], "condition")
            first = loop_first(op) if op.name == "for" else None
            if first is not None:  # a persistent loop's tiles: known if its first is (`tiles`)
                self._depends(op, first, "first tile")
            stop = loop_stop(op) if op.name == "for" else None
            inner = varying
            if stop is not None and _extent(op.regions[0].args[0]) == UNBOUNDED:
                raise BackendError(
                    "backend 'spatial' cannot map a loop to a runtime size with no static bound: "
                    "the mapper plans each program's trips and buffers before the run",
                    kernel=self.fn.name, loc=op.loc,
                    hint="give the bound: td.tile(n, stop=s) with n at least every s")
            if stop is not None:
                r = op.regions[0].args[0]
                self.loops[r] = op
                axes = self._depends(op, stop, "stop")
                start = loop_start(op)
                if start is not None:
                    axes |= self._depends(op, start, "start")
                self.axes[r] = tuple(sorted(axes))
                if self.static and op in self.waits:
                    axes = frozenset()  # every program runs to the bound
                inner = varying | axes
            for region in op.regions:
                self._scan(region, inner)

    def _refuse_while(self, op: Op) -> NoReturn:
        """A `while` left after the backend's passes: on a runtime condition, or a counted
        loop too long to unroll (lowering/passes/unroll_counted.py)."""
        loop = counted_loop(op, users(op.regions[0]))
        lo = None if loop is None else int_const(op.operands[1 + loop.k])
        hi = None if loop is None else int_const(loop.stop)
        if loop is not None and lo is not None and hi is not None:
            trips = len(range(lo, hi, loop.step))
            raise BackendError(
                f"backend 'spatial' maps a counted loop by unrolling it, and this one's {trips} "
                f"trips are more than it unrolls (at most {UnrollCountedPass.max_trips} trips, "
                f"{UnrollCountedPass.max_ops} ops in all)", kernel=self.fn.name, loc=op.loc,
                hint="take larger steps, or loop over a td.tile() range")
        raise BackendError(
            "backend 'spatial' cannot map a `while` loop on a runtime value: the mapper "
            "plans each program's trips before the run", kernel=self.fn.name, loc=op.loc,
            hint="loop over a bounded td.tile() range and skip the trips past the end "
                 "with an `if` (or `continue`)")

    def block(self, r: Value) -> int:
        rt = r.type
        assert isinstance(rt, RangeType)
        return rt.block if isinstance(rt.block, int) else self.blocks[rt.block]

    def _depends(self, loop: Op, v: Value, which: str) -> frozenset[int]:
        """The grid axes `v` depends on; a BackendError if it depends on anything the mapper
        cannot evaluate before the run."""
        op = v.owner
        if op is not None and op.name == "const":
            return frozenset()
        if op is None and v in self.fn.args and isinstance(v.type, TileType):
            self.valued.add(loop)
            return frozenset()  # a scalar argument: evaluated if its value is given (`_eval`)
        if op is not None and op.name in ("tile.begin", "tile.size"):
            if op.operands[0] in self.ranges:
                return frozenset({self.ranges.index(op.operands[0])})
            raise self._unsupported(loop, which, "the tile of an enclosing sequential loop")
        if op is not None and op.name == "cast":
            return self._depends(loop, op.operands[0], which)
        if op is not None and op.name in ARITH:
            return self._depends(loop, op.operands[0], which) | \
                self._depends(loop, op.operands[1], which)
        if op is None:
            raise self._unsupported(loop, which, "a kernel argument")
        try:  # loaded data (or anything else the plan can evaluate from the arguments)
            _, axes, loads = self.data.slice_of(v)
        except Unknowable as e:
            raise self._unsupported(loop, which, str(e)) from None
        self.from_data.add(loop)
        self.valued.add(loop)
        if loads:
            self.waits.add(loop)
        return axes

    def _unsupported(self, loop: Op, which: str, what: str, hint: str | None = None
                     ) -> BackendError:
        if loop.name == "if":
            return BackendError(
                f"backend 'spatial' cannot map the 'if' op: its condition depends on {what}, "
                "and the mapper plans which side each program takes before the run",
                kernel=self.fn.name, loc=loop.loc,
                hint=hint or "compute the condition from the grid's tiles, scalar arguments "
                             "and loads of tensors the kernel does not write; or compute both "
                             "sides and select with td.where")
        return BackendError(
            f"backend 'spatial' cannot map this td.tile() loop: its {which} depends on {what}, "
            "and the mapper plans each program's iterations before the run",
            kernel=self.fn.name, loc=loop.loc,
            hint=hint or "compute the stop and start from the grid's tiles (t.begin, t.end, "
                         "t.size), ints and scalar arguments, e.g. td.tile(tq.end, "
                         "start=tq.begin - w + 1); or loop over the whole range and mask "
                         "with td.where")

    def _eval(self, loop: Op, v: Value, coords: tuple[Any, ...], which: str) -> np.ndarray:
        """`v` (the loop's `which`: stop or start) for the programs at grid coordinates
        `coords` (ints or equal-shaped arrays)."""
        op = v.owner
        t = v.type
        assert isinstance(t, TileType)
        if op is None:  # a scalar argument (`_depends` ruled the rest out)
            if self.scalars is None or v not in self.scalars:
                raise self._unsupported(
                    loop, which, f"the kernel argument '{v.hint}', whose value this plan "
                    "(simulate, estimate) was not given",
                    hint="pass the scalar arguments to the spatial backend's simulate "
                         "(args=...), or make it a Python constant of the kernel")
            out = np.asarray(self.scalars[v]).astype(np.int64)
        elif op.name == "const":
            out = np.asarray(int(op.attrs["value"]), dtype=np.int64)
        elif op.name in ("tile.begin", "tile.size"):
            axis = self.ranges.index(op.operands[0])
            rt = op.operands[0].type
            assert isinstance(rt, RangeType)
            block = self.block(op.operands[0])
            begin = np.asarray(coords[axis], dtype=np.int64) * block
            out = begin if op.name == "tile.begin" else np.minimum(block, rt.extent - begin)
        elif op.name == "cast":
            out = self._eval(loop, op.operands[0], coords, which)
        elif op.name not in _NP:  # computed from loaded data (`_depends` checked it)
            out = self._data(loop, v, which)[tuple(np.asarray(c) for c in coords)]
        else:
            out = _NP[op.name](self._eval(loop, op.operands[0], coords, which),
                               self._eval(loop, op.operands[1], coords, which))
        return out.astype(t.dtype.np).astype(np.int64)  # wrap as the run-time dtype does

    def _data(self, loop: Op, v: Value, which: str) -> np.ndarray:
        """`v`, computed from loaded data, for every program (grid-shaped)."""
        if self.data.args is None:
            raise self._unsupported(
                loop, which, "the arguments' values, which this plan (the estimate of a "
                "config space) was not given", hint="simulate with the arguments "
                "(k.simulate(*args))")
        return self.data.values(v, [_cdiv(_extent(r), self.block(r)) for r in self.ranges])

    def _bounds(self, r: Value, coords: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(lower, limit) of stop loop `r` for the programs at `coords`: its in-range lanes."""
        loop = self.loops[r]
        rt = r.type
        stop = loop_stop(loop)
        assert stop is not None and isinstance(rt, RangeType)
        if self.unpriced and loop in self.valued:
            return np.asarray(0, dtype=np.int64), self.guess(r, coords)
        limit = np.clip(self._eval(loop, stop, coords, "stop"), 0, rt.extent)
        start = loop_start(loop)
        lower = np.zeros_like(limit) if start is None else \
            np.clip(self._eval(loop, start, coords, "start"), 0, limit)
        return lower, limit

    def guess(self, r: Value, coords: tuple[Any, ...]) -> np.ndarray:
        """The limits an `unpriced` plan gives stop loop `r` for the programs at `coords`,
        from 0 (the module's docstring): the longest of each program's guessed rows; the
        extent where the bound is the same for every program."""
        extent = _extent(r)
        axes = self.axes[r]
        if not axes:
            return np.asarray(extent, dtype=np.int64)
        longest = self._longest(r)
        return longest[tuple(np.asarray(coords[a]) for a in axes)]

    def _longest(self, r: Value) -> np.ndarray:
        """Guessed lengths of the rows of the grid axes loop `r`'s bound varies along (the
        extent's share per row times 0 to 2, evenly spread and shuffled the same way every
        time), and the longest in each program's tile of them (indexed by its coordinates
        along those axes)."""
        if r not in self._memo_rows:
            axes = self.axes[r]
            shape = [_extent(self.ranges[a]) for a in axes]
            rows = math.prod(shape)
            out = guessed_lengths(_extent(r), rows).reshape(shape)
            for d, a in enumerate(axes):  # the longest row of each tile along axis a
                b = self.block(self.ranges[a])
                tiles = _cdiv(shape[d], b)
                pad = [(0, 0)] * len(axes)
                pad[d] = (0, tiles * b - shape[d])
                out = np.pad(out, pad).reshape(*out.shape[:d], tiles, b, *out.shape[d + 1:])
                out = out.max(axis=d + 1)
            self._memo_rows[r] = out
        return self._memo_rows[r]

    def bounds(self, r: Value, g: tuple[int, ...]) -> tuple[int, int]:
        """Where range `r`'s in-range lanes begin and end for program `g`: (0, extent), or for
        a stop loop's range (clip(start, 0, limit), limit = clip(stop, 0, extent))."""
        if r not in self.loops:
            return 0, _extent(r)
        key = (r, tuple(g[a] for a in self.axes[r]))  # programs alike along other axes share it
        if key not in self._memo:
            lower, limit = self._bounds(r, tuple(g))
            self._memo[key] = int(lower), int(limit)
        return self._memo[key]

    def to_bound(self, r: Value) -> bool:
        """Whether static timing schedules the loop over `r` to its bound, every program
        running all its iterations, those past a program's own predicated: its stop or start
        is read from the data, which the schedule does not know."""
        return self.static and self.loops.get(r) in self.waits

    def predicated(self, r: Value, g: tuple[int, ...], it: int) -> bool:
        """Whether iteration `it` of program `g`'s loop over `r` is one that static timing
        schedules but predicates off (`to_bound`)."""
        return self.to_bound(r) and it not in self.iterations(r, g, self.bounds(r, g))

    def condition(self, op: Op, g: tuple[int, ...]) -> bool:
        """The condition of `if` op `op` for program `g`."""
        return bool(self._eval(op, op.operands[0], g, "condition"))

    def sides(self, op: Op, g: tuple[int, ...]) -> tuple[bool, bool]:
        """Whether program `g` runs the then and the else side of `if` op `op`: the one its
        condition picks; both where static timing schedules both (a condition read from the
        data) or where this plan has not the values the condition reads (`unpriced`)."""
        if (self.static and op in self.waits) or (self.unpriced and op in self.valued):
            return True, True
        take = self.condition(op, g)
        return take, not take

    def sides_of(self, op: Op, coords: tuple[np.ndarray, ...]) -> tuple[Any, Any]:
        """`sides` for the programs at `coords` (arrays) in a static schedule: both where the
        condition reads data or argument values (known or not), else the one it picks."""
        if op in self.valued:
            return True, True
        take = self._eval(op, op.operands[0], coords, "condition") != 0
        return take, ~take

    def runs(self, r: Value, strided: Op | None, coords: tuple[np.ndarray, ...]) -> Any:
        """How many iterations of the loop over `r` (or persistent loop `strided`) the programs
        at `coords` (arrays) run in a static schedule: to the bound where its bounds read data
        or argument values (known or not), else their own (`iterations`, `tiles`)."""
        if strided is not None:
            total = math.prod(_cdiv(_extent(q), self.block(q)) for q in loop_ranges(strided))
            stride = int(strided.attrs["stride"])
            if strided in self.valued:
                return _cdiv(total, stride)
            first = loop_first(strided)
            assert first is not None
            first_tile = np.clip(self._eval(strided, first, coords, "first tile"), 0, total)
            return _cdiv(total - first_tile, stride)
        block = self.block(r)
        loop = self.loops.get(r)
        if loop is None or loop in self.valued:
            return _cdiv(_extent(r), block)
        lower, limit = self._bounds(r, coords)
        return np.where(lower < limit, _cdiv(limit, block) - lower // block, 0)

    def tiles(self, loop: Op, g: tuple[int, ...], total: int) -> range:
        """The tile numbers program `g` runs of a persistent loop over `total` tiles
        (`td.tile(m, n)[first::stride]`): first, first + stride, ... below total."""
        first = loop_first(loop)
        assert first is not None
        if self.static and loop in self.waits:
            raise self._unsupported(loop, "first tile", "loaded data, which a static schedule "
                                    "does not know", hint="start at the program's index "
                                    "(td.tile(m, n)[p::P]), or simulate with dataflow timing")
        start = int(np.clip(self._eval(loop, first, g, "first tile"), 0, total))
        return range(start, total, int(loop.attrs["stride"]))

    def limit(self, r: Value, g: tuple[int, ...]) -> int:
        return self.bounds(r, g)[1]

    def iterations(self, r: Value, g: tuple[int, ...],
                   bounds: tuple[int, int] | None = None) -> range:
        """The iterations program `g` (or one with `bounds`) runs of the loop over `r` (tile j
        covers [j * block, (j + 1) * block)): those meeting [lower, limit), none if empty."""
        block = self.block(r)
        if bounds is None and self.to_bound(r):  # the schedule's: all of them
            return range(_cdiv(_extent(r), block))
        lower, limit = self.bounds(r, g) if bounds is None else bounds
        return range(lower // block, _cdiv(limit, block)) if lower < limit else range(0)

    def lanes(self, r: Value, g: tuple[int, ...], pos: int,
              bounds: tuple[int, int] | None = None) -> tuple[int, int]:
        """(first lane, in-range lanes) of tile `pos` of `r` for program `g`, or within
        `bounds` when given (a multicast tile several programs share). A predicated iteration
        (`predicated`) keeps the slot of a whole tile of the bound."""
        lower, limit = self.bounds(r, g) if bounds is None else bounds
        if bounds is None and self.predicated(r, g, pos):
            lower, limit = 0, _extent(r)
        begin = pos * self.block(r)
        lo = max(begin, lower)
        return lo, max(0, min(begin + self.block(r), limit) - lo)

    def spans(self, coords: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Every stop loop's lower bounds and limits (rows, in `loops` order) for the programs
        at `coords`; a program that runs no iterations of a loop gets (0, 0) for it."""
        shape = np.shape(coords[0])
        lows, highs = [], []
        for r in self.loops:
            lower, limit = (np.broadcast_to(x, shape) for x in self._bounds(r, coords))
            empty = lower >= limit
            lows.append(np.where(empty, 0, lower))
            highs.append(np.where(empty, 0, limit))
        if not lows:
            none = np.zeros((0, *shape), dtype=np.int64)
            return none, none
        return np.stack(lows), np.stack(highs)

    def limits(self, coords: tuple[np.ndarray, ...]) -> np.ndarray:
        """Every stop loop's limit (rows, in `loops` order; 0 where a program runs none)."""
        return self.spans(coords)[1]


def guessed_lengths(total: int, rows: int) -> np.ndarray:
    """`rows` guessed row lengths summing to about `total`: spread evenly from 0 to twice
    their mean, in an order shuffled the same way every time, and rounded to `LEVELS` lengths
    (programs alike share the estimate's work) except the empty ones, which static timing
    charges a whole predicated tile of the bound."""
    order = np.random.default_rng(0).permutation(rows)
    twice_mean = 2 * total / rows
    exact = np.rint(twice_mean * (order + 0.5) / rows)
    levels = min(rows, LEVELS)
    coarse = np.maximum(1, np.rint(twice_mean * (order * levels // rows + 0.5) / levels))
    return np.minimum(total, np.where(exact == 0, 0, coarse)).astype(np.int64)


def reads_arguments(fn: Function) -> bool:
    """Whether a loop's runtime stop or start reads a scalar argument or loaded data: such a
    kernel is planned with the argument values (run, simulate, source), which a config space's
    analytic estimate does not have."""
    def reads(v: Value) -> bool:
        op = v.owner
        if op is None:
            return v in fn.args and isinstance(v.type, TileType)
        return op.name == "load" or any(reads(o) for o in op.operands)
    return any(reads(b) for op in fn.walk() if op.name == "for"
               for b in (loop_stop(op), loop_start(op)) if b is not None) or \
        any(op.name == "if" for op in fn.walk())  # (its side per program)
