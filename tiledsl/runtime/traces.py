"""A kernel's traces: its body run on proxies of each argument spec, verified and lowered once.

A trace is cached per argument spec (arg_specs.py) and, for a config that sets registered knobs
(td.register_tunable) to values other than their defaults, per those values. The caches live in
the kernel's `caches` (caches.py), which the kernel switches when a global it reads changes.
"""

from __future__ import annotations

import inspect
import re
import traceback
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import FunctionType
from typing import Any, Callable, Iterator

from tiledsl import dtypes
from tiledsl.runtime import registry
from tiledsl.frontend import (
    autograd_functions, const_scalars, foreign_calls, static_args, symdims, valued_args,
)
from tiledsl.runtime.arg_specs import ArgSpec
from tiledsl.runtime.caches import Caches
from tiledsl.runtime.config import Config
from tiledsl.runtime.returns import form
from tiledsl.errors import Loc, TileDSLError, TraceError, is_internal, raised_as
from tiledsl.ir import views
from tiledsl.ir.core import Function, Value
from tiledsl.ir.printer import ir_hash
from tiledsl.ir.types import TensorType, TileType
from tiledsl.ir.verify import verify
from tiledsl.frontend.rewrite import rewrite
from tiledsl.frontend.tracer import Tracer, tracing
from tiledsl.frontend.values import Tensor, TileValue


# The arguments of the call being run whose `x.requires_grad` the code reads and that require
# grad (torch tensors): they trace with `requires_grad` True, a trace of their own
# (runtime/kernel.py finds them; attorch's forwards save for backward only then, its linear
# backward computes a gradient only then).
GRADS: ContextVar[frozenset[str]] = ContextVar("tiledsl_grads", default=frozenset())


@contextmanager
def with_grads(names: frozenset[str]) -> Iterator[None]:
    token = GRADS.set(names)
    try:
        yield
    finally:
        GRADS.reset(token)


@dataclass(frozen=True)
class Traced:
    """A kernel traced for one argument signature: its IR before and after the pipeline."""

    ir: Function
    lowered: Function
    labels: dict[str, str]  # block symbol -> the user's loop variable name
    returns: str  # "none", "single", "tuple" or "tuple:tensor,None" (returns.py)
    by_backend: dict[str, Function] = field(default_factory=dict, compare=False)
    tunables: dict[str, Any] = field(default_factory=dict, compare=False)  # tunables.py
    grad_reads: frozenset[str] = frozenset()  # arguments whose `requires_grad` was read
    captured: tuple[Any, ...] = field(default=(), compare=False)  # frontend/captured.py
    valued: tuple[str, ...] = ()  # arguments whose values it holds (frontend/valued_args.py)
    # its outputs as one torch.autograd.Function's (frontend/autograd_functions.py), or None
    gradients: autograd_functions.Gradients | None = field(default=None, compare=False)
    torch_made: bool = False  # its host code made tensors with torch's factories
    applies: tuple[str, ...] = ()  # the autograd Functions with a backward its code applied
    # (Triton autotuner, the config its launch chose): a run sets each one's `best_config`,
    # which host code after the launch reads (mamba's `kernel.best_config.kwargs["BLOCK"]`)
    best_configs: tuple[tuple[Any, Any], ...] = field(default=(), compare=False)

    @property
    def hash(self) -> str:
        return ir_hash(self.ir)

    def only_arguments(self, what: str) -> Traced:
        """This trace, if it reads only the kernel's arguments: `what` (a package, a custom
        op) passes those alone, not the tensors it captured (frontend/captured.py)."""
        if self.valued:
            raise TraceError(f"{what} passes the kernel's arguments at run time, and its host "
                             f"code reads the values of {', '.join(self.valued)} (a trace per "
                             "values)", kernel=self.ir.name, hint="pass what the host code "
                             "computes from them (sizes, index tables) as arguments")
        if "subclass:" in self.returns:
            raise TraceError(f"{what} returns tensors of its own, and the kernel returns a "
                             "tensor subclass its host code built (frontend/tensor_subclasses.py"
                             "), which only this process can rebuild", kernel=self.ir.name,
                             hint="return the subclass's inner tensors, and build it around "
                                  "what the call returns")
        if self.captured:
            names = ", ".join(a.hint or "?" for a in self.ir.args[-len(self.captured):])
            raise TraceError(f"{what} passes only the kernel's arguments, and its code reaches "
                             f"tensors it does not take as arguments ({names}: a module's "
                             "parameters, a global)", kernel=self.ir.name,
                             hint="take them as arguments of the kernel")
        return self

    def for_backend(self, backend: str) -> Function:
        """The lowered IR as `backend` runs it: after its own passes (its `lower`, on a copy;
        the Triton backend folds exp's scales into exp2), made once. The NumPy backend has
        none: it runs the IR as written."""
        fn = self.by_backend.get(backend)
        if fn is None:
            lower = getattr(registry.backend(backend), "lower", None)
            fn = self.by_backend[backend] = self.lowered if lower is None else lower(self.lowered)
        return fn


