"""Per-program trip counts of `td.tile(stop)` loops (causal attention's `td.tile(tq.end)`).

A spatial config is planned before it runs: every DMA agent lists the copies it will issue and
every loop step its count. A loop with a runtime stop runs `cdiv(clip(stop, 0, extent), block)`
iterations, a number that differs from program to program, so the mapper works it out for each
program here, exactly as the NumPy backend does at run time (`Executor.loop`): the stop is
evaluated from the grid's tile bounds and constants, in the dtypes of the ops that compute it
(an i32 sum wraps as it would at run time).

A stop that depends on anything else (an enclosing sequential loop's tile, a loaded value, a
kernel argument) is not known per program before the run, and is a BackendError naming the
kernel and the loop's line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl.errors import BackendError
from tiledsl.ir.core import Block, Function, Op, Value, loop_stop
from tiledsl.ir.types import RangeType, TileType

ARITH = ("add", "sub", "mul", "minimum", "maximum")
_NP = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "minimum": np.minimum,
       "maximum": np.maximum}


class Stops:
    """The runtime stops of one grid's `td.tile(stop)` loops, checked when built and evaluated
    per program (`limit`) or for many programs at once (`limits`, for the estimate)."""

    def __init__(self, fn: Function, grid: Op, blocks: dict[str, int]) -> None:
        self.fn = fn
        self.ranges = list(grid.regions[0].args)
        self.blocks = blocks
        self.loops: dict[Value, Op] = {}  # a stop loop's range -> the loop
        self.axes: dict[Value, tuple[int, ...]] = {}  # grid axes each stop depends on
        self.varying: dict[Op, frozenset[int]] = {}  # a load -> axes its stop loops vary along
        self._scan(grid.regions[0], frozenset())
        self._memo: dict[tuple[Value, tuple[int, ...]], int] = {}

    def _scan(self, block: Block, varying: frozenset[int]) -> None:
        """Find the stop loops and, for each load, the grid axes along which the trip counts
        of the stop loops around it vary: programs along such an axis run different numbers
        of its copies, so a multicast of it along that axis feeds, iteration by iteration, only
        the PEs that run the iteration (`Mapping.line_axis`)."""
        for op in block.ops:
            if op.name == "load" and varying:
                self.varying[op] = varying
            stop = loop_stop(op) if op.name == "for" else None
            inner = varying
            if stop is not None:
                r = op.regions[0].args[0]
                self.loops[r] = op
                axes = self._depends(op, stop)
                self.axes[r] = tuple(sorted(axes))
                inner = varying | axes
            for region in op.regions:
                self._scan(region, inner)

    def _block(self, r: RangeType) -> int:
        return r.block if isinstance(r.block, int) else self.blocks[r.block]

    def _depends(self, loop: Op, v: Value) -> frozenset[int]:
        """The grid axes `v` depends on; a BackendError if it depends on anything the mapper
        cannot evaluate before the run."""
        op = v.owner
        if op is not None and op.name == "const":
            return frozenset()
        if op is not None and op.name in ("tile.begin", "tile.size"):
            if op.operands[0] in self.ranges:
                return frozenset({self.ranges.index(op.operands[0])})
            raise self._unsupported(loop, "the tile of an enclosing sequential loop")
        if op is not None and op.name == "cast":
            return self._depends(loop, op.operands[0])
        if op is not None and op.name in ARITH:
            return self._depends(loop, op.operands[0]) | self._depends(loop, op.operands[1])
        what = "a kernel argument" if op is None else f"the result of '{op.name}'"
        raise self._unsupported(loop, what)

    def _unsupported(self, loop: Op, what: str) -> BackendError:
        return BackendError(
            f"backend 'spatial' cannot map this td.tile() loop: its stop depends on {what}, "
            "and the mapper plans each program's trip count before the run",
            kernel=self.fn.name, loc=loop.loc,
            hint="compute the stop from the grid's tiles (t.begin, t.end, t.size) and ints, "
                 "e.g. td.tile(tq.end); or loop over the whole range and mask with td.where")

    def _eval(self, v: Value, coords: tuple[Any, ...]) -> np.ndarray:
        """`v` for the programs at grid coordinates `coords` (ints or equal-shaped arrays)."""
        op = v.owner
        assert op is not None  # `_depends` ruled the rest out
        t = op.result.type
        assert isinstance(t, TileType)
        if op.name == "const":
            out = np.asarray(int(op.attrs["value"]), dtype=np.int64)
        elif op.name in ("tile.begin", "tile.size"):
            axis = self.ranges.index(op.operands[0])
            rt = op.operands[0].type
            assert isinstance(rt, RangeType)
            block = self._block(rt)
            begin = np.asarray(coords[axis], dtype=np.int64) * block
            out = begin if op.name == "tile.begin" else np.minimum(block, rt.extent - begin)
        elif op.name == "cast":
            out = self._eval(op.operands[0], coords)
        else:
            out = _NP[op.name](self._eval(op.operands[0], coords),
                               self._eval(op.operands[1], coords))
        return out.astype(t.dtype.np).astype(np.int64)  # wrap as the run-time dtype does

    def limit(self, r: Value, g: tuple[int, ...]) -> int:
        """Where range `r`'s in-range lanes end for program `g`: its extent, or for a stop
        loop's range min(max(stop, 0), extent)."""
        rt = r.type
        assert isinstance(rt, RangeType)
        if r not in self.loops:
            return rt.extent
        key = (r, tuple(g[a] for a in self.axes[r]))  # programs alike along other axes share it
        if key not in self._memo:
            stop = loop_stop(self.loops[r])
            assert stop is not None
            self._memo[key] = int(np.clip(self._eval(stop, tuple(g)), 0, rt.extent))
        return self._memo[key]

    def limits(self, coords: tuple[np.ndarray, ...]) -> np.ndarray:
        """Every stop loop's limit (rows, in `loops` order) for the programs at `coords`."""
        shape = np.shape(coords[0])
        rows = []
        for r, loop in self.loops.items():
            stop = loop_stop(loop)
            rt = r.type
            assert stop is not None and isinstance(rt, RangeType)
            rows.append(np.broadcast_to(np.clip(self._eval(stop, coords), 0, rt.extent), shape))
        return np.stack(rows) if rows else np.zeros((0, *shape), dtype=np.int64)
