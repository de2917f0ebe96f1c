"""The NumPy reference backend: defines what every kernel means; other backends are tested on it."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from lowering.backends.numpy import memory
from lowering.backends.numpy import bits as _bits  # noqa: F401 (registers its rules)
from lowering.backends.numpy import random as _random  # noqa: F401 (registers its rules)
from lowering.backends.numpy import host_random as _host_random  # noqa: F401 (registers a rule)
from lowering.backends.numpy import scans as _scans  # noqa: F401 (registers its rules)
from lowering.backends.numpy import block_sizes as _block_sizes  # noqa: F401 (registers rules)
from lowering.backends.numpy import views as _views  # noqa: F401 (registers its rules)
from lowering.backends.numpy import atomics as _atomics  # noqa: F401 (registers its rule)
from lowering.backends.numpy import asserts as _asserts  # noqa: F401 (registers its rule)
from lowering.backends.numpy import ptx as _ptx  # noqa: F401 (registers its rule)
from lowering.backends.numpy import fast_access as _fast_access  # noqa: F401 (registers steps)
from lowering.backends.numpy.defaults import default_blocks
from lowering.backends.numpy.executor import Executor
from lowering.backends.numpy.plan import plan_of
from tiledsl.runtime import registry
from tiledsl.runtime.config import Config, ConfigSpace
from tiledsl.errors import BackendError, ShapeError
from tiledsl.ir import views
from tiledsl.ir.core import Function
from tiledsl.ir.types import TensorType



class NumpyBackend:
    name = "numpy"

    def extend_space(self, space: ConfigSpace, fn: Function, **_: Any) -> ConfigSpace:
        """No knobs (any block sizes run, only speed changes); the fastest defaults here."""
        return default_blocks(space, fn)

    def run(self, fn: Function, args: list[Any], config: Config, **_: Any) -> list[Any]:
        for v, a in zip(fn.args, args):
            if isinstance(v.type, TensorType) and not isinstance(a, np.ndarray):
                raise BackendError(f"backend 'numpy' runs on NumPy arrays; argument '{v.hint}' "
                                   f"is a {type(a).__module__}.{type(a).__qualname__}")
        suspects = _integer_outputs(fn)
        saved = copy.deepcopy(args) if suspects else None  # (as the kernel finds them)
        executor = Executor(fn, config)
        if suspects:
            executor.drawn = {}
        outputs = check_written(fn, config, executor.run(args), executor.covered)
        suspects = [i for i in suspects if id(outputs[i]) not in executor.covered]
        if suspects:
            with memory.second_fill():
                drawn = {v: a.copy() for v, a in (executor.drawn or {}).items()}  # the same
                again = Executor(fn, config).run(saved, drawn)  # type: ignore[arg-type]
            for i in suspects:
                _same_both_runs(fn, config, i, outputs[i], again[i])
        return outputs


def check_written(fn: Function, config: Config, outputs: list[Any],
                  covered: set[int] = frozenset()) -> list[Any]:  # type: ignore[assignment]
    """`outputs`, once every element of each returned td.empty tensor was stored (floats here:
    see memory.unwritten; integers by a second run, NumpyBackend.run); what no store writes
    would be garbage on a GPU. `covered`: ids of
    tensors a store wrote whole, whose elements with the unwritten bits hold values computed
    from unwritten memory (the bits travel through arithmetic)."""
    for i, (v, out) in enumerate(zip(fn.outputs, outputs)):
        base = views.root(v)  # (an output may be a view of one: `return out.squeeze(-1)`)
        if base.owner is None or base.owner.name != "tensor.empty":
            continue
        mask = memory.unwritten(out)
        if mask is None or not mask.any():
            continue
        if id(out) in covered or base is not v and base in plan_of(fn).unfilled:  # whole
            first = tuple(int(j) for j in np.argwhere(mask)[0])
            read = _scratch_read(fn, base)
            raise ShapeError(f"output {i} ({out.dtype}{list(out.shape)}): {int(mask.sum())} of "
                             f"its {out.size} elements under {config}, the first at index "
                             f"{first}, hold values computed from {read or 'a td.empty tensor'}"
                             ", read where no store wrote it; on a GPU they would be garbage",
                             kernel=fn.name, loc=base.owner.loc, hint="store what is read first, "
                             "or allocate the tensor read with td.zeros(...)")
        raise _unwritten(fn, config, i, out, mask, base)
    return outputs


def _unwritten(fn: Function, config: Config, i: int, out: np.ndarray, mask: np.ndarray,
               base: Any) -> ShapeError:
    """The error for output i's elements in `mask`, which no store wrote (or whose values
    were computed from a td.empty scratch read where no store wrote it)."""
    first = tuple(int(j) for j in np.argwhere(mask)[0])
    hint = "make the stores cover the whole tensor under every block size, or allocate it " \
        "with td.zeros(...) or td.full(...)"
    read = _scratch_read(fn, base)
    if read is not None:
        hint += (f"; or a store writes them values computed from {read}, read where no store "
                 "wrote it (allocate that with zeros, or store it first)")
    return ShapeError(f"output {i} ({out.dtype}{list(out.shape)}): no store writes "
                      f"{int(mask.sum())} of its {out.size} elements under {config}, the first "
                      f"at index {first}; on a GPU they would hold garbage",
                      kernel=fn.name, loc=base.owner.loc if base.owner else None, hint=hint)


def _integer_outputs(fn: Function) -> list[int]:
    """The outputs from td.empty of integers or bools that no store surely writes whole: no
    value of theirs marks an element unwritten, so the backend runs the kernel twice."""
    unfilled = plan_of(fn).unfilled
    out = []
    for i, v in enumerate(fn.outputs):
        base = views.root(v)
        t = base.type
        if base.owner is not None and base.owner.name == "tensor.empty" and \
                base not in unfilled and isinstance(t, TensorType) and t.dtype.kind in "iub":
            out.append(i)
    return out


def _same_both_runs(fn: Function, config: Config, i: int, out: np.ndarray,
                    again: np.ndarray) -> None:
    """An integer output's elements that differ between runs with td.empty filled with two
    values: what no store wrote (or what was computed from memory no store wrote)."""
    mask = np.asarray(out) != np.asarray(again)
    if mask.any():
        raise _unwritten(fn, config, i, out, mask, views.root(fn.outputs[i]))


def _scratch_read(fn: Function, output: Any) -> str | None:
    """Another td.empty tensor the kernel loads from (Triton's layer-norm backward sums the
    rows of its `_dw` scratch, some never written when there are fewer rows than slots),
    named with its line; None if it loads none."""
    for op in fn.walk():
        if op.name != "load":
            continue
        src = views.root(op.operands[0])
        if src is not output and src.owner is not None and src.owner.name == "tensor.empty":
            line = src.owner.loc.line if src.owner.loc is not None else "?"
            return f"the td.empty tensor made at line {line}"
    return None


registry.register_backend(NumpyBackend())
