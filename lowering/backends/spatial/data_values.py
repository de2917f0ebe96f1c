"""Values that steer a grid's control flow, read from the data: the stop of a jagged row's loop
(`td.tile(n, stop=(ends - starts).max())`), the condition of an `if` on a loaded label.

The spatial backend plans every program's copies before the simulator runs, and it is given
the kernel's real arguments (`simulate`, `run`, `source`). A value computed from loads of the
kernel's input tensors, its scalar arguments, the grid's tiles and constants is therefore
known per program at plan time: it is evaluated here for every program of the grid at once,
by the NumPy backend's own rules (so the plan and the functional run agree exactly).

A value is known before the run only if it reads nothing the kernel itself writes (a tensor
it stores to, a temporary), nothing an enclosing sequential loop iterates or carries, and no
loop's or `if`'s result; `slice_of` names what else it depends on, for the BackendError.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from lowering.backends.numpy.executor import Executor
from lowering.backends.numpy.memory import RangeRT
from tiledsl.runtime.config import Config
from tiledsl.ir.core import Block, Function, Op, Value, walk
from tiledsl.ir.ops import ALLOCATIONS
from tiledsl.ir.types import RangeType, TensorType
from tiledsl.ir.views import root

WRITES = ("store", "atomic")


class Unknowable(Exception):
    """What a value depends on that is not known before the run (a phrase for the message)."""


class DataValues:
    """Per-program values of one grid (`grid`, phase `phase`), evaluated from `args` (the
    kernel's arguments in order) when asked (`values`); `slice_of` checks a value can be."""

    def __init__(self, fn: Function, grid: Op, phase: int, config: Config | None,
                 args: list[Any] | None) -> None:
        self.fn = fn
        self.ranges = list(grid.regions[0].args)
        self.phase = phase
        self.config = config
        self.args = args
        self.host_ops = {id(op) for op in fn.body.ops}
        self.written = {root(op.operands[0]) for op in walk(fn.body) if op.name in WRITES}
        self._env: tuple[dict[Value, Any], dict[Value, Any]] | None = None
        self._done: set[int] = set()

    def slice_of(self, v: Value) -> tuple[list[Op], frozenset[int], bool]:
        """The ops computing `v` (operands first), the grid axes it varies along and whether it
        reads a tensor; `Unknowable` if it depends on something the run decides."""
        ops: list[Op] = []
        seen: set[int] = set()
        axes: set[int] = set()
        loads = False

        def visit(u: Value) -> None:
            nonlocal loads
            op = u.owner
            if op is None:
                if u in self.ranges:
                    axes.add(self.ranges.index(u))
                elif u not in self.fn.args:
                    raise Unknowable("the tile or a carried value of an enclosing sequential "
                                     "loop")
                return
            if id(op) in seen:
                return
            seen.add(id(op))
            if op.regions:
                raise Unknowable(f"the result of a '{op.name}'")
            if op.name in ALLOCATIONS:
                raise Unknowable("a tensor this kernel allocates and writes" if op.name !=
                                 "tensor.random" else "random numbers drawn on each call")
            if op.name == "load":
                loads = True
                if root(op.operands[0]) in self.written:
                    raise Unknowable(f"a load of '{root(op.operands[0]).hint}', a tensor this "
                                     "kernel writes")
            for o in op.operands:
                visit(o)
            ops.append(op)

        visit(v)
        return ops, frozenset(axes), loads

    def values(self, v: Value, counts: list[int]) -> np.ndarray:
        """`v` for every program of the grid, shaped like the grid (`counts` programs along
        each axis); the caller has checked it with `slice_of`."""
        assert self.args is not None and self.config is not None
        ex = Executor(self.fn, self.config, None, self.phase)
        ex.tensors = {}
        host, inner = self._environments(ex, counts)
        ops = [op for op in self.slice_of(v)[0] if id(op) not in self._done]
        self._done |= {id(op) for op in ops}
        with np.errstate(all="ignore"):
            ex.block(Block([], [op for op in ops if id(op) in self.host_ops]), host)
            inner.update({k: x.reshape((1,)) if isinstance(x, np.ndarray) and x.ndim == 0
                          and not isinstance(k.type, TensorType) else x
                          for k, x in host.items() if k not in inner})
            ex.rank, ex.grid_sizes = 1, tuple(counts)
            for k, r in enumerate(self.ranges):  # the ranges of all programs, as `grid` sets them
                inner[r] = self._range(k, counts)
            ex.block(Block([], [op for op in ops if id(op) not in self.host_ops]), inner)
        x = np.asarray(inner[v] if v in inner else host[v])
        return np.broadcast_to(x.reshape(-1), (int(np.prod(counts)),)).reshape(counts)

    def _range(self, axis: int, counts: list[int]) -> RangeRT:
        rt = self.ranges[axis].type
        assert isinstance(rt, RangeType) and self.config is not None
        block = Executor(self.fn, self.config).block_size(rt.block)
        programs = np.array(list(itertools.product(*(range(c) for c in counts))),
                            dtype=np.int64).reshape(-1, len(counts))
        return RangeRT(rt.extent, block, programs[:, axis] * block, None)

    def _environments(self, ex: Executor, counts: list[int]
                      ) -> tuple[dict[Value, Any], dict[Value, Any]]:
        """The host environment (arguments, then host values) and the grid's, kept between
        calls so each op runs once."""
        if self._env is None:
            assert self.args is not None
            host: dict[Value, Any] = {}
            for v, a in zip(self.fn.args, self.args):
                host[v] = a if isinstance(v.type, TensorType) else \
                    np.asarray(a, dtype=v.type.dtype.np)  # type: ignore[union-attr]
            self._env = host, {}
        return self._env
