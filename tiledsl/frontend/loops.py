"""Runtime support for the loops `tiledsl.frontend.rewrite` turns into functions of their carried names.

A rewritten `for` statement calls `loop(iterable, body, env, assigned, labels, line)`: `env` holds
the names the body assigns that were bound before the loop, and `body(item, env)` returns the
names bound at its end. Over a `td.tile`/`td.grid` range this traces the body once into a `grid`
or `for` op; over anything else it is an ordinary Python loop (unrolled while tracing). A
rewritten `while` statement calls `while_loop`, which traces a `while` op once its condition is
a runtime value.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from tiledsl import dtypes
from tiledsl.frontend.branches import (  # noqa: F401 (for rewrite)
    both, branch, choose, either, logical, logical_not, loop_test, negate, truth,
)
from tiledsl.frontend.branches import condition
from tiledsl.lang.asserts import check  # noqa: F401 (for rewrite)
from tiledsl.errors import ControlFlowError, Loc, TileDSLError, TraceError, user_loc, warn
from tiledsl.ir.core import Block, Op, Value, walk
from tiledsl.ir.ops import broadcastable
from tiledsl.ir.same import same_value
from tiledsl.ir.types import UNBOUNDED, RangeType
from tiledsl.ir.views import root
from tiledsl.lang.language import Counted, TileRange
from tiledsl.frontend import locks
from tiledsl.frontend.captured import capture as capture_tensor, is_foreign_tensor
from tiledsl.frontend.jagged import jagged_mask, jagged_rows
from tiledsl.frontend.pointers import Pointer
from tiledsl.frontend.tracer import Induction, Tracer, active, current
from tiledsl.runtime import returns
from tiledsl.frontend.values import (
    Tensor, Tile, TileValue, Unmerged, broadcast_to, cast, common_dtype, need_static, to_value,
)

Body = Callable[[Any, dict], dict]
same = dtypes.DType.same  # the rewrite's `a is b` (frontend/rewrite.py)
keyed = dtypes.DType.keyed  # and its `table[x.dtype]`
contains = dtypes.DType.contains  # and its `x.dtype in {torch.float16, ...}`
_NUMBER = (bool, int, float, np.bool_, np.integer, np.floating)


def to_of(x: Any) -> Any:
    """The rewrite's `x.to` (frontend/rewrite.py): a number in a Triton body is a constexpr
    there, which `.to(dtype)` makes a scalar of that dtype (flash-attn's `zero = 0.0;
    tl.where(x >= 0, x, zero.to(x.dtype))`; fla's `(i * BT).to(tl.int64)` of a loop counter
    that tiledsl unrolls as a Python int, where Triton's loop makes it a scalar)."""
    if type(x) in (bool, int, float) and active() is not None and current().triton_body:
        x = to_value(x)
    if active() is not None and is_foreign_tensor(x, zero_d=True):
        return functools.partial(_foreign_to, x)
    return x.to


def _foreign_to(x: Any, *args: Any, **kwargs: Any) -> Any:
    """A user's torch tensor's `x.to(...)` in a kernel (vLLM's causal conv moves its metadata
    tables: `batch_ptr.to(x.device)`): the kernel's device is where the call's arrays are, so
    moving there is x itself (the runner passes x to the backend); a dtype still converts."""
    def kernel_device(a: Any) -> bool:
        return type(a).__name__ == "Device" and type(a).__module__ == "tiledsl.lang.devices"
    args = tuple(a for a in args if not kernel_device(a))
    kwargs = {k: v for k, v in kwargs.items() if not kernel_device(v)}
    return x.to(*args, **kwargs) if args or kwargs else x
_CARRIED = (TileValue, Pointer) + _NUMBER  # what a loop carries across its trips


class Carried:
    """A value a loop carries as one tile of its own making (a block pointer's offsets,
    lang/block_ptrs.py): `carried()` is the tile, `rebuilt(tile)` the value again."""

    def carried(self) -> TileValue:
        raise NotImplementedError

    def rebuilt(self, v: TileValue) -> Any:
        raise NotImplementedError

    def same_kind(self, other: Any) -> bool:
        """Whether `other` is this value moved (what a trip may leave in its name)."""
        raise NotImplementedError


def _carries(v: Any) -> bool:
    return isinstance(v, _CARRIED + (Carried,))
UNBOUNDED_BLOCK = 256  # the largest block the tuner tries for a loop with no static bound
launch: Callable[..., Any]  # `k[grid](...)`, set by frontend/launches.py
UNROLL_WARN = 16  # trips of a Python range inside the grid past which its unrolling warns


def capture(scope: dict, names: tuple[str, ...]) -> dict:
    """The subset of `names` bound in `scope` (a `locals()` snapshot)."""
    return {n: scope[n] for n in names if n in scope}


collect = capture


def result(value: Any, line: int) -> Any:
    """What the kernel returns: tensors (or nothing; a tuple may hold None for an optional
    output, or a Python number the trace computed: tiledsl/runtime/returns.py); anything else
    is an error at `line`."""
    if value is None:
        return None
    tr = current()
    if tr.valued:  # a torch tensor computed from the values (torchao's `m_sizes`): a copy
        value = returns.map_tensors(value, lambda r: capture_tensor(r, "result").clone()
                                    if is_foreign_tensor(r) else r)
    tuple_ = isinstance(value, (tuple, list))
    items = returns.flat(value) if tuple_ else [value]  # (nested: mamba3's `Out, [s, k, v]`)
    items = [r for r in items if r is not None]  # an optional output left out (returns.py)
    items = [x for r in items for x in (returns.inner_tensors(r) if returns.is_subclass(r)
                                        else [r])]  # (a tensor subclass: tensor_subclasses.py)
    for r in items:
        if tuple_ and returns.is_number(r):  # Liger's `return y, rstd, BLOCK_SIZE, num_warps`
            continue
        if isinstance(r, TileValue):
            scalar = not r.value.type.shape
            tr.fail(TraceError, f"the kernel returns a {'runtime scalar' if scalar else 'tile value'}",
                    loc=Loc(tr.file, line),
                    hint="a number returned beside the tensors must be known when the kernel "
                         "traces (a size, a block size); store a runtime one into a tensor (td.empty((1,), "
                         "dtype=...))"
                    if scalar else "return tensors: allocate with td.empty(...) and store "
                    "tiles into them inside the tile loop")
        if not isinstance(r, Tensor):
            name = type(r).__name__
            article = "an" if name[:1].lower() in "aeiou" else "a"
            tr.fail(TraceError, f"the kernel returns {article} {name}; kernels return tensors "
                    "(or nothing, when they write into arguments), and a tuple of them (of "
                    "lists and tuples of them) may hold None and Python numbers",
                    loc=Loc(tr.file, line))
    _check_written(tr, [r for r in items if isinstance(r, Tensor)], line)
    return value


def _check_written(tr: Tracer, items: list[Tensor], line: int) -> None:
    """A returned td.empty tensor that no store writes holds whatever memory held: NaN on the
    NumPy backend, garbage on a GPU. (Whether stores cover every element is not checked.)"""
    empty = {id(r.value): r for r in items if r.value.owner is not None
             and r.value.owner.name == "tensor.empty" and 0 not in r.value.type.shape}
    if not empty:
        return
    for op in walk(tr.body):
        if op.name == "store":  # into the tensor or a view of it (`out.view(-1)[t] = ...`)
            empty.pop(id(root(op.operands[0])), None)
    for r in empty.values():
        loc = r.value.owner.loc if r.value.owner is not None else None
        where = f"td.empty at line {loc.line}" if loc is not None else "td.empty"
        what = f"the tensor from {where}" if r.name.startswith("<") else f"'{r.name}' ({where})"
        skipped = tr.no_program
        tr.fail(TraceError, f"the kernel returns {what}, which no store writes: its values would "
                "be whatever memory held" + ("" if skipped is None else f" (the grid at line "
                                             f"{skipped.line} has no program: a size is 0)"),
                loc=Loc(tr.file, line),
                hint="store tiles into it inside a tile loop (out[t] = ...), or allocate it "
                     "with td.zeros(...) or td.full(...)")


def plain(iterable: Any, line: int, what: str = "else") -> Any:
    """The iterable of a loop the rewrite left alone: it has a `what` statement (break,
    continue or return) at `line` that tiledsl.frontend.exits cannot fold, or an else clause."""
    if isinstance(iterable, Counted):
        current().fail(TraceError, f"a loop to a runtime bound cannot have {what!r} here: "
                       "each program runs it as a `while` loop to its own bound",
                       loc=Loc(current().file, line),
                       hint="guard the remaining work with an `if` on a value the loop carries, "
                            "or write the `while` loop yourself with the exit in its condition")
    if isinstance(iterable, TileRange):
        tr = current()
        kind = f"td.{iterable.kind}()"
        at = "" if iterable.loc is None else f" of line {iterable.loc.line}"
        message, hint = {
            "break": (f"a {kind} loop cannot `break`: its trip count is fixed",
                      "skip the work of the remaining iterations with an `if` on a value the "
                      "loop carries; `continue` skips the rest of one iteration"),
            "else": (f"a {kind} loop cannot have an else clause",
                     "put the else clause's statements after the loop"),
            "global": (f"a {kind} loop cannot bind a name its function declares global or "
                       "nonlocal", "bind a local in the loop, and the global after it"),
        }.get(what, (f"this `{what}` cannot leave the {kind} loop{at}: a bare `return` ends a "
                     "grid program, and `continue` skips the rest of an iteration, only from "
                     "the loop's own body and the `if`s in it (not from a nested loop, `with` or "
                     "`try`, and a `return` with a value is the kernel's, after its loops)",
                     "move the exit up to the loop's body (inside `if`s), or guard the work "
                     "with an `if` on a scalar"))
        tr.fail(TraceError, message, loc=iterable.loc if what == "else" else Loc(tr.file, line),
                hint=hint)
    return iterable


def tiled(iterable: Any) -> bool:
    """Whether a loop that `tiledsl.frontend.exits` folded for its `return` iterates tiles (and
    runs folded: the `return` ends a grid program)."""
    return isinstance(iterable, TileRange)


def targets(n: int | None) -> None:
    """Called as a rewritten `for` statement starts, before its iterable is evaluated: its
    target binds `n` names (None: not plain names). `td.tile(begin, end)` with one name and a
    runtime `begin` is Helion's `hl.tile(begin, end)`, a loop from begin to end; with two it
    is a 2-D tile (tiledsl/lang/language.py)."""
    tr = active()
    if tr is not None:
        tr.loop_targets = n


def loop(iterable: Any, body: Body, env: dict, assigned: tuple[str, ...],
         labels: tuple[str, ...] | None, line: int,
         read_after: dict[str, int] | None = None, local: tuple[str, ...] = (),
         maybe: tuple[str, ...] = ()) -> dict:
    """A rewritten `for` statement (rewrite.py); `read_after`, `local` and `maybe` are
    liveness.py's. A name of `maybe` that holds what no loop carries (a wrapper's tensor) is
    first left unbound in the body: if the trip traces without reading it before binding it
    (its binding under an `if` whose test is known now, `if not TIE_HDIM: dt = ...`), it is
    the trip's own; else the loop is traced again with it bound, as before."""
    hide = tuple(n for n in maybe if n in env and not _carries(env[n]))
    tr = active()
    if hide and tr is not None and tr.depth != "host":
        block, symbols = tr.blocks[-1], len(tr.symbols)
        start, waiting = len(block.ops), [len(d) for d in tr.deferred]
        try:
            return _loop(iterable, body, {n: v for n, v in env.items() if n not in hide},
                         assigned, labels, line, read_after, (*local, *hide))
        except (UnboundLocalError, NameError, TileDSLError):
            del block.ops[start:]  # (the trip read one before binding it: as before)
            tr.rollback_symbols(symbols)
            for d, n in zip(tr.deferred, waiting):
                del d[n:]
    return _loop(iterable, body, env, assigned, labels, line, read_after, local)


def _loop(iterable: Any, body: Body, env: dict, assigned: tuple[str, ...],
          labels: tuple[str, ...] | None, line: int,
          read_after: dict[str, int] | None = None, local: tuple[str, ...] = ()) -> dict:
    if (tr := active()) is not None:
        tr.loop_targets = None  # read by a td.tile of the iterable, or by none
    if isinstance(iterable, TileRange) and iterable.counted is not None and \
            _steps_offsets(env, assigned):
        iterable = iterable.counted
    if isinstance(iterable, Counted):
        return _counted(iterable, body, env, assigned, line, labels, frozenset(local))
    if not isinstance(iterable, TileRange):
        if isinstance(iterable, range) and len(iterable) > UNROLL_WARN and \
                current().depth != "host":
            warn(f"this loop is unrolled {len(iterable)} times while the kernel traces "
                 "(Python's range over ints): for a loop in the generated code (Triton's `for "
                 "k in range(tl.cdiv(K, BLOCK_K))`, whose K is a runtime argument there) write "
                 "td.range(...); td.static_range(...) unrolls without this warning")
        env = dict(env)
        for item in iterable:
            env.update(body(item, env))
        return env
    tr = current()
    names = labels if labels and len(labels) == len(iterable.sizes) else tuple(
        f"t{line}_{i}" for i in range(len(iterable.sizes)))
    if tr.depth == "host" and iterable.stride is not None:
        tr.fail(TraceError, "a strided loop of tiles (td.tile(...)[p::P]) runs inside a grid",
                loc=iterable.loc, hint="for p in td.grid(P): for t in td.tile(n)[p::P]: ...")
    if tr.depth == "host":
        return _grid(tr, iterable, body, env, assigned, names, read_after)
    return _for(tr, iterable, body, env, assigned, names, frozenset(local))


