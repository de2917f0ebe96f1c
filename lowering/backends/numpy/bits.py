"""NumPy rule of `bitcast`: the same bits read as another dtype of the same width."""

from __future__ import annotations

from typing import Any

from lowering.backends.numpy.executor import Executor, rule
from tiledsl.ir.core import Op


@rule("bitcast")
def _bitcast(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    return [xs[0].view(op.result.type.dtype.np)]  # type: ignore[union-attr]
