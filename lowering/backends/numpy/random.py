"""NumPy rules of the random ops (`td.rand` and family): Philox as Triton computes it, from
tiledsl.lang.philox, on the grid-prefixed arrays of executor.py."""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy.executor import Executor, rule
from tiledsl.lang import philox
from tiledsl.ir.core import Op
from tiledsl.ir.ops import RANDOM_OPS
from tiledsl.ir.types import TileType

_HOST = {"rand": philox.rand, "randn": philox.randn, "randint": philox.randint,
         "rand4x": philox.rand4x, "randn4x": philox.randn4x, "randint4x": philox.randint4x}


def _random(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    seed, offsets = (np.asarray(x) for x in xs)
    t = op.operands[1].type
    assert isinstance(t, TileType)
    if not op.operands[0].type.shape:  # type: ignore[union-attr]  # one seed per program:
        seed = seed.reshape(seed.shape + (1,) * t.rank)  # over its lanes (else one per lane)
    out = _HOST[op.name](seed, offsets, op.attrs.get("n_rounds", philox.N_ROUNDS))
    return list(out) if isinstance(out, tuple) else [out]


for _name in RANDOM_OPS:
    rule(_name)(_random)


@rule("philox")
def _philox(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    seed, *counters = (np.asarray(x) for x in xs)
    t = op.operands[1].type
    assert isinstance(t, TileType)
    seed = seed.reshape(seed.shape + (1,) * t.rank)
    return list(philox.rounds(*philox.key(seed), *counters, op.attrs["n_rounds"]))