def _steps_offsets(env: dict, assigned: tuple[str, ...]) -> bool:
    """Whether a loop rebinds a pointer or an int value bound before it (`p_o += D`, `off +=
    stride`: a Triton port's bumps). td.range over ints is then a counted loop, whose carried
    steps the race check follows (`_inductions`), not a loop of one-element tiles."""
    return any(isinstance(v := env.get(n), (Pointer, Carried)) or isinstance(v, TileValue)
               and v.dtype.is_int for n in assigned)


def range_(*args: Any, **keywords: Any) -> Any:
    """`range(...)` as the iterable of a `for` statement in a kernel: Python's range over ints;
    over a runtime bound, a sequential loop that each program runs to its own bound
    (`Counted`), as Triton's `for i in range(lo, hi)`. Keywords (`range(n, flatten=True)`, as
    Unsloth writes it) are ignored in a @triton.jit body, as Triton's code generator ignores
    them; elsewhere they are Python's error."""
    if keywords and not current().triton_body:
        current().fail(TraceError, f"range() takes no keyword arguments, got "
                       f"{sorted(keywords)[0]!r}", hint="td.range(lo, hi, num_stages=...) "
                       "takes Triton's loop keywords")
    if not any(isinstance(a, TileValue) for a in args):
        return range(*args)
    tr = current()
    for a in args:
        need_static(a)  # computed from int arguments: the kernel traces them as ints
    if not 1 <= len(args) <= 3:
        tr.fail(TraceError, f"range expected 1 to 3 arguments, got {len(args)}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    if isinstance(step, TileValue) or not isinstance(step, (int, np.integer)) or step == 0:
        tr.fail(TraceError, f"range(): over a runtime bound the step must be a nonzero int known "
                f"when tracing, got {step!r}",
                hint="the step's sign decides the loop's test (i < stop or i > stop)")
    for a in (start, stop):
        v = to_value(a)
        if v.shape != () or not v.dtype.is_int:
            got = f"a {v.dtype} scalar" if v.shape == () else \
                f"a {v.dtype} tile of shape {tr.describe_shape(v.shape)}"
            tr.fail(TraceError, f"range(): bounds must be integer scalars, got {got}")
    return Counted(stop, user_loc(), start, int(step))


def _counted(it: Counted, body: Body, env: dict, assigned: tuple[str, ...], line: int,
             labels: tuple[str, ...] | None = None, local: frozenset = frozenset()) -> dict:
    """A loop to a runtime bound: `i = start; while i < stop: body(i); i += step` (`>` for a
    negative step), its counter a hidden carried name of the bounds' dtype."""
    counter = f"_td_index{line}"
    start, stop = to_value(it.start), to_value(it.stop)
    dtype, _ = common_dtype([start, stop])
    env = {**env, counter: TileValue(cast(start, dtype).value)}  # typed, not a weak number
    for name in labels or ():  # the loop's own name is the counter's, not a carried value,
        env.pop(name, None)  # whatever it held before (`rv, _, _, _ = ...`, `for _ in ...`)

    def step(e: dict) -> dict:
        return {**body(e[counter], e), counter: e[counter] + it.step}

    def test(e: dict) -> TileValue:
        return e[counter] < stop if it.step > 0 else e[counter] > stop

    label = labels[0] if labels and len(labels) == 1 else None
    info = Counter(counter, label, start.value, stop.value, it.step, it.tuning, local)
    out = while_loop(test, step, env, (*assigned, counter), line, info)
    out.pop(counter)
    return out


@dataclass(frozen=True)
class Counter:
    """The counter of a `while` loop made from a counted loop (`_counted`): its hidden name, the
    user's name for the loop (the counter's name in the IR), its bounds and step, and
    `td.range`'s keywords (the op's `tuning` attribute, for Triton's `tl.range`). The race
    check reads its bounds (`Tracer.counters`, separation.py)."""

    name: str
    label: str | None
    start: Value
    stop: Value
    step: int
    tuning: tuple = ()
    local: frozenset = frozenset()  # names each trip binds before reading (liveness.py)


def _ranges(tr: Tracer, rng: TileRange, names: tuple[str, ...]) -> list[Value]:
    out = []
    for i, (size, block, name) in enumerate(zip(rng.sizes, rng.block_sizes, names)):
        if block is None:  # one symbol per call site and size position (tiledsl/frontend/sites.py)
            site = None if rng.site is None else (rng.site, i, size)
            block = tr.site_symbol(site, size, rng.loc)  # type: ignore[assignment]
            tr.labels[block] = name  # type: ignore[index]
            if size == UNBOUNDED:  # no static bound: blocks up to a tile's usual width
                tr.symbols[block] = replace(tr.symbols[block], high=UNBOUNDED_BLOCK)
        stop = rng.stops[i] is not None if rng.stops else rng.stop is not None
        rt = RangeType(size, block, stop)  # type: ignore[arg-type]
        out.append(Value(rt, name))
    return out


def _handle(tr: Tracer, rng: TileRange, r: Value, name: str) -> Any:
    if rng.kind == "grid":
        return TileValue(tr.emit("tile.begin", [r], hint=name, loc=rng.loc)[0])
    if rng.jagged is not None:  # its rows' lanes past their lengths: masked (jagged.py)
        tr.jagged[r] = rng.jagged
        tr.access_mask = jagged_mask
        tr.jagged_rows = jagged_rows
    return Tile(r, name)


def _item(handles: list[Any], seq: bool) -> Any:
    return handles[0] if len(handles) == 1 and not seq else tuple(handles)


def _grid(tr: Tracer, rng: TileRange, body: Body, env: dict, assigned: tuple[str, ...],
          names: tuple[str, ...], read_after: dict[str, int] | None) -> dict:
    """A name bound before the loop and rebound in it is a local of each program (as in
    Triton); reading it after the loop (`read_after`: such names, each with the line that
    rebinds it; None: all, at the loop's line) is an error, since no value flows out. A name
    that held a tensor before the grid is the tensor after it, whatever each program rebinds
    it to: a Triton kernel's parameter or local beside its wrapper's tensor of that name
    (Unsloth's `Y += row_idx * Y_row_stride`, fp8 dequant's `y = x * s`, then `return y`)."""
    if any(isinstance(s, int) and s == 0 for s in rng.sizes):  # no program: nothing runs
        tr.no_program = rng.loc
        return {}
    ranges = _ranges(tr, rng, names)
    block = Block(list(ranges))
    tr.blocks[-1].ops.append(Op("grid", [], [], {}, [block], rng.loc))
    with tr.region(block, "grid"):
        handles = [_handle(tr, rng, r, n) for r, n in zip(ranges, names)]
        saved, tr.program_ids = tr.program_ids, handles  # (td.program_id: a @triton.jit body)
        tr.lock = None
        try:
            out = body(_item(handles, rng.seq), env)
            locks.check_released(tr, rng.loc)
        finally:
            tr.program_ids, tr.lock = saved, None
            tr.race_memo.clear()  # (the race check's, for this grid: concrete.py)
    for n in assigned:
        if n in env and n in out and out[n] is not env[n] and (read_after is None
                                                               or n in read_after) \
                and not isinstance(env[n], Tensor):
            loc = rng.loc if read_after is None else Loc(tr.file, read_after[n])
            tr.fail(TraceError, f"'{n}' is defined before the grid loop, rebound inside it and "
                    "read after it; grid programs run in parallel, so no value can flow out "
                    "of the grid loop", loc=loc,
                    hint=f"use a new name inside the loop, or store '{n}' to a tensor")
    return {}


def _init(v: Any) -> TileValue:
    """What a loop carries for a value bound before it: a pointer's offset (pointers.py), a
    `Carried` value's tile."""
    if isinstance(v, Carried):
        return v.carried()
    return v.offset if isinstance(v, Pointer) else to_value(v)


def _as_before(before: Any, v: Value, weak: bool) -> Any:
    """The carried IR value `v` seen as the value bound before the loop was (a pointer)."""
    offset = TileValue(v, weak)
    if isinstance(before, Carried):
        return before.rebuilt(offset)
    return Pointer(before.base, offset) if isinstance(before, Pointer) else offset


def _carried_value(tr: Tracer, name: str, before: Any, after: Any) -> TileValue:
    """What the body leaves in a carried name, as the loop carries it."""
    if isinstance(before, Carried):
        if type(after) is not type(before) or not before.same_kind(after):
            tr.fail(TraceError, f"'{name}', a {type(before).__name__} before the loop, is "
                    f"{type(after).__name__} after a trip, or one of another tensor or block",
                    hint="a loop carries a block pointer that only td.advance moves")
        return after.carried()
    if not isinstance(before, Pointer):
        return to_value(after)
    if not isinstance(after, Pointer) or after.base.value is not before.base.value:
        tr.fail(TraceError, f"'{name}', a pointer into '{before.base.name}' before the loop, is "
                f"{after!r} after a trip", hint="a carried pointer moves by offsets within its "
                "tensor: name a pointer into another tensor differently")
    return after.offset


class _Mismatch(Exception):
    def __init__(self, name: str, result: TileValue) -> None:
        self.name = name
        self.result = result


def _for(tr: Tracer, rng: TileRange, body: Body, env: dict, assigned: tuple[str, ...],
         names: tuple[str, ...], local: frozenset = frozenset()) -> dict:
    carried = [n for n in assigned if n in env and _carries(env[n])]
    inits = {n: _init(env[n]) for n in carried}
    for _attempt in range(len(carried) + 1):
        block, symbols = tr.blocks[-1], len(tr.symbols)
        start = len(block.ops)
        try:
            results, out = _nest(tr, rng, body, env, carried, inits, names)
            break
        except _Mismatch as m:
            del block.ops[start:]
            tr.rollback_symbols(symbols)
            inits[m.name] = _widen(tr, rng.loc, m.name, inits[m.name], m.result)
    for n in assigned:  # names bound to non-values may not change inside the loop (unless
        if n in env and n not in inits and n not in local and out.get(n) is not env[n]:  # one
            if isinstance(out.get(n), Unmerged):  # trip's own, which is not carried)
                out[n].fail()
            tr.fail(TraceError, f"'{n}' (a {type(env[n]).__name__}) is rebound inside a tile loop",
                    loc=rng.loc, hint="only tile values and numbers can be carried across iterations")
    kept = _unchanged(tr.blocks[-1].ops[-1], carried, inits, 0)
    return {n: env[n] if n in kept else _as_before(env[n], v, inits[n].weak)
            for n, v in zip(carried, results)}


def _unchanged(loop: Op, carried: list[str], inits: dict[str, TileValue], skip: int
               ) -> set[str]:
    """The carried names whose every trip leaves them the value they had before the loop
    (ir/same.py): after the loop they are that value, which the race check can follow."""
    end = loop.regions[0].ops[-1] if loop.regions and loop.regions[0].ops else None
    if end is None or end.name != "yield":
        return set()
    return {n for n, y in zip(carried, end.operands[skip:]) if same_value(y, inits[n].value)}


def _widen(tr: Tracer, loc: Loc | None, name: str, init: TileValue, res: TileValue) -> TileValue:
    """A weak initial value (a Python number) takes the type its loop body gives it."""
    if init.weak and broadcastable(init.shape, res.shape):
        return broadcast_to(cast(init, res.dtype), res.shape)
    where = ""
    if res.dtype != init.dtype and (site := _promoted_at(res.value, res.dtype)) is not None:
        where = f" (it becomes {res.dtype} at line {site.line})"
    tr.fail(TraceError, f"loop-carried '{name}' is {init.dtype}{tr.describe_shape(init.shape)} "
            f"before the loop but {res.dtype}{tr.describe_shape(res.shape)} after an "
            f"iteration{where}", loc=loc,
            hint="give it its final dtype and shape before the loop, e.g. "
                 "td.zeros((tm, tn), dtype=td.float32), or cast with .astype(...)"
                 + ("; td.sum of a narrower int or bool is int64 (NumPy's rule; Triton's "
                    "tl.sum keeps int32)" if init.dtype.is_int and res.dtype == dtypes.int64
                    else ""))


def _promoted_at(v: Value, dtype: Any) -> Loc | None:
    """Where `v`'s dtype first appears along its operands: the op that makes a `dtype` value
    from operands of other dtypes (`x_f32 * scale_f64`), else None."""
    todo, seen = [v], set()
    while todo:
        op = todo.pop().owner
        if op is None or id(op) in seen:
            continue
        seen.add(id(op))
        typed = [o for o in op.operands if getattr(o.type, "dtype", None) is not None]
        if typed and all(o.type.dtype != dtype for o in typed):  # type: ignore[union-attr]
            return op.loc
        todo += [o for o in typed if o.type.dtype == dtype]  # type: ignore[union-attr]
    return None


def _nest(tr: Tracer, rng: TileRange, body: Body, env: dict, carried: list[str],
          inits: dict[str, TileValue], names: tuple[str, ...]) -> tuple[list[Value], dict]:
    """One `for` op per size of `rng` (outermost first), the body traced in the innermost."""
    ranges = _ranges(tr, rng, names)
    out: dict = {}

    def level(i: int, values: list[Value]) -> list[Value]:
        nonlocal out
        args = [Value(v.type, n) for v, n in zip(values, carried)]
        mine = ranges if rng.stride is not None else [ranges[i]]  # a strided loop takes all
        block = Block([*mine, *args])
        results = [Value(v.type, n) for v, n in zip(values, carried)]
        if rng.stride is not None:
            assert rng.first is not None
            attrs = {"stride": rng.stride, "ranges": len(mine)}
            tr.blocks[-1].ops.append(Op("for", [rng.first.value, *values], results, attrs,
                                        [block], rng.loc))
        elif rng.stops and rng.stops[i] is not None:  # `td.tile(m_g, n)`: this size's stop
            tr.blocks[-1].ops.append(Op("for", [rng.stops[i].value, *values], results,
                                        {"stop": True}, [block], rng.loc))
        elif rng.stop is None:
            tr.blocks[-1].ops.append(Op("for", list(values), results, {}, [block], rng.loc))
        else:  # the runtime stop (and start) lead the operands (`loop_stop`, `loop_start`)
            bounds = [rng.stop.value] + ([] if rng.start is None else [rng.start.value])
            attrs = {"stop": True} | ({} if rng.start is None else {"start": True})
            tr.blocks[-1].ops.append(Op("for", [*bounds, *values], results, attrs, [block],
                                        rng.loc))
        with tr.region(block, "loop"):
            if i + 1 < len(ranges) and rng.stride is None:
                yielded = level(i + 1, args)
            else:
                handles = [_handle(tr, rng, r, n) for r, n in zip(ranges, names)]
                inner = dict(env)
                inner.update({n: _as_before(env[n], a, inits[n].weak)
                              for n, a in zip(carried, args)})
                out = body(_item(handles, rng.seq), inner)
                yielded = []
                for n, a in zip(carried, args):
                    v = _carried_value(tr, n, env[n], out.get(n, inner[n]))
                    if v.type != a.type:
                        raise _Mismatch(n, v)
                    yielded.append(v.value)
            tr.emit("yield", yielded)
        return results

    return level(0, [inits[n].value for n in carried]), out


# ---- while loops ---------------------------------------------------------------------------
_TRIPS_LIMIT = 1 << 16  # trips of a while loop on Python values, before it counts as endless


def while_loop(test: Callable[[dict], Any], body: Body, env: dict, assigned: tuple[str, ...],
               line: int, counter: Counter | None = None) -> dict:
    """A rewritten `while` statement: `test(env)` is its condition over the names the body
    binds, `body(env)` the body. On Python values it is Python's loop (unrolled while tracing);
    once the condition is a runtime scalar, a `while` op: each program runs its own trips,
    carrying the names bound before the loop that the body rebinds (as a tile loop does)."""
    tr = current()
    env = dict(env)
    for _ in range(_TRIPS_LIMIT):
        cond = test(env)
        if isinstance(cond, TileValue):
            return _while_op(tr, test, body, env, assigned, Loc(tr.file, line), cond, counter)
        if not cond:
            return env
        env.update(body(env))
    tr.fail(TraceError, f"this `while` loop ran {_TRIPS_LIMIT} times on Python values while the "
            "kernel was traced", loc=Loc(tr.file, line),
            hint="a loop on Python values is unrolled: bound it, or loop on a runtime value")


def _while_op(tr: Tracer, test: Callable[[dict], Any], body: Body, env: dict,
              assigned: tuple[str, ...], loc: Loc, cond: TileValue, counter: Counter | None
              ) -> dict:
    """The `while` op of a loop whose condition `cond` is a runtime value (see `while_loop`)."""
    go = _go(tr, cond, loc)
    carried = [n for n in assigned if n in env and _carries(env[n])]
    inits = {n: _init(env[n]) for n in carried}
    for _attempt in range(len(carried) + 1):
        block, symbols = tr.blocks[-1], len(tr.symbols)
        start = len(block.ops)
        try:
            results, out = _while_body(tr, test, body, env, carried, inits, go, loc, counter)
            break
        except _Mismatch as m:
            del block.ops[start:]
            tr.rollback_symbols(symbols)
            inits[m.name] = _widen(tr, loc, m.name, inits[m.name], m.result)
    local = counter.local if counter is not None else frozenset()
    for n in assigned:  # names bound to non-values may not change inside the loop (unless
        if n in env and n not in inits and n not in local and out.get(n) is not env[n]:  # one
            if isinstance(out.get(n), Unmerged):  # trip's own, which is not carried)
                out[n].fail()
            what = "a `for` loop over a runtime range, and a trip may read it before binding " \
                "it (a binding under an `if` binds it only where every branch does, whatever " \
                "the test), or code after the loop reads it" if counter is not None else \
                "a `while` loop on a runtime value"
            tr.fail(TraceError, f"'{n}' (a {type(env[n]).__name__}) is rebound inside {what}",
                    loc=loc,
                    hint="only tile values and numbers can be carried across its trips: give "
                         f"the loop's value another name than '{n}', or `del {n}` before the "
                         "loop where nothing reads the tensor after it")
    locks.acquire(tr, tr.blocks[-1].ops[-1])  # a spin on a compare-and-swap takes a lock
    kept = _unchanged(tr.blocks[-1].ops[-1], carried, inits, 1)
    out = dict(env)
    out.update({n: env[n] if n in kept else _as_before(env[n], v, inits[n].weak)
                for n, v in zip(carried, results)})
    return out


def _while_body(tr: Tracer, test: Callable[[dict], Any], body: Body, env: dict,
                carried: list[str], inits: dict[str, TileValue], go: TileValue, loc: Loc,
                counter: Counter | None) -> tuple[list[Value], dict]:
    """Trace the op: its region runs the body, then the condition on the values it leaves."""
    hints = {counter.name: counter.label} if counter is not None and counter.label else {}
    args = [Value(inits[n].type, hints.get(n, n)) for n in carried]  # (IR names: hints)
    region = Block(args)
    results = [Value(inits[n].type, hints.get(n, n)) for n in carried]
    attrs = {"tuning": counter.tuning} if counter is not None and counter.tuning else {}
    tr.blocks[-1].ops.append(Op("while", [go.value, *(inits[n].value for n in carried)], results,
                                attrs, [region], loc))
    counted = counter is not None and counter.step > 0
    if counted:  # its values lie in [start, stop)
        tr.counters[args[carried.index(counter.name)]] = (counter.start, counter.stop)
        tr.counter_steps[args[carried.index(counter.name)]] = counter.step
        tr.deferred.append([])
    try:
        with tr.region(region, "loop"):
            out = _trace_body(tr, test, body, env, carried, inits, args, loc)
            if counted:
                assert counter is not None
                _inductions(tr, region, [inits[n].value for n in carried],
                            args[carried.index(counter.name)], counter.step)
                waiting = tr.deferred.pop()
                counted = False
                for check in waiting:  # the race checks that waited for those steps (an
                    check()            # enclosing counted loop's, where they still cannot tell)
    finally:
        if counted:  # a failed attempt (`_Mismatch`): its waiting checks go with it
            tr.deferred.pop()
    return results, out


def _trace_body(tr: Tracer, test: Callable[[dict], Any], body: Body, env: dict,
                carried: list[str], inits: dict[str, TileValue], args: list[Value], loc: Loc
                ) -> dict:
    """The region's ops: the body on the carried arguments, then the condition and the yield."""
    inner = dict(env)
    inner.update({n: _as_before(env[n], a, inits[n].weak) for n, a in zip(carried, args)})
    out = body(inner)
    after = {**inner, **out}
    yielded = []
    for n, a in zip(carried, args):
        v = _carried_value(tr, n, env[n], after[n])
        if v.type != a.type:
            raise _Mismatch(n, v)
        yielded.append(v.value)
    again = test(after)
    again = _go(tr, again if isinstance(again, TileValue) else to_value(bool(again)), loc)
    tr.emit("yield", [again.value, *yielded], loc=loc)
    return out


def _inductions(tr: Tracer, region: Block, firsts: list[Value], counter: Value,
                step: int) -> None:
    """Record the values the loop carries that step by a fixed amount each trip (`off +=
    stride`, the port of a Triton pointer bump): `v = first ± amount * trips`, where the
    counter is `start + step * trips` (separation.py follows them)."""
    yielded = region.ops[-1].operands[1:]
    inside = {id(r) for op in region.ops for r in op.results}
    for arg, first, nxt in zip(region.args, firsts, yielded):
        op = nxt.owner
        if arg is counter or op is None or not (op.name == "add" and arg in op.operands or
                                                op.name == "sub" and op.operands[0] is arg):
            continue  # `p += amount`, `p = amount + p`, `p -= amount`
        amount = op.operands[1] if op.operands[0] is arg else op.operands[0]
        if _fixed(amount, inside):
            tr.inductions[arg] = Induction(first, amount, counter, step,
                                           -1 if op.name == "sub" else 1)


def _fixed(v: Value, inside: set[int]) -> bool:
    """Whether `v` is the same on every trip: made before the loop, or a constant (cast, or
    broadcast to a tile: `offs += 180`)."""
    while v.owner is not None and v.owner.name in ("cast", "broadcast"):
        v = v.owner.operands[0]
    return id(v) not in inside or (v.owner is not None and v.owner.name == "const")


def _go(tr: Tracer, cond: TileValue, loc: Loc) -> TileValue:
    """The bool scalar a `while` loop tests; errors for tiles and for host-level values."""
    if cond.shape != ():
        tr.fail(ControlFlowError, f"a `while` loop on a tile of shape "
                f"{tr.describe_shape(cond.shape)}: each lane would loop on its own",
                loc=loc, hint="loop on a scalar (td.max(cond) or td.sum(cond) > 0); to select "
                              "per lane, td.where(cond, x, y)")
    return condition(tr, cond, loc, "while")
