"""Loads and stores as compiled blocks run them: the op's facts resolved once, its recipe read.

`executor._load` and `executor._store` work out on every call what depends on the op alone
(its tensor's rank, whether the function writes the tensor it loads, whether its indices are
its operands as they are) before they look up the access's recipe (prepared.py). The steps
here are made once per op, when compiled.py compiles its block: each looks the recipe up
directly and runs it, and hands every access it does not serve (no recipe yet, a gather, a
masked access, one in a loop's idle programs) to the rule itself, so results are the rule's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lowering.backends.numpy import compiled, prepared
from lowering.backends.numpy.executor import RULES, Executor
from lowering.backends.numpy.plan import Plan
from tiledsl.ir import views
from tiledsl.ir.core import Op
from tiledsl.ir.gathers import access_parts, gathers
from tiledsl.ir.types import TensorType

Step = Any  # (Executor, Op, list) -> list, as a rule


def _served(op: Op) -> tuple[TensorType, bool] | None:
    """The op's tensor type and whether its index operands are its indices as they are (see
    executor._facts), for an access a recipe may serve (None: never, a gather or masked)."""
    tensor = op.operands[0].type
    if not isinstance(tensor, TensorType) or op.attrs.get("mask") or gathers(op):
        return None
    owner = op.operands[0].owner
    if owner is not None and owner.name == "tensor.memory":  # the rule checks its lanes
        return None
    plain = not op.attrs.get("full", ()) and not any(
        v.owner is not None and v.owner.name == "tile.begin" for v in access_parts(op)[0])
    return tensor, plain


def _recipe(cache: dict[tuple, prepared.Recipe], op: Op, arr: np.ndarray, indices: list[Any],
            rank: int) -> prepared.Recipe | None:
    """The access's recipe, if one was made and it takes a view (else the rule serves it)."""
    k = prepared.key(op, arr, indices, rank)
    r = None if k is None else cache.get(k)
    return None if r is None or r.view is None else r


@compiled.specialize("load")
def load_step(op: Op, plan: Plan) -> Step | None:
    served = _served(op)
    if served is None or views.root(op.operands[0]) in plan.tracked or op.attrs.get("locked"):
        return None  # (the rule records them: disjoint.py, locks.py)
    tensor, plain = served
    rule, n, cache = RULES["load"], len(tensor.shape), plan.accesses
    other = op.attrs.get("other")
    written = views.root(op.operands[0]) in plan.written

    def load(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
        arr = xs[0]
        r = _recipe(cache, op, arr, xs[1:n + 1] if plain else ex.indices(op, xs, tensor),
                    ex.rank)
        if r is None:
            return rule(ex, op, xs)
        out = prepared.load(r, arr, other)
        if written and np.may_share_memory(out, arr):
            out = out.copy()  # (as executor._load)
        return [out]
    return load


@compiled.specialize("store")
def store_step(op: Op, plan: Plan) -> Step | None:
    served = _served(op)
    if served is None or views.root(op.operands[0]) in plan.tracked or op.attrs.get("locked"):
        return None  # (the rule records them: disjoint.py, locks.py)
    tensor, plain = served
    rule, n, cache = RULES["store"], len(tensor.shape), plan.accesses

    def store(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
        if ex.active is not None:
            return rule(ex, op, xs)
        arr = xs[0]
        r = _recipe(cache, op, arr, xs[1:n + 1] if plain else ex.indices(op, xs[:-1], tensor),
                    ex.rank)
        if r is None:
            return rule(ex, op, xs)
        if r.covers:
            ex.covered.add(id(arr))
        prepared.store(r, arr, xs[-1])
        return []
    return store