class Traces:
    """The traces of kernel `fn` (named `name`, defined in `file`), cached in `caches()`."""

    def __init__(self, fn: FunctionType, name: str, file: str, signature: Any,
                 caches: Callable[[], Caches], flat_names: Callable[[tuple], list[str]]) -> None:
        self.fn, self.name, self.file, self.signature = fn, name, file, signature
        self.caches, self.flat_names = caches, flat_names
        try:  # read now, as Triton's @jit does: editing the file later must not change the kernel
            self.src: str | None = inspect.getsource(fn)
            self.src_error = ""
        except (OSError, TypeError) as e:  # no file holds it (a REPL): an error at first use
            self.src, self.src_error = None, str(e)
        self.body: Callable[..., Any] | None = None

    def def_line(self) -> int:
        """The line of the kernel's `def` (co_firstlineno is the first decorator's)."""
        return def_line(self.fn, self.src)

    def source_text(self) -> str:
        """The kernel's source as it was when decorated."""
        if self.src is None:
            raise TraceError(f"cannot read the source of kernel '{self.name}' ({self.src_error}); "
                             "tile kernels must be defined in a file", kernel=self.name)
        return self.src

    def get(self, spec: tuple[ArgSpec, ...], knobs: tuple = ()) -> Traced:
        """The trace for `spec`, with its registered knobs at their defaults, or at the values
        `knobs` ((name, value) pairs) lists (tiledsl/frontend/tunables.py)."""
        key = (spec, ("knobs", knobs)) if knobs else spec
        grads = GRADS.get()
        if grads:
            key = (key, ("grads", grads))
        hit = self.caches().traces.get(key)
        if hit is None:
            hit = self.caches().traces[key] = self._trace(spec, knobs, grads)
        return hit

    def for_config(self, spec: tuple[ArgSpec, ...], config: Config) -> Traced:
        """The trace a config runs: the default one, unless it sets registered knobs to other
        values than their defaults (each value is a trace of its own)."""
        t = self.get(spec)
        if not t.tunables:
            return t
        defaults = tuple((n, f.initial) for n, f in sorted(t.tunables.items()))
        knobs = tuple((n, config.get(n, v)) for n, v in defaults)
        if knobs == defaults:
            return t
        other = self.get(spec, knobs)
        if len(other.ir.tunable_symbols()) != len(t.ir.tunable_symbols()):
            raise TraceError(f"with {dict(knobs)} the kernel has "
                             f"{len(other.ir.tunable_symbols())} tunable tile dimensions, with "
                             f"its default knobs {len(t.ir.tunable_symbols())}: a "
                             "registered knob may not change which td.tile calls are made",
                             kernel=self.name,
                             hint="give the td.tile calls a knob decides a fixed block_size=")
        return other

    def _trace(self, spec: tuple[ArgSpec, ...], knobs: tuple = (),
               grads: frozenset[str] = frozenset()) -> Traced:
        tracer, values, outputs, returns = self.run_body(spec, knobs=knobs, grads=grads)
        fn = Function(self.name, values + [t.value for _, t in tracer.captured], tracer.body,
                      dict(tracer.symbols), self.file)
        verify(fn)
        lowered = registry.pipeline()(fn.clone())
        verify(lowered)
        return Traced(fn, lowered, dict(tracer.labels), returns, tunables=dict(tracer.tunables),
                      grad_reads=frozenset(tracer.grad_reads), torch_made=tracer.torch_made,
                      best_configs=tuple(tracer.best_configs),
                      applies=tuple(a.owner.__name__ for a in tracer.applies
                                    if autograd_functions.owner_has_backward(a.owner)),
                      captured=tuple(o for o, _ in tracer.captured),
                      valued=tuple(sorted(tracer.valued.values())),
                      gradients=autograd_functions.gradients(tracer, outputs, returns))

    def run_body(self, spec: tuple[ArgSpec, ...], symbolic: bool = False, knobs: tuple = (),
                 grads: frozenset[str] = frozenset()
                 ) -> tuple[Tracer, list[Value], list[Tensor], str]:
        """Run the body on proxies of `spec`'s arguments (with SymDim sizes if `symbolic`)."""
        if self.body is None:
            try:
                self.body = rewrite(self.fn, self.source_text())
            except TileDSLError as e:
                raise e.with_context(kernel=self.name) from None
        tracer = Tracer(self.name, self.file)
        tracer.knobs = dict(knobs)
        tracer.grad_true = grads
        values: list[Value] = []
        proxies: list[Any] = []
        valued = tracer.valued  # the valued arguments' tensors (valued_args.py) -> names
        names = list(self.signature.parameters)
        for i, (name, s) in enumerate(zip(names, spec)):
            if s[0] == "tensor":
                shape = tuple(symdims.SymDim(n, ("dim", i, d)) for d, n in enumerate(s[1])) \
                    if symbolic else s[1]
                v = Value(TensorType(shape, dtypes.BY_SHORT[s[2]]), name)
                if len(s) > 3:  # an argument laid out other than row-major
                    tracer.layouts[v] = s[3]
                tracer.arguments[v] = name
                proxies.append(Tensor(v, name))
            elif s[0] == "const" and isinstance(s[1].value, valued_args.Valued):
                proxies.append(s[1].value.proxy())  # its values: a real tensor
                valued[id(proxies[-1])] = name
                continue
            elif s[0] == "const":
                proxies.append(const_scalars.as_seen(s[1].value))
                continue
            elif s[0] == "alias":  # the array of argument s[1] again: that one tensor, under
                proxies.append(Tensor(proxies[s[1]].value, name))  # this parameter's name
                continue
            elif s[0] == "list":
                items = [Value(TensorType(e[1], dtypes.BY_SHORT[e[2]]), _element_hint(name, j, names))
                         for j, e in enumerate(s[2])]
                tracer.layouts |= {v: e[3] for v, e in zip(items, s[2]) if len(e) > 3}
                values += items
                elems = [Tensor(v, f"{name}[{j}]") for j, v in enumerate(items)]
                proxies.append(elems if s[1] == "list" else tuple(elems))
                continue
            elif s[0] == "closure":  # the function, over proxies of the arrays it captures
                cells = {}
                for j, var, e in s[2]:
                    v = Value(TensorType(e[1], dtypes.BY_SHORT[e[2]]),
                              var if var not in names else _element_hint(name, var, names))
                    if len(e) > 3:
                        tracer.layouts[v] = e[3]
                    values.append(v)
                    cells[j] = Tensor(v, f"{name}.{var}")
                proxies.append(static_args.with_cells(s[1].value, cells))
                continue
            else:
                v = Value(TileType((), dtypes.BY_SHORT[s[1]]), name)
                proxies.append(TileValue(v, weak=s[2]))
                if not s[2]:  # a 0-d array (or NumPy scalar) argument
                    tracer.array_scalars[v] = name
                if v.type.dtype.is_int:
                    tracer.int_params[v] = name
                elif s[2] and v.type.dtype.is_float:  # a Python float argument
                    tracer.float_params[v] = name
            values.append(v)
        with tracing(tracer):
            try:
                result = self.body(*_positional(self.signature, proxies),
                                   **_keyword_only(self.signature, proxies))
                outputs, returns = form(result)  # checked by loops.result
                tracer.emit("return", [t.value for t in outputs],
                            loc=Loc(self.file, self.def_line()))
                if valued:
                    valued_args.refuse_writes(tracer, valued)
            except TileDSLError as e:
                aliases = [f"'{names[j]}' is '{names[s[1]]}'" for j, s in enumerate(spec)
                           if s[0] == "alias"]
                if aliases:  # the race check sees one tensor where the code names two
                    e = e.with_note("in this call " + ", ".join(aliases) + " (one array "
                                    "passed twice)")
                raise e.with_context(kernel=self.name) from None
            except Exception as e:  # the user's own Python error while tracing
                frames = foreign_calls.traceback_frames(e)
                if call := foreign_calls.triton_call_in(frames, whole="NoneType" in str(e)):
                    raise TraceError(foreign_calls.message(call[0]), kernel=self.name,
                                     loc=call[1], hint=foreign_calls.hint(call[0])) from e
                hint = None
                found = re.search(r"local variable '(\w+)'", str(e))
                name = getattr(e, "name", None) or (found.group(1) if found else None)
                if isinstance(e, UnboundLocalError) and name in self.fn.__globals__:
                    hint = (f"'{name}' is a global, but the kernel binds it too, so Python makes "
                            f"it local to the whole kernel (a Triton body merged with its "
                            f"wrapper: `{name} = ...` inside it): give the local another name")
                elif isinstance(e, NameError):
                    hint = ("a name bound only inside a tile loop does not exist after it; bind "
                            "it before the loop to carry its value out")
                kind = raised_as(e) if _raised_by_user(e) else TraceError
                raise kind(f"{type(e).__name__}: {e}", kernel=self.name,
                           loc=_user_frame(e), hint=hint) from e
        return tracer, values, outputs, returns

    def shape_function(self, spec: tuple[ArgSpec, ...]) -> symdims.ShapeFunction:
        """The output shapes of the trace for `spec` as expressions over the argument sizes,
        with the size comparisons they rely on (tiledsl/frontend/symdims.py)."""
        hit = self.caches().shapes.get(spec)
        if hit is None:
            self.get(spec)  # the kernel traces and lowers for these shapes
            with symdims.recording() as rec:
                outputs = self.run_body(spec, symbolic=True)[2]
            exprs = tuple(tuple(symdims.expr_of(n) for n in t.shape) for t in outputs)
            constant = any(e[0] == "int" for out in exprs for e in out)
            guards = tuple((op, a, b, r) for (op, a, b), r in rec.guards.items())
            lost = rec.conversions[0] if constant and rec.conversions else None
            hit = self.caches().shapes[spec] = symdims.ShapeFunction(
                exprs, guards, lost, not (constant and rec.conversions))
        return hit


    def written(self, spec: tuple[ArgSpec, ...]) -> list[str]:
        key = (spec, GRADS.get())
        if key not in self.caches().writes:  # once per signature: DLPack calls ask on every call
            fn = self.get(spec).ir
            stored = views.written(fn)
            self.caches().writes[key] = [n for n, a in zip(self.flat_names(spec), fn.args)
                                 if a in stored]
        return self.caches().writes[key]


