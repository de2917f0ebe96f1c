"""Op locality: every op of the tile IR is one definition (ir/ops.py: its typing rule and
traits) plus one rule per backend, and a new op needs nothing else."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.numpy.elementwise import ELEMENTWISE as NUMPY_ELEMENTWISE
from lowering.backends.numpy.executor import RULES as NUMPY_RULES
from lowering.backends.numpy.executor import Executor
from lowering.backends.triton.emit import KernelEmitter
from lowering.backends.triton.oprules import EMIT_RULES
from tiledsl.ir import ops
from tiledsl.ir.core import Op
from tiledsl.ir.ops import ELEMENTWISE, OPS, _def, tile
from tiledsl.ir.views import VIEW_OPS
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, to_value

# Ops each backend's driver handles itself: regions and terminators (the executors walk them),
# host allocations and views of tensors (the Triton launcher makes them).
STRUCTURAL = {"grid", "yield", "return"}
NUMPY_DRIVER = STRUCTURAL | {"for", "if", "while"}
TRITON_LAUNCHER = STRUCTURAL | {*ops.ALLOCATIONS, *VIEW_OPS}


def test_every_op_has_a_rule_per_backend() -> None:
    numpy_missing = [n for n in OPS if n not in NUMPY_RULES and n not in NUMPY_ELEMENTWISE
                     and n not in NUMPY_DRIVER]
    triton_missing = [n for n in OPS if n not in EMIT_RULES and n not in TRITON_LAUNCHER]
    assert numpy_missing == [] and triton_missing == []


def test_elementwise_ops_say_so() -> None:
    """Passes read traits, not op names: each NumPy elementwise op carries the trait."""
    assert all(ELEMENTWISE in OPS[n].traits for n in NUMPY_ELEMENTWISE)


@pytest.fixture
def clamp01() -> Iterator[Any]:
    """A new op, `clamp01`, defined the way every op is: one typing rule with its traits, one
    NumPy rule and one Triton rule. Removed again afterwards."""
    @_def("clamp01", traits=(ELEMENTWISE,))
    def _rule(ts: Any, attrs: dict, _res: Any) -> list:
        t = tile(ts[0], "clamp01 operand")
        return [t]

    def numpy_rule(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
        return [np.clip(xs[0], 0, 1)]

    def triton_rule(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
        em.assign(op, f"tl.minimum(tl.maximum({args[0]}, 0.0), 1.0)", indent)

    NUMPY_RULES["clamp01"], EMIT_RULES["clamp01"] = numpy_rule, triton_rule

    def frontend(x: Any) -> TileValue:
        v = to_value(x)
        return TileValue(current("clamp01").emit("clamp01", [v.value])[0])

    yield frontend
    for table in (OPS, NUMPY_RULES, EMIT_RULES):
        del table["clamp01"]


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial"])
def test_a_new_op_is_one_definition_and_one_rule_per_backend(clamp01: Any,
                                                             backend: str) -> None:
    @td.tile_kernel
    def clamped_sum(x):
        m, n = x.shape
        out = td.empty((m,), dtype=td.float32)
        for tm in td.tile(m):
            out[tm] = td.sum(clamp01(x[tm, :] * 2.0), axis=1)  # ragged rows masked as ever
        return out

    x = np.random.default_rng(0).standard_normal((37, 19)).astype(np.float32)
    ref = np.clip(x.astype(np.float64) * 2, 0, 1).sum(axis=1)
    td.testing.assert_close(clamped_sum.run(x, backend=backend), ref, np.float32)
    assert "clamp01" in OPS and ops.has_trait("clamp01", ELEMENTWISE)
