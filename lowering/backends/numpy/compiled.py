"""A block of the NumPy executor compiled into one straight-line Python function.

The interpreter (`Executor.interpret`) walks a block's steps on every run: per op it tests the
step's kind, gathers the operands from the environment (a dict keyed by IR value), calls the
rule and stores the results back. `compile_block` does that walk once, for each block of a
function (cached in its plan, keyed by the block and whether it releases its temporaries), and
writes Python source that does the same work with the walk's decisions made: operands are local
variables, each op one call of its rule (or of the elementwise kernel, its function and dtype
resolved), values dead from an op on are `del`eted there. Values that a nested region (a grid,
loop or `if` body) reads are also written to the environment, which structured ops run on as
the interpreter's do. The results are the interpreter's: the same rules run in the same order
on the same values (tests/backends/numpy/test_numpy_compiled.py checks that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lowering.backends.numpy.branches import run_if
from lowering.backends.numpy.whiles import run_while
from lowering.backends.numpy.elementwise import compute_dtype, evaluate, function_of
from lowering.backends.numpy.plan import uses_in
from tiledsl.ir.core import Block, Op, Value
from tiledsl.ir.ops import ALLOCATIONS

Compiled = Callable[[Any, dict[Value, Any]], list[Any]]  # (executor, env) -> the block's yield
# op name -> (op, plan) -> a step that runs it as its rule does, or None (fast_access.py)
SPECIALIZED: dict[str, Callable[[Op, Any], Callable[..., list[Any]] | None]] = {}
made = 0  # blocks compiled (tests check that a second run compiles none)


def compile_block(ex: Any, block: Block, release: bool) -> Compiled:
    """`block` of `ex`'s function as one function of (executor, env); with `release`, the
    environment's copies of values leave it after their last use, as the interpreter's. The
    regions of its grids and loops are compiled too (`ex.compiled`)."""
    global made
    made += 1
    source, names = _source(ex, block, release)
    namespace: dict[str, Any] = {"run_if": run_if, "run_while": run_while, "_ew": evaluate,
                                 "_unary": _unary, "_binary": _binary, **names}
    exec(compile(source, f"<tiledsl numpy {ex.fn.name}>", "exec"), namespace)
    run = namespace["run"]
    run.source = source  # type: ignore[attr-defined]
    return run


def specialize(name: str) -> Callable[[Callable], Callable]:
    """Register a maker of steps for op `name` (one per op, made when its block compiles)."""
    def deco(make: Callable) -> Callable:
        SPECIALIZED[name] = make
        return make
    return deco


def _source(ex: Any, block: Block, release: bool) -> tuple[str, dict[str, Any]]:
    """The function's source and the objects its names stand for."""
    steps = ex.steps(block)
    names: dict[str, Any] = {}
    local: dict[Value, str] = {}  # IR value -> its local variable
    shared = _shared(steps)  # values written to env too: nested regions read them there
    in_env = set(block.args) | shared  # (what `release` takes out of env again)
    lines = ["def run(ex, env):"]
    fresh = iter(range(1 << 30))  # local variable numbers

    def bind(obj: Any, prefix: str) -> str:
        key = f"{prefix}{len(names)}"
        names[key] = obj
        return key

    def read(v: Value) -> str:  # a value defined outside the block (or a block arg): from env
        if v not in local:
            local[v] = f"v{next(fresh)}"
            lines.append(f"    {local[v]} = env[{bind(v, 'V')}]")
        return local[v]

    for op, kind, rule, operands, results, drop in steps:
        for v in drop:
            if v in local:
                lines.append(f"    del {local.pop(v)}")
            if release and v in in_env:
                lines.append(f"    env.pop({bind(v, 'V')}, None)")
        args = [read(v) for v in operands]
        body = ex.compiled(op.regions[0], True) if kind in ("grid", "for") else None
        if kind == "rule" and op.name in SPECIALIZED:
            rule = SPECIALIZED[op.name](op, ex.plan) or rule
        call = _call(op, kind, rule, args, bind, body and bind(body, "B"))
        if call is None:  # return or yield
            lines.append(f"    return [{', '.join(args)}]")
            return "\n".join(lines) + "\n", names
        outs = [f"v{next(fresh)}" for _ in results]
        for v, o in zip(results, outs):
            local[v] = o
        if not outs:
            lines.append(f"    {call}")
        elif kind == "elementwise" or len(outs) == 1:
            lines.append(f"    {outs[0]} = {call}{'' if kind == 'elementwise' else '[0]'}")
        else:
            lines.append(f"    _t = {call}")
            lines.extend(f"    {o} = _t[{i}]" for i, o in enumerate(outs))
        lines.extend(f"    env[{bind(v, 'V')}] = {local[v]}" for v in results if v in shared)
    lines.append("    return []")
    return "\n".join(lines) + "\n", names


def _call(op: Op, kind: str, rule: Any, args: list[str], bind: Callable[[Any, str], str],
          body: str | None) -> str | None:
    """The expression that runs `op` (None for a return or yield)."""
    o = bind(op, "O")
    xs = f"[{', '.join(args)}]"
    if kind == "return":
        return None
    if kind == "rule" and op.name in ALLOCATIONS:
        return f"ex.allocate({o}, {bind(rule, 'R')}, {xs})"
    if kind == "rule":
        return f"{bind(rule, 'R')}(ex, {o}, {xs})"
    if kind == "elementwise":
        f = function_of(op.name)
        how = {1: "_unary", 2: "_binary"}.get(len(args), "_ew")
        operands = xs if how == "_ew" else ", ".join(args)
        return f"{how}({bind(f, 'F')}, {operands}, {bind(rule, 'D')})"
    if kind == "grid":
        return f"ex.grid_step({o}, env, {body})"
    if kind == "for":
        return f"ex.loop({o}, env, {body})"
    if kind == "if":
        return f"run_if(ex, {o}, env)"
    if kind == "while":
        return f"run_while(ex, {o}, env)"
    return f"ex.no_rule({o})"


def _shared(steps: list[tuple]) -> set[Value]:
    """The values that ops with regions read (in them or as operands): they run on env."""
    out: set[Value] = set()
    for step in steps:
        op = step[0]
        if op.regions:
            out.update(uses_in(op))
    return out


def _unary(f: Callable[..., Any], x: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    """elementwise.evaluate of one operand (without its list)."""
    return np.asarray(f(x.astype(compute_dtype(x.dtype), copy=False))).astype(out_dtype,
                                                                              copy=False)


def _binary(f: Callable[..., Any], x: np.ndarray, y: np.ndarray, out_dtype: np.dtype
            ) -> np.ndarray:
    """elementwise.evaluate of two operands (both computed in the first's dtype)."""
    work = compute_dtype(x.dtype)
    return np.asarray(f(x.astype(work, copy=False), y.astype(work, copy=False))).astype(
        out_dtype, copy=False)
