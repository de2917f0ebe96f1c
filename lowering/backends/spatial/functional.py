"""Functional execution of a dataflow config: each compute agent's programs run on the data.

Every compute agent lists the grid programs placed on its PE; they run with the NumPy reference
semantics (one vectorized call per op over that PE's programs), all writing into the same output
tensors. A program placed twice, or not at all, changes the result, so the tests catch a
mapper that loses or duplicates work. The phases of a kernel with several grids run in order,
each reading what the ones before it stored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy import disjoint
from lowering.backends.numpy.executor import RULES, Executor
from tiledsl.runtime.config import Config
from tiledsl.ir.core import Block, Function, Value
from tiledsl.ir.ops import ALLOCATIONS
from tiledsl.ir.types import TileType


def execute(fn: Function, config: Config, phases: list[dict[str, Any]], args: list[Any]
            ) -> list[Any]:
    allocations: dict[Value, np.ndarray] = {}
    host = Executor(fn, config)
    scalars = _host_values(fn, host, args)
    for op in fn.body.ops:
        if op.name in ALLOCATIONS:
            fill = [scalars[op.operands[0]]] if op.name == "tensor.full" else []
            allocations[op.result] = RULES[op.name](host, op, fill)[0]
    outputs = None
    for phase, dataflow in enumerate(phases):
        writers = disjoint.Writers()  # a disjoint store's word, checked across the PEs
        for agent in dataflow["agents"]:
            if agent["kind"] == "compute" and agent["programs"]:
                programs = np.asarray(agent["programs"], dtype=np.int64)
                outputs = Executor(fn, config, programs, phase, writers).run(list(args),
                                                                             allocations)
    if outputs is None:  # no program at all: outputs are the (untouched) allocations
        outputs = Executor(fn, config, np.zeros((0, 1), np.int64)).run(list(args), allocations)
    return outputs


def _host_values(fn: Function, host: Executor, args: list[Any]) -> dict[Value, Any]:
    """The kernel's host scalars: its scalar arguments, and the constants, arithmetic and casts
    on them outside the grids, computed by the NumPy backend's rules (as `td.full` fills)."""
    env: dict[Value, Any] = {v: np.asarray(a, dtype=v.type.dtype.np)
                             for v, a in zip(fn.args, args) if isinstance(v.type, TileType)}
    ops = [op for op in fn.body.ops
           if op.results and all(isinstance(r.type, TileType) for r in op.results)]
    host.block(Block([], ops), env)  # no return: it fills env
    return env
