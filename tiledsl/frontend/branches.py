"""Runtime support for `if` statements, which `tiledsl.frontend.rewrite` turns into functions of the
names they assign:

    def _td_then_9(_td_env): ...the body...; return _td_rt.collect(locals(), NAMES)
    def _td_else_9(_td_env): ...the else body (or nothing)...
    _td_env_9 = _td_rt.branch(COND, _td_then_9, _td_else_9, _td_rt.capture(locals(), NAMES),
                              NAMES, 9)

On a Python condition `branch` runs one branch, as Python would (a condition on shapes, dtypes
or constants stays free). On a runtime scalar (`if m_size > 0:` with `m_size` loaded, a scalar
argument) it traces both branches into an `if` op, a conditional region like MLIR's `scf.if`:
each program runs the branch its condition picks, so work and stores in a branch are skipped
where the condition fails. The names a branch rebinds become the op's results; both branches
must give each the same dtype and shape. `and`, `or` and `not` in the condition short-circuit
as in Python (`both`, `either`, `negate`): `if i < n and x[i] > 0:` loads only where `i < n`.
A tile-shaped condition stays an error: selecting lanes is `td.where`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tiledsl import dtypes
from tiledsl.errors import ControlFlowError, Loc, TraceError
from tiledsl.ir.core import Block, Op, Value
from tiledsl.ir.views import root
from tiledsl.ir.ops import broadcastable
from tiledsl.frontend import foreign_calls, static_args
from tiledsl.frontend.choices import Choice, options_of
from tiledsl.frontend.pointers import Pointer, pointer
from tiledsl.frontend.tracer import Tracer, current
from tiledsl.frontend.values import (
    Tensor, TileValue, Unmerged, binary, broadcast_to, cast, constant, to_value, unary,
)

Branch = Callable[[dict], dict]
_NUMBER = (bool, int, float, np.bool_, np.integer, np.floating)
_MISSING = object()


def branch(cond: Any, then: Branch, orelse: Branch, env: dict, assigned: tuple[str, ...],
           line: int) -> dict:
    """The names bound after an `if` statement whose branches are `then` and `orelse`."""
    if cond is None:
        _no_triton_call()
    if not isinstance(cond, TileValue):
        out = dict(env)
        out.update((then if cond else orelse)(env))
        return out
    tr = current()
    loc = Loc(tr.file, line)
    c = condition(tr, cond, loc)
    op = Op("if", [c.value], [], {}, [Block(), Block()], loc)
    tr.blocks[-1].ops.append(op)
    outs = []
    for region, body in zip(op.regions, (then, orelse)):
        with tr.region(region, "if"):
            outs.append(body(dict(env)))
    merged = _merge(tr, op, env, assigned, outs, loc)
    out = dict(env)
    out.update(merged)
    return out


def condition(tr: Tracer, cond: TileValue, loc: Loc, what: str = "if") -> TileValue:
    """A bool scalar from a runtime condition of an `if` (or `while`: `what`); errors for tiles
    and for host-level values."""
    if cond.shape != ():
        tr.fail(ControlFlowError, f"an `if` on a tile of shape {tr.describe_shape(cond.shape)}: "
                "each lane would take its own branch", loc=loc,
                hint="select per lane with td.where(cond, x, y); an `if` takes a scalar "
                     "(e.g. td.sum(...) > 0, a loaded length, a scalar argument)")
    if tr.depth == "host":  # an int argument's test (`if divisor == 0: raise`): made static
        static_args.need_static(cond.value, tr.int_params | tr.float_params, truth=True)
        article = "an" if what == "if" else "a"
        tr.fail(ControlFlowError, f"{article} `{what}` on a runtime value outside the tile loops",
                loc=loc, hint=f"put the `{what}` inside the grid loop, where each program "
                              "decides for itself (`for t in td.tile(n): if alpha > 0: ...`); "
                              "conditions on shapes and dtypes are Python values already")
    if cond.dtype.is_bool:
        return cond
    return binary("ne", cond, 0)


def _merge(tr: Tracer, op: Op, env: dict, assigned: tuple[str, ...], outs: list[dict],
           loc: Loc) -> dict:
    """Make the names the branches rebind the results of `op` (each region ends in a yield)."""
    names, sides = [], []
    bases: dict[str, Any] = {}  # names of pointers, their tensors (pointers.py)
    same: dict[str, Any] = {}  # names both branches bind to one object (`p = b` in each)
    chosen: dict[str, list[tuple[str, Any]]] = {}  # names bound to other tensors (choices.py)
    for n in assigned:
        if n.startswith("_td_"):
            continue
        before = env.get(n, _MISSING)
        values = [out.get(n, before) for out in outs]
        if values[0] is values[1]:
            if values[0] is not before:
                same[n] = values[0]
            continue  # unchanged, or one object bound in both
        if any(v is _MISSING for v in values):
            continue  # bound in one branch only: not defined after the `if`
        moved = [v for v in values if isinstance(v, Pointer)]  # a pointer moved in a branch
        if moved and all(isinstance(v, Pointer) and v.base.value is moved[0].base.value or
                         isinstance(v, Tensor) and root(v.value) is root(moved[0].base.value)
                         for v in values):  # (the tensor itself: its first element)
            bases[n] = moved[0].base
            names.append(n)
            sides.append(values)
            continue
        if all(options_of(v) is not None for v in values):  # tensors chosen by the test
            chosen[n] = _choice_parts(n, values, names, sides)
            continue
        if not all(isinstance(v, (TileValue, *_NUMBER)) for v in values):
            kinds = " / ".join(type(v).__name__ for v in values)
            same[n] = Unmerged(TraceError(
                f"'{n}' ({kinds}) is rebound in an `if` on a runtime value, and used after "
                "it", kernel=tr.kernel, loc=loc, hint="only tile values and numbers can differ "
                "between the branches; choose tensors and tiles before the `if`"))
            continue
        names.append(n)
        sides.append(values)
    yielded: list[list[TileValue]] = [[], []]
    for i, region in enumerate(op.regions):
        with tr.region(region, "if"):
            yielded[i] = [to_value(_offset(values[i])) for values in sides]
    for k, n in enumerate(names):  # a name of two types is an error where it is used after
        error = _unify(tr, op, n, [yielded[0][k], yielded[1][k]], yielded, k, loc)
        if error is not None:  # the `if` (never, after an early exit: rotary's `X = X + ...`)
            same[n.rstrip("?+").partition("#")[0]] = Unmerged(error)
    keep = [k for k, n in enumerate(names) if n.rstrip("?+").partition("#")[0] not in same]
    names, yielded = [names[k] for k in keep], [[side[k] for k in keep] for side in yielded]
    for i, region in enumerate(op.regions):
        with tr.region(region, "if"):
            tr.emit("yield", [v.value for v in yielded[i]], loc=loc)
    op.results = [Value(yielded[0][k].type, n) for k, n in enumerate(names)]
    for r in op.results:
        r.owner = op
    out = {n: TileValue(r, yielded[0][k].weak and yielded[1][k].weak)
           for k, (n, r) in enumerate(zip(names, op.results))}
    merged = {n: Pointer(bases[n], v) if n in bases else v for n, v in out.items()}
    for n, parts in chosen.items():  # each option: its condition, its pointer's offset
        if n in same:  # (an option's offset of two shapes: Unmerged)
            continue
        merged[n] = Choice([(merged.pop(key + "?"), Pointer(p.base, merged.pop(key + "+"))
                             if isinstance(p, Pointer) else p) for key, p in parts])
    return same | merged


def _choice_parts(n: str, values: list[Any], names: list[str], sides: list[list[Any]]
                  ) -> list[tuple[str, Any]]:
    """The options of a name the branches bind to different tensors: the `if` yields each
    option's condition (False on the other branch) and its pointer's offset, under names of
    their own (`key?`, `key+`)."""
    parts = []
    for i, v in enumerate(values):
        for c, p in options_of(v) or ():
            key = f"{n}#{len(parts)}"
            names.append(key + "?")
            sides.append([True if c is None else c, False][::1 - 2 * i])
            if isinstance(p, Pointer):
                names.append(key + "+")
                sides.append([p.offset, 0][::1 - 2 * i])
            parts.append((key, p))
    return parts


def _offset(v: Any) -> Any:
    """What an `if` yields for a value: a pointer's offset (a tensor's own: 0)."""
    if isinstance(v, Pointer):
        return v.offset
    return pointer(v, 0).offset if isinstance(v, Tensor) else v


def _unify(tr: Tracer, op: Op, name: str, pair: list[TileValue],
           yielded: list[list[TileValue]], k: int, loc: Loc) -> TraceError | None:
    """Give `name` one type in both branches (a weak number takes the other side's), or
    return the error to raise where it is used after the `if`."""
    a, b = pair
    if a.type == b.type:
        return None
    for weak, strong, side in ((a, b, 0), (b, a, 1)):
        if weak.weak and broadcastable(weak.shape, strong.shape):
            with tr.region(op.regions[side], "if"):
                yielded[side][k] = broadcast_to(cast(weak, strong.dtype), strong.shape)
            return None
    shown = name.rstrip("?+").partition("#")[0]
    return TraceError(f"'{shown}' is {a.dtype}{tr.describe_shape(a.shape)} where the `if` "
                      f"condition holds but {b.dtype}{tr.describe_shape(b.shape)} where it "
                      "does not, and it is used after the `if`", kernel=tr.kernel, loc=loc,
                      hint="give it one dtype and shape in both branches: cast with "
                           ".astype(...), or bind it before the `if` with its final type")


def _no_triton_call() -> None:
    """Fail if the condition being tested (None) comes from a Triton function called on the
    kernel's line (`if libdevice.isnan(v):`): its stub returns None while the kernel traces,
    which would silently take the else branch. (None from the user's code stays Python.)"""
    if (call := foreign_calls.triton_call_in(foreign_calls.caller_frames())) is not None:
        current().fail(TraceError, foreign_calls.message(call[0]), loc=call[1],
                       hint=foreign_calls.hint(call[0]))


def truth(value: Any, line: int) -> Any:
    """The condition of an `if` the rewrite leaves as it is (it has return, break or
    continue): a runtime value cannot steer it."""
    if value is None:
        _no_triton_call()
    if isinstance(value, TileValue):  # of int arguments (FlagGems' mse_loss: `if reduction
        # == Reduction.NONE.value: return ...`), and in host code of Python float ones
        tr = current()  # (its lerp_: `if weight < 0.5: return ...`): traced per their values
        params = tr.int_params | tr.float_params if tr.depth == "host" else tr.int_params
        static_args.need_static(value.value, params, truth=True)
        current().fail(ControlFlowError, "an `if` on a runtime value cannot contain return, "
                       "break or continue", loc=Loc(current().file, line),
                       hint="move them out of the `if`: a branch on a runtime value is traced "
                            "as a region that every program enters or skips, and rejoins")
    return value


def loop_test(value: Any, line: int) -> Any:
    """The condition of a `while` statement the rewrite left as it is (it has break, return or
    an else clause): a Python value (a loop unrolled while tracing), not a runtime one."""
    if value is None:
        _no_triton_call()
    if isinstance(value, TileValue):
        tr = current()
        tr.fail(ControlFlowError, "a `while` loop on a runtime value cannot contain `break` or "
                "`return`, or have an else clause", loc=Loc(tr.file, line),
                hint="carry a flag and test it in the condition (`while go and i < n:`); "
                     "`continue` skips the rest of a trip")
    return value


def choose(cond: Any, then: Callable[[], Any], orelse: Callable[[], Any], line: int) -> Any:
    """`then() if cond else orelse()`, a conditional expression: on a runtime scalar an `if`
    whose branches each compute their side (Triton's `a if c else b`: Liger's cross entropy
    counts a correct token as `1.0 if argmax_idx == y else 0.0`)."""
    if not isinstance(cond, TileValue):
        return then() if cond else orelse()
    out = branch(cond, lambda env: {"choice": then()}, lambda env: {"choice": orelse()}, {},
                 ("choice",), line)
    return out["choice"]


def both(first: Any, second: Callable[[], Any], line: int) -> Any:
    """`first and second()` in an `if` condition; on a runtime scalar, `second` is evaluated
    only where `first` holds (an `if` op)."""
    if not isinstance(first, TileValue):
        return first and second()
    return _short(first, second, False, line)


def either(first: Any, second: Callable[[], Any], line: int) -> Any:
    """`first or second()` in an `if` condition, short-circuit as `both`."""
    if not isinstance(first, TileValue):
        return first or second()
    return _short(first, second, True, line)


def logical(first: Any, second: Callable[[], Any], line: int, when: bool) -> Any:
    """`first and second()` (`when` False) or `first or second()` (True) outside an `if` test.
    On bool tiles it is Triton's `logical_and` / `logical_or`, elementwise, both sides
    evaluated (`mask = offs < n and offs >= 0`); on a runtime scalar it short-circuits, as in
    a test, but in a scan's or fold's combine function and in host code (which have no
    branches) it is elementwise too (FlagGems' `def reduce_all(a, b): return a and b`, its
    isclose's `zero_tol = (rtol == 0) and (atol == 0)` on arguments); on Python values it is
    Python's."""
    combine = isinstance(first, TileValue) and current().depth in ("combine", "host")
    if not isinstance(first, TileValue) or first.shape == () and not combine:
        return (either if when else both)(first, second, line)
    rest = second()
    if isinstance(rest, (bool, np.bool_)):  # `window_size_left < 0 and right == 0` in host
        rest = to_value(bool(rest))         # code, the right side a Python comparison
    if isinstance(rest, TileValue) and first.dtype.is_bool and rest.dtype.is_bool:
        return binary("or" if when else "and", first, rest)
    tr = current()
    tr.fail(ControlFlowError, f"`{'or' if when else 'and'}` of a tile: Triton's logical "
            f"{'or' if when else 'and'} takes two bool tiles", loc=Loc(tr.file, line),
            hint="compare to make bool tiles (`a < n and b >= 0`), or write `&` / `|`")


def logical_not(value: Any, line: int) -> Any:
    """`not value` outside an `if` or `while` test: on a tile, Triton's elementwise logical
    not (`mask=(not if_pad) and cond`); on a runtime scalar or a Python value, as in a test."""
    if isinstance(value, TileValue) and (value.shape != () or current().depth == "combine"):
        return unary("not", value if value.dtype.is_bool else binary("ne", value, 0))
    return negate(value, line)


def negate(value: Any, line: int) -> Any:
    """`not value` in an `if` condition."""
    if not isinstance(value, TileValue):
        return not value
    tr = current()
    return unary("not", condition(tr, value, Loc(tr.file, line)))


def _short(first: TileValue, second: Callable[[], Any], when: bool, line: int) -> TileValue:
    """`when` where `first` is `when`, else `second()` (as a bool scalar)."""
    tr = current()
    loc = Loc(tr.file, line)
    c = condition(tr, first, loc)
    op = Op("if", [c.value], [], {}, [Block(), Block()], loc)
    tr.blocks[-1].ops.append(op)
    decided, later = (0, 1) if when else (1, 0)
    with tr.region(op.regions[decided], "if"):
        tr.emit("yield", [constant(when, dtypes.bool_).value], loc=loc)
    with tr.region(op.regions[later], "if"):
        rest = second()
        if not isinstance(rest, TileValue):  # known when tracing (`y is not None`): decided
            tr.blocks[-2].ops.remove(op)  # `rt and False` is False, `rt and True` is `rt`
            return c if bool(rest) != when else when  # type: ignore[return-value]
        tr.emit("yield", [condition(tr, rest, loc).value], loc=loc)
    op.results = [Value(c.type, "cond")]
    op.results[0].owner = op
    return TileValue(op.results[0])