def _element_hint(name: str, i: int | str, params: list[str]) -> str:
    """The IR name of element `i` of list argument `name` (`a_0`), unlike any parameter's."""
    hint = f"{name}_{i}"
    while hint in params:
        hint = f"{name}_{hint}"
    return hint


def def_line(fn: FunctionType, source: str | None) -> int:
    """The line of `def` (co_firstlineno is the first decorator's) in the kernel's `source`."""
    start = fn.__code__.co_firstlineno
    for i, line in enumerate((source or "").splitlines()):
        if line.lstrip().startswith(("def ", "async def ")):
            return start + i
    return start


def _user_frame(e: BaseException) -> Loc | None:
    """The innermost frame of the traceback that is the user's code."""
    loc = None
    for frame in traceback.extract_tb(e.__traceback__):
        if not is_internal(frame.filename) and frame.lineno is not None:
            loc = Loc(frame.filename, frame.lineno)
    return loc


def _raised_by_user(e: BaseException) -> bool:
    """Whether `e` was raised by a `raise` statement outside tiledsl (the innermost frame of
    its traceback), not by Python or a library meeting tiledsl's values."""
    frames = traceback.extract_tb(e.__traceback__)
    last = frames[-1] if frames else None
    return last is not None and not is_internal(last.filename) and \
        (last.line or "").lstrip().startswith("raise")


def _positional(sig: inspect.Signature, proxies: list[Any]) -> list[Any]:
    return [p for p, param in zip(proxies, sig.parameters.values())
            if param.kind != inspect.Parameter.KEYWORD_ONLY]


def _keyword_only(sig: inspect.Signature, proxies: list[Any]) -> dict[str, Any]:
    """`def eye(n, *, dtype=None)`: the parameters after `*`, passed by name."""
    return {name: p for p, (name, param) in zip(proxies, sig.parameters.items())
            if param.kind == inspect.Parameter.KEYWORD_ONLY}
