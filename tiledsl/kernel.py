"""`@td.tile_kernel`: the kernel object users call, trace, tune and inspect.

Tracing and the lowering pipeline run once per argument signature (shapes, dtypes, scalar kinds);
a config is applied only when a backend generates code or runs, so trying a config is cheap.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import FunctionType
from typing import Any, Callable

import numpy as np

from tiledsl import arrays, dispatch, dtypes, reads, registry, static_args, symdims, tunables
from tiledsl.block_sizes import bounded_choices, default_block
from tiledsl.config import Config, ConfigSpace, Param
from tiledsl.errors import (ArgumentError, BackendError, Loc, TileDSLError, TraceError,
                            is_internal)
from tiledsl.ir.core import Function, Value, walk
from tiledsl.ir import views
from tiledsl.ir.printer import ir_hash, print_ir
from tiledsl.ir.types import TensorType, TileType
from tiledsl.ir.verify import verify
from tiledsl.rewrite import rewrite
from tiledsl.subclasses import plain_arrays
from tiledsl.tracer import Tracer, active, tracing
from tiledsl.values import Tensor, TileValue, weak_dtype

# One entry per argument: ("tensor", shape, dtype short), ("scalar", dtype short, weak),
# ("const", static_args.Static) or ("list", "list" | "tuple", element specs): static_args.py.
ArgSpec = tuple


@dataclass(frozen=True)
class Traced:
    """A kernel traced for one argument signature: its IR before and after the pipeline."""

    ir: Function
    lowered: Function
    labels: dict[str, str]  # block symbol -> the user's loop variable name
    returns: str  # "none", "single" or "tuple"
    by_backend: dict[str, Function] = field(default_factory=dict, compare=False)
    tunables: dict[str, Any] = field(default_factory=dict, compare=False)  # tunables.py

    @property
    def hash(self) -> str:
        return ir_hash(self.ir)

    def for_backend(self, backend: str) -> Function:
        """The lowered IR as `backend` runs it: after its own passes (its `lower`, on a copy;
        the Triton backend folds exp's scales into exp2), made once. The NumPy backend has
        none: it runs the IR as written."""
        fn = self.by_backend.get(backend)
        if fn is None:
            lower = getattr(registry.backend(backend), "lower", None)
            fn = self.by_backend[backend] = self.lowered if lower is None else lower(self.lowered)
        return fn


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


class TileKernel:
    """A tile kernel: call it on NumPy arrays, or use `run`, `config_space`, `source`."""

    def __init__(self, fn: FunctionType) -> None:
        if not inspect.isfunction(fn):
            raise TraceError(f"@td.tile_kernel decorates a function, got {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name: str = fn.__name__
        self.file: str = inspect.getsourcefile(fn) or fn.__code__.co_filename
        try:  # read now, as Triton's @jit does: editing the file later must not change the kernel
            self._src: str | None = inspect.getsource(fn)
            self._src_error = ""
        except (OSError, TypeError) as e:  # no file holds it (a REPL): an error at first use
            self._src, self._src_error = None, str(e)
        self.signature = inspect.signature(fn)
        if self.name == "<lambda>":
            raise TraceError("@td.tile_kernel needs a function written with `def`, got a lambda",
                             kernel=self.name, loc=Loc(self.file, fn.__code__.co_firstlineno))
        for p in self.signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TraceError(f"kernel '{self.name}' cannot take *args or **kwargs", kernel=self.name,
                                 loc=Loc(self.file, _def_line(fn, self._src)))
        self._body: Callable[..., Any] | None = None
        self._traces: dict[tuple, Traced] = {}
        self._writes: dict[tuple, list[str]] = {}  # spec -> the arguments stored into
        self._shapes: dict[tuple, symdims.ShapeFunction] = {}  # spec -> output shape exprs
        self._spaces: dict[tuple, ConfigSpace] = {}
        self._tuned: dict[tuple, Config | None] = {}  # memo of result-cache lookups
        self._plans: dict[tuple, tuple] = {}  # dispatch cache: backend, space, config, trace
        self._fast: dict[tuple, dispatch.Call] = {}  # torch CUDA calls by layout (dispatch.py)
        self._arity = len(self.signature.parameters)
        # the caches above, per value of the globals and closure variables it reads (reads.py)
        self._reads = reads.Generations(fn, ("_traces", "_writes", "_shapes", "_spaces",
                                             "_tuned", "_plans", "_fast"))
        # compile-time parameters: annotated td.constexpr, or ints the body needs static
        self._static: set[str] = set(static_args.signature_constexprs(self.signature))

    def __repr__(self) -> str:
        return f"<tile_kernel {self.name} ({self.file}:{self.fn.__code__.co_firstlineno})>"

    # ---- arguments -------------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict) -> list[Any]:
        """Positional argument values in the order of the kernel's parameters."""
        if not kwargs and len(args) == self._arity:
            return plain_arrays(self.name, self.signature.parameters, list(args))
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            params = ", ".join(self.signature.parameters)
            raise ArgumentError(f"{e} (parameters: {params})", kernel=self.name) from None
        bound.apply_defaults()
        return plain_arrays(self.name, self.signature.parameters, list(bound.arguments.values()))

    def arg_spec(self, values: list[Any]) -> tuple[ArgSpec, ...]:
        """The signature a trace is cached under; raises ArgumentError for what no backend takes.
        A spec with runtime ints is traced here: an int the body needs static (a shape, a
        range) makes its parameter compile-time, and the spec is made again."""
        self._reads.sync(self)  # a global it reads changed: the traces of its value
        names = self.signature.parameters
        return self._specialized(lambda: tuple(self._spec(n, v) for n, v in zip(names, values)))

    def _specialized(self, make: Callable[[], tuple[ArgSpec, ...]]) -> tuple[ArgSpec, ...]:
        """`make()`, made again while tracing it finds int parameters that must be static."""
        while True:
            spec = make()
            if spec in self._traces or not any(
                    s[0] == "scalar" and dtypes.BY_SHORT[s[1]].is_int for s in spec):
                return spec
            try:
                self._traced(spec)
            except static_args.StaticNeeded as e:
                self._static |= e.params  # (each round adds one: the loop ends)
                self._plans.clear()
                self._fast.clear()
                continue
            return spec

    def _spec(self, name: str, v: Any) -> ArgSpec:
        special = self._special_spec(name, v)
        if special is not None:
            return special
        if isinstance(v, (bool, int, float)):
            # A Python int argument is an int64 whatever its value (k * 3 must not wrap at 2**31).
            d = dtypes.int64 if isinstance(v, int) and not isinstance(v, bool) else weak_dtype(v)
            if d == dtypes.int64 and not -2**63 <= v < 2**63:
                raise ArgumentError(f"argument '{name}' is {v}, out of the range of int64 (a "
                                    "Python int argument is an int64)", kernel=self.name)
            return ("scalar", d.short, True)
        if isinstance(v, np.generic) or (isinstance(v, np.ndarray) and v.ndim == 0):
            d = dtypes.from_any(v.dtype)
            if d is None:
                raise ArgumentError(f"argument '{name}' has unsupported dtype {v.dtype}",
                                    kernel=self.name)
            return ("scalar", d.short, False)
        if isinstance(v, np.ndarray) and v.ndim > 0:
            d = _NUMPY_DTYPES.get(v.dtype)
            if d is not None and 0 not in v.shape:
                return ("tensor", v.shape, d.short)
        if isinstance(v, np.ndarray) or _is_gpu_array(v):
            d = dtypes.from_any(str(v.dtype).rsplit(".", 1)[-1])
            if d is None:
                supported = ", ".join(x.name for x in dtypes.ALL)
                raise ArgumentError(f"argument '{name}' has unsupported dtype {v.dtype} "
                                    f"(supported: {supported})", kernel=self.name)
            if 0 in v.shape:
                raise ArgumentError(f"argument '{name}' has an empty dimension (shape {v.shape})",
                                    kernel=self.name)
            return ("tensor", tuple(int(s) for s in v.shape), d.short)
        raise ArgumentError(f"argument '{name}' is a {type(v).__module__}.{type(v).__qualname__}; "
                            "pass a NumPy array or a number", kernel=self.name)

    def _special_spec(self, name: str, v: Any) -> ArgSpec | None:
        """The spec of a compile-time argument or a list of arrays; None for any other."""
        if name in self._static and isinstance(v, (int, float, np.number)) or \
                static_args.is_constant(v):
            if isinstance(v, np.number):
                v = v.item()
            captured = static_args.captured_arrays(v)
            if captured:  # arrays a function captures become tensor arguments
                return ("closure", static_args.static(v), tuple(
                    (i, var, self._captured_spec(f"{name}.{var}", a)) for i, var, a in captured))
            return ("const", static_args.static(v))
        if name in self._static:
            raise ArgumentError(f"argument '{name}' is compile-time (td.constexpr) but is a "
                                f"{type(v).__module__}.{type(v).__qualname__}",
                                kernel=self.name, hint="pass a Python value, not an array")
        if not isinstance(v, (list, tuple)):
            return None
        elems = []
        for i, x in enumerate(v):
            s = self._spec(f"{name}[{i}]", x) \
                if isinstance(x, np.ndarray) or _is_gpu_array(x) else None
            if s is None or s[0] != "tensor":
                raise ArgumentError(
                    f"argument '{name}' is a {type(v).__name__} holding a "
                    f"{type(x).__module__}.{type(x).__qualname__} at index {i}; a list or tuple "
                    "argument holds arrays only (a list of tensors), or compile-time values "
                    "only (bool, str, None, callables, numbers)", kernel=self.name)
            elems.append(s)
        return ("list", type(v).__name__, tuple(elems))

    def _captured_spec(self, what: str, a: Any) -> ArgSpec:
        s = self._spec(what, a) if isinstance(a, np.ndarray) or _is_gpu_array(a) else None
        if s is None or s[0] != "tensor":
            raise ArgumentError(f"'{what}' is a {type(a).__module__}.{type(a).__qualname__} a "
                                "function argument captures; a captured array must be a NumPy "
                                "array (or a GPU array on the GPU) with at least one dimension",
                                kernel=self.name, hint="pass it as an argument of the kernel")
        return s

    def _flat(self, spec: tuple[ArgSpec, ...], values: list[Any]) -> list[Any]:
        """The values of the IR's arguments (`fn.args`): runtime arguments, with each list of
        arrays spliced in, compile-time ones left out. What the backends receive."""
        out: list[Any] = []
        for s, v in zip(spec, values):
            if s[0] == "list":
                out.extend(v)
            elif s[0] == "closure":
                out += [a for _, _, a in static_args.captured_arrays(v)]
            elif s[0] != "const":
                out.append(v)
        return out

    def _flat_names(self, spec: tuple[ArgSpec, ...]) -> list[str]:
        """The names of the IR's arguments as errors name them (`a[0]` for a list's first)."""
        out: list[str] = []
        for name, s in zip(self.signature.parameters, spec):
            if s[0] == "list":
                out += [f"{name}[{i}]" for i in range(len(s[2]))]
            elif s[0] == "closure":
                out += [f"{name}.{var}" for _, var, _ in s[2]]
            elif s[0] != "const":
                out.append(name)
        return out

    def ir_values(self, *args: Any, **kwargs: Any) -> list[Any]:
        """The values a backend receives for this call (see `_flat`)."""
        values = self.bind(args, kwargs)
        return self._flat(self.arg_spec(values), values)

    # ---- tracing ---------------------------------------------------------------------------
    def traced(self, *args: Any, **kwargs: Any) -> Traced:
        """The IR for these arguments (traced once per signature, then cached)."""
        spec = self.arg_spec(self.bind(args, kwargs))
        return self._traced(spec)

    def traced_under(self, config: Config, *args: Any, **kwargs: Any) -> Traced:
        """The IR `config` runs for these arguments: `traced`, with the config's values of the
        registered knobs (td.register_tunable) in place of their defaults."""
        return self._traced_for(self.arg_spec(self.bind(args, kwargs)), config)

    @property
    def source_digest(self) -> str:
        """SHA-256 of the source as decorated and of the values of the globals and closure
        variables it reads now (reads.py): what the result cache keys on, and what the tuner's
        other processes check the kernel they import from its file against."""
        text = f"{self._source_text()}\0{reads.text(self.fn)}"
        return hashlib.sha256(text.encode()).hexdigest()

    def _source_text(self) -> str:
        """The kernel's source as it was when decorated."""
        if self._src is None:
            raise TraceError(f"cannot read the source of kernel '{self.name}' ({self._src_error}); "
                             "tile kernels must be defined in a file", kernel=self.name)
        return self._src

    def _traced(self, spec: tuple[ArgSpec, ...], knobs: tuple = ()) -> Traced:
        """The trace for `spec`, with its registered knobs at their defaults, or at the values
        `knobs` ((name, value) pairs) lists (tiledsl/tunables.py)."""
        key = (spec, ("knobs", knobs)) if knobs else spec
        hit = self._traces.get(key)
        if hit is None:
            hit = self._traces[key] = self._trace(spec, knobs)
        return hit

    def _traced_for(self, spec: tuple[ArgSpec, ...], config: Config) -> Traced:
        """The trace a config runs: the default one, unless it sets registered knobs to other
        values than their defaults (each value is a trace of its own)."""
        t = self._traced(spec)
        if not t.tunables:
            return t
        defaults = tuple((n, f.initial) for n, f in sorted(t.tunables.items()))
        knobs = tuple((n, config.get(n, v)) for n, v in defaults)
        if knobs == defaults:
            return t
        other = self._traced(spec, knobs)
        if len(other.ir.symbols) != len(t.ir.symbols):
            raise TraceError(f"with {dict(knobs)} the kernel has {len(other.ir.symbols)} tunable "
                             f"tile dimensions, with its default knobs {len(t.ir.symbols)}: a "
                             "registered knob may not change which td.tile calls are made",
                             kernel=self.name,
                             hint="give the td.tile calls a knob decides a fixed block_size=")
        return other

    def _trace(self, spec: tuple[ArgSpec, ...], knobs: tuple = ()) -> Traced:
        tracer, values, _, returns = self._run_body(spec, knobs=knobs)
        fn = Function(self.name, values, tracer.body, dict(tracer.symbols), self.file)
        verify(fn)
        lowered = registry.pipeline()(fn.clone())
        verify(lowered)
        return Traced(fn, lowered, dict(tracer.labels), returns, tunables=dict(tracer.tunables))

    def _run_body(self, spec: tuple[ArgSpec, ...], symbolic: bool = False, knobs: tuple = ()
                  ) -> tuple[Tracer, list[Value], list[Tensor], str]:
        """Run the body on proxies of `spec`'s arguments (with SymDim sizes if `symbolic`)."""
        if self._body is None:
            try:
                self._body = rewrite(self.fn, self._source_text())
            except TileDSLError as e:
                raise e.with_context(kernel=self.name) from None
        tracer = Tracer(self.name, self.file)
        tracer.knobs = dict(knobs)
        values: list[Value] = []
        proxies: list[Any] = []
        names = list(self.signature.parameters)
        for i, (name, s) in enumerate(zip(names, spec)):
            if s[0] == "tensor":
                shape = tuple(symdims.SymDim(n, ("dim", i, d)) for d, n in enumerate(s[1])) \
                    if symbolic else s[1]
                v = Value(TensorType(shape, dtypes.BY_SHORT[s[2]]), name)
                proxies.append(Tensor(v, name))
            elif s[0] == "const":
                proxies.append(s[1].value)
                continue
            elif s[0] == "list":
                items = [Value(TensorType(e[1], dtypes.BY_SHORT[e[2]]), _element_hint(name, j, names))
                         for j, e in enumerate(s[2])]
                values += items
                elems = [Tensor(v, f"{name}[{j}]") for j, v in enumerate(items)]
                proxies.append(elems if s[1] == "list" else tuple(elems))
                continue
            elif s[0] == "closure":  # the function, over proxies of the arrays it captures
                cells = {}
                for j, var, e in s[2]:
                    v = Value(TensorType(e[1], dtypes.BY_SHORT[e[2]]),
                              var if var not in names else _element_hint(name, var, names))
                    values.append(v)
                    cells[j] = Tensor(v, f"{name}.{var}")
                proxies.append(static_args.with_cells(s[1].value, cells))
                continue
            else:
                v = Value(TileType((), dtypes.BY_SHORT[s[1]]), name)
                proxies.append(TileValue(v, weak=s[2]))
                if v.type.dtype.is_int:
                    tracer.int_params[v] = name
            values.append(v)
        with tracing(tracer):
            try:
                result = self._body(*proxies)
                outputs, returns = self._outputs(result)
                tracer.emit("return", [t.value for t in outputs],
                            loc=Loc(self.file, _def_line(self.fn, self._src)))
            except TileDSLError as e:
                raise e.with_context(kernel=self.name) from None
            except Exception as e:  # the user's own Python error while tracing
                hint = None
                if isinstance(e, NameError):
                    hint = ("a name bound only inside a tile loop does not exist after it; bind "
                            "it before the loop to carry its value out")
                raise TraceError(f"{type(e).__name__}: {e}", kernel=self.name,
                                 loc=_user_frame(e), hint=hint) from e
        return tracer, values, outputs, returns

    def _shape_function(self, spec: tuple[ArgSpec, ...]) -> symdims.ShapeFunction:
        """The output shapes of the trace for `spec` as expressions over the argument sizes,
        with the size comparisons they rely on (tiledsl/symdims.py)."""
        hit = self._shapes.get(spec)
        if hit is None:
            self._traced(spec)  # the kernel traces and lowers for these shapes
            with symdims.recording() as rec:
                outputs = self._run_body(spec, symbolic=True)[2]
            exprs = tuple(tuple(symdims.expr_of(n) for n in t.shape) for t in outputs)
            constant = any(e[0] == "int" for out in exprs for e in out)
            guards = tuple((op, a, b, r) for (op, a, b), r in rec.guards.items())
            lost = rec.conversions[0] if constant and rec.conversions else None
            hit = self._shapes[spec] = symdims.ShapeFunction(
                exprs, guards, lost, not (constant and rec.conversions))
        return hit

    @staticmethod
    def _outputs(result: Any) -> tuple[list[Tensor], str]:
        """The returned tensors (checked at the `return` line by `loops.result`)."""
        if result is None:
            return [], "none"
        if isinstance(result, (tuple, list)):
            return list(result), "tuple"
        return [result], "single"

    # ---- configs ---------------------------------------------------------------------------
    def config_space(self, *args: Any, backend: str | None = None, arch: Any = None,
                     **kwargs: Any) -> ConfigSpace:
        """The valid configs for these arguments (with `backend`'s knobs and constraints; the
        spatial backend's depend on `arch`)."""
        spec = self.arg_spec(self.bind(args, kwargs))
        if backend is not None:  # a name it knows (and hashable: the spaces' cache key)
            self._check_backend(backend)
        return self._space(spec, backend, arch)

    def _check_backend(self, backend: Any) -> None:
        """A BackendError naming the kernel unless `backend` names a registered backend."""
        try:
            registry.backend(backend)
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None

    def _space(self, spec: tuple[ArgSpec, ...], backend: str | None, arch: Any = None) -> ConfigSpace:
        key = (spec, backend, _arch_key(arch))
        if key not in self._spaces:
            t = self._traced(spec)
            params = []
            for i, sym in enumerate(t.ir.symbols.values()):
                top = _next_pow2(sym.extent)
                choices = tuple(1 << j for j in range(top.bit_length()))
                choices = bounded_choices(choices, sym.low, sym.high)  # register_block_size
                where = f" (line {sym.loc.line})" if sym.loc else ""
                doc = f"tile '{t.labels.get(sym.name, sym.name)}' over {sym.extent}{where}"
                params.append(Param(f"block_sizes[{i}]", choices, default_block(choices), doc))
            for name, fragment in t.tunables.items():  # td.register_tunable's knobs
                if name.startswith("block_sizes["):  # a block size host code reads: a param
                    continue
                params.append(Param(name, fragment.choices, fragment.initial,
                                    f"td.register_tunable({name!r}, {fragment})"))
            base = ConfigSpace(self.name, tuple(params))
            space = self._extended(base, t, backend, arch)
            if t.tunables and backend is not None:  # each knob value's trace has its own
                space = tunables.per_trace(space, tuple(t.tunables), lambda config: self._extended(
                    base, self._traced_for(spec, config), backend, arch))
            self._spaces[key] = space
        return self._spaces[key]

    def _extended(self, space: ConfigSpace, t: Traced, backend: str | None, arch: Any
                  ) -> ConfigSpace:
        """`space` with `backend`'s knobs and constraints for trace `t`."""
        if backend is None:
            return space
        options = {} if arch is None else {"arch": arch}
        try:
            return registry.backend(backend).extend_space(space, t.for_backend(backend),
                                                          **options)
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None

    # ---- running ---------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run where the arrays live: CPU arrays of any DLPack library (NumPy, torch, JAX...) on
        the NumPy backend through zero-copy views, GPU arrays (CuPy, torch CUDA...) on "triton";
        outputs come back as the caller's kind of array (see tiledsl/arrays.py)."""
        values = self.bind(args, kwargs)
        if all(type(v) in _NUMPY_CALL for v in values):  # the common case, decided quickly
            return self._run(values, "numpy", None, None)
        self._reads.sync(self)
        fast_key = dispatch.key(values)
        if fast_key is not None:  # compile-time values pick the trace: they are in the key
            fast_key += (tuple(v for n, v in zip(self.signature.parameters, values)
                               if type(v) is bool or n in self._static),)
        if fast_key is not None and (fast := self._fast.get(fast_key)) is not None:
            return fast(values)
        names, flat = static_args.splice(list(self.signature.parameters), values)
        at = arrays.where(self.name, names, flat)
        if at is None or at.library == "numpy":
            return self._run(values, "numpy", None, None)
        if at.gpu and at.library in ("torch", "cupy"):
            if at.library == "torch":
                self._refuse_grad_writes(values, self._written(self.arg_spec(values)))
            result = self._run(values, "triton", None, None)
            if fast_key is not None:  # the next call of this layout skips what it decided
                self._remember_fast(fast_key, values)
            return result
        if at.gpu:  # another library's CUDA arrays: viewed as torch tensors, handed back
            import torch
            inner = static_args.map_arrays(
                values, lambda v: torch.from_dlpack(v) if arrays.is_array(v) else v)
            back = arrays.from_dlpack_like
        else:
            inner = [[arrays.to_numpy(x, self.name, f"{n}[{i}]") for i, x in enumerate(v)]
                     if isinstance(v, (list, tuple)) and v and all(map(arrays.is_array, v))
                     else arrays.to_numpy(v, self.name, n) if arrays.is_array(v) else v
                     for n, v in zip(self.signature.parameters, values)]
            back = arrays.from_numpy
            written = self._written(self.arg_spec(inner)) if at.library == "torch" else []
            self._refuse_grad_writes(values, written)
        try:
            result = self._run(inner, "triton" if at.gpu else "numpy", None, None)
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None
        if not at.gpu and at.library == "torch":  # writes through NumPy views: tell autograd
            from torch.autograd.graph import increment_version
            for n in written:
                increment_version(flat[names.index(n)])
        like = next(v for v in flat if arrays.is_array(v))
        originals = {id(i): v for i, v in zip(static_args.flatten_arrays(inner), flat)
                     if arrays.is_array(v)}

        def convert(out: Any) -> Any:
            return originals[id(out)] if id(out) in originals else back(out, like)
        try:
            if isinstance(result, tuple):
                return tuple(convert(o) for o in result)
            return None if result is None else convert(result)
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None

    def written_args(self, *args: Any, **kwargs: Any) -> list[str]:
        """The arguments the kernel stores into (in place) for these arguments (an element of a
        list argument `a` as `a[i]`)."""
        values = self.bind(args, kwargs)
        return self._written(self.arg_spec(values))

    def _written(self, spec: tuple[ArgSpec, ...]) -> list[str]:
        if spec not in self._writes:  # once per signature: DLPack calls ask on every call
            fn = self._traced(spec).ir
            stored = views.written(fn)
            self._writes[spec] = [n for n, a in zip(self._flat_names(spec), fn.args)
                                  if a in stored]
        return self._writes[spec]

    def run(self, *args: Any, backend: str = "numpy", config: Config | None = None,
            arch: Any = None, **kwargs: Any) -> Any:
        """Run on `backend` with `config` (the tuned config from the result cache, else the
        space's default, when None); `arch` picks the spatial backend's architecture."""
        return self._run(self.bind(args, kwargs), backend, config, arch)

    def _not_traced(self) -> None:
        """Calling a kernel while another traces (in its loops or its host code) is an error."""
        tracer = active()
        if tracer is not None:
            tracer.fail(TraceError, f"kernel '{tracer.kernel}' calls kernel '{self.name}'; "
                        "kernels cannot call kernels", hint=f"move the shared code of "
                        f"'{self.name}' into a plain Python function and call that")

    def _plan_key(self, values: list[Any], spec: tuple, backend: str, arch: Any) -> tuple:
        return (spec, backend, _arch_key(arch), tuple(_strides(v) for v in values))

    def _remember_fast(self, fast_key: tuple, values: list[Any]) -> None:
        """After a slow call on torch CUDA tensors: the fast call for their layout, if the
        backend prepares launches."""
        spec = self.arg_spec(values)
        if any(s[0] == "list" for s in spec):
            return  # (dispatch.key never takes lists)
        runtime = [i for i, s in enumerate(spec) if s[0] != "const"]
        flat = self._flat(spec, values)
        impl, _, chosen, t, narrowed, written = self._plans[
            self._plan_key(flat, spec, "triton", None)]
        launch = impl.prepare(t.for_backend("triton"), flat, chosen) \
            if hasattr(impl, "prepare") else None
        if launch is not None:
            call = dispatch.fast_call(
                self.name, self._flat_names(spec), launch, written,
                lambda values: self._check_narrowed(narrowed, values), t.returns)
            self._fast[fast_key] = call if len(runtime) == len(spec) else \
                lambda values: call([values[i] for i in runtime])

    def _check_narrowed(self, narrowed: list, values: list[Any]) -> None:
        for value_of, what, d, loc in narrowed:
            if not np.iinfo(d.np).min <= (n := value_of(values)) <= np.iinfo(d.np).max:
                raise ArgumentError(
                    f"{what} is {n}, out of the range of {d}, the dtype it meets (NumPy raises "
                    "OverflowError there)", kernel=self.name, loc=loc,
                    hint="cast the tile to a wider dtype first")

    def _run(self, values: list[Any], backend: str, config: Config | None, arch: Any) -> Any:
        self._not_traced()
        spec = self.arg_spec(values)
        tuning = values  # the caller's arguments: the result cache's key reads them
        values = self._flat(spec, values)  # from here on, the IR's arguments
        if any(isinstance(v, np.ndarray) and not v.flags.writeable for v in values):
            self._check_writable(values, spec)
        if type(backend) is not str:  # (unhashable names would be a TypeError below)
            self._check_backend(backend)
        key = self._plan_key(values, spec, backend, arch)
        plan = self._plans.get(key)
        if plan is None:  # once per signature, backend and layout: the dispatch cache
            try:
                impl = registry.backend(backend)
            except TileDSLError as e:
                raise e.with_context(kernel=self.name) from None
            space = self._space(spec, backend, arch)
            tuned = self._tuned_config(tuning, spec, backend, arch, space)
            traced = self._traced(spec)
            self._check_no_overlap(values, spec)
            names = self._flat_names(spec)
            written = [names.index(n) for n in self._written(spec)]
            plan = self._plans[key] = (impl, space, tuned or space.default(), traced,
                                       narrowed_ints(traced.lowered), written)
        impl, space, chosen, t, narrowed, written = plan
        if written:
            arrays.check_overlap(self.name, self._flat_names(spec), values,
                                 written)  # on every call: it depends on the arrays
        self._check_narrowed(narrowed, values)
        config = chosen if config is None else space.validate(config)
        if t.tunables:  # a registered knob's value is the trace's (tunables.py)
            t = self._traced_for(spec, config)
        try:
            outputs = impl.run(t.for_backend(backend), values, config,
                               **({} if arch is None else {"arch": arch}))
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None
        if t.returns == "none":
            return None
        return outputs[0] if t.returns == "single" else tuple(outputs)

    def _refuse_grad_writes(self, values: list[Any], written: list[str]) -> None:
        """A write in place into a torch tensor that requires grad: autograd cannot see it."""
        names = list(self.signature.parameters)
        flat = static_args.flatten_arrays(values)
        if len(flat) != len(values):  # lists of tensors: written names are the IR's
            names = self._flat_names(self.arg_spec(values))
            values = self._flat(self.arg_spec(values), values)
        for n in written:
            if getattr(values[names.index(n)], "requires_grad", False):
                raise ArgumentError(f"the kernel writes argument '{n}' in place, and that "
                                    "tensor requires grad (autograd cannot see the write); use "
                                    "td.torch_op, or pass a tensor without grad",
                                    kernel=self.name)

    def _check_no_overlap(self, values: list[Any], spec: tuple[ArgSpec, ...]) -> None:
        """An argument written in place must not have elements that share memory (a stride of
        0, from broadcast_to or torch's expand; overlapping rows from as_strided)."""
        names = self._flat_names(spec)
        arrays.check_layouts(self.name, names, values,
                             [names.index(n) for n in self._written(spec)])

    def _check_writable(self, values: list[Any], spec: tuple[ArgSpec, ...]) -> None:
        for name in self._written(spec):
            v = values[self._flat_names(spec).index(name)]
            if isinstance(v, np.ndarray) and not v.flags.writeable:
                raise ArgumentError(f"kernel '{self.name}' writes argument '{name}' in place, but "
                                    "that array is read-only (JAX arrays and some DLPack views "
                                    "are); pass a writable array", kernel=self.name)

    def compile(self, *args: Any, config: Config | None = None, arch: str = "sm_90",
                **kwargs: Any) -> list[Any]:
        """Compile ahead of time for `arch` (no GPU needed): one report per generated kernel
        with PTX, cubin, registers, spills and shared memory (`.problem` if it should not run)."""
        return self._on_triton("compile", args, kwargs, config, arch)

    def warm(self, *args: Any, config: Config | None = None, arch: str = "sm_90",
             num_sms: int | None = None, **kwargs: Any) -> int:
        """Fill Triton's JIT cache for launching on arrays shaped, typed and strided like these
        on a GPU of `arch` (no GPU needed): the first `backend="triton"` call of that shape then
        loads its kernels instead of compiling them. `num_sms` (default: an H100's 132) matters
        only to persistent configs. The config is `config`, else the space's default. Returns
        how many kernels were compiled or found compiled."""
        return self._on_triton("warm", args, kwargs, config, arch, num_sms)

    def _on_triton(self, method: str, args: tuple, kwargs: dict[str, Any],
                   config: Config | None, *extra: Any) -> Any:
        """The Triton backend's `method`(ir, config, values, *extra) for these arguments, under
        `config` (validated) or the space's default; errors name the kernel."""
        values = self.bind(args, kwargs)
        spec = self.arg_spec(values)
        space = self._space(spec, "triton", extra[0])  # the arch's knobs
        config = space.default() if config is None else space.validate(config)
        t = self._traced_for(spec, config)
        try:
            return getattr(registry.backend("triton"), method)(t.for_backend("triton"), config,
                                                               self._flat(spec, values), *extra)
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None

    def export(self, path: str | Path, *args: Any, arch: str = "sm_90",
               config: Config | None = None, **kwargs: Any) -> Path:
        """Write an ahead-of-time package to directory `path`: cubins for `arch` specialized to
        these arguments' shapes, dtypes and strides, and a manifest that `td.load(path)` launches
        with CuPy alone, without Triton (no GPU needed to export). The config is `config`, else
        the tuned one from the result cache, else the default. Returns the path."""
        from tiledsl.export import export
        return export(self, path, *args, arch=arch, config=config, **kwargs)

    def forget_tuned(self) -> None:
        """Drop the in-process memo of result-cache lookups (and the dispatch cache built on
        it), so the next call reads the result cache again: the tuner calls this after it
        stores a new best config."""
        self._tuned.clear()
        self._plans.clear()
        self._fast.clear()

    def _tuned_config(self, values: list[Any], spec: tuple, backend: str, arch: Any,
                      space: ConfigSpace) -> Config | None:
        """The tuned config the result cache holds for these arguments (looked up once)."""
        memo = (spec, backend, _arch_key(arch),
                tuple(getattr(v, "strides", None) for v in self._flat(spec, values)))
        if memo not in self._tuned:
            try:
                found = registry.service("tuner").cached_config(self, values, backend, arch)
            except TileDSLError:
                found = None
            self._tuned[memo] = found if found is not None and found in space else None
        return self._tuned[memo]

    def autotune(self, *args: Any, backend: str = "spatial", **options: Any) -> Any:
        """Tune the config for these arguments; the best is cached and used by `k(*args)` and
        `k.run` from then on. Options: arch, trials, timeout, strategy, storage, study_name,
        seed, check, progress, finalists, rounds (see autotune.tuner.tune). Returns a
        TuneResult."""
        return registry.service("tuner").tune(self, list(args), backend=backend, **options)

    def simulate(self, *args: Any, arch: Any = None, config: Config | None = None,
                 trace: str | None = None, **kwargs: Any) -> Any:
        """Time the kernel on a spatial architecture (a preset name or an Arch) with the C++
        simulator; returns a SimReport. `trace` writes a Chrome/Perfetto trace to that path."""
        values = self.bind(args, kwargs)
        spec = self.arg_spec(values)
        space = self._space(spec, "spatial", arch)
        config = space.default() if config is None else space.validate(config)
        t = self._traced_for(spec, config)
        try:  # the trace path is checked before simulating
            return registry.backend("spatial").simulate(  # type: ignore[attr-defined]
                t.for_backend("spatial"), config, arch=arch, trace_path=trace,
                args=self._flat(spec, values))
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None

    def source(self, *args: Any, target: str = "ir", config: Config | None = None,
               arch: Any = None, **kwargs: Any) -> str:
        """What the kernel becomes: "ir" (after the pipeline), "ir-traced", "triton" (the
        generated module), "ptx" (compiled for `arch`, default sm_90, no GPU needed) or
        "spatial" (the dataflow config for `arch`, a preset name, as JSON)."""
        t = self.traced(*args, **kwargs)
        if target == "ir":
            return print_ir(t.lowered)
        if target == "ir-traced":
            return print_ir(t.ir)
        values = self.bind(args, kwargs)
        try:
            emit, backend = registry.target(target)
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None
        spec = self.arg_spec(values)
        space = self._space(spec, backend, arch)
        config = space.default() if config is None else space.validate(config)
        if arch is None and target == "ptx":
            arch = "sm_90"
        t = self._traced_for(spec, config)
        return emit(t.for_backend(backend), config, self._flat(spec, values), arch=arch)


_NUMPY_CALL = {np.ndarray, int, float, bool}  # argument types `k(*args)` runs on NumPy as is
_NUMPY_DTYPES = dtypes._FROM_NUMPY


def _strides(v: Any) -> tuple[int, ...] | None:
    """An array's strides (torch's in elements, others' in bytes); None for a scalar. On every
    call (the dispatch key): NumPy's attribute is looked up first."""
    strides = getattr(v, "strides", None)
    if strides is not None:
        return strides
    stride = getattr(v, "stride", None)
    return tuple(stride()) if callable(stride) else None


def _is_gpu_array(v: Any) -> bool:
    """A CuPy array or a torch CUDA tensor (anything exposing __cuda_array_interface__)."""
    if type(v).__module__.startswith("torch"):  # which refuses the interface of a tensor
        return bool(getattr(v, "is_cuda", False))  # that requires grad
    try:
        return hasattr(v, "__cuda_array_interface__")
    except Exception:  # torch raises for CPU tensors when asked for the interface
        return False


def _element_hint(name: str, i: int | str, params: list[str]) -> str:
    """The IR name of element `i` of list argument `name` (`a_0`), unlike any parameter's."""
    hint = f"{name}_{i}"
    while hint in params:
        hint = f"{name}_{hint}"
    return hint


def _def_line(fn: FunctionType, source: str | None) -> int:
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


def tile_kernel(fn: FunctionType) -> TileKernel:
    """Make a tile kernel of a Python function (see the README for the language)."""
    return TileKernel(fn)


def _arch_key(arch: Any) -> Any:
    """An architecture as an in-process cache key: a preset's name, or a custom Arch's whole
    description (one that keeps its preset's name but changes the SRAM is another target)."""
    if arch is None or isinstance(arch, str):
        return arch
    if hasattr(arch, "to_json"):
        return arch.to_json()
    raise BackendError(f"arch must be a spatial preset's name or an Arch, got "
                       f"{type(arch).__name__} {arch!r}")


_HOST_INT_OPS: dict[str, Callable[..., int]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "neg": lambda a: -a,
    "abs": abs, "maximum": max, "minimum": min}


def _host_int(v: Value, fn: Function) -> Callable[[list[Any]], int] | None:
    """`v` as a function of the call's values, if it is an int computed from int arguments and
    constants alone (`k * 3`); None if it depends on anything else."""
    if v in fn.args:
        i = fn.args.index(v)
        return lambda values: int(values[i])
    op = v.owner
    t = v.type
    if op is None or not (isinstance(t, TileType) and t.shape == () and t.dtype.is_int):
        return None
    if op.name == "const":
        value = int(op.attrs["value"])
        return lambda values: value
    rule = _HOST_INT_OPS.get(op.name)
    parts = [_host_int(o, fn) for o in op.operands]
    if rule is None or any(p is None for p in parts):
        return None
    return lambda values: rule(*(p(values) for p in parts))  # type: ignore[misc]


def narrowed_ints(fn: Function) -> list[tuple[Callable[[list[Any]], int], str, dtypes.DType,
                                              Any]]:
    """The ints computed from int arguments (int64: `k`, `k * 3`) that the kernel casts to a
    narrower integer dtype, where they meet a tile of it (`x_int8 * k`): (their value as a
    function of the call's values, what they are, the dtype, the source location). They are
    checked at each call: a value out of that range would wrap."""
    out = []
    for op in walk(fn.body):
        if op.name != "cast":
            continue
        src, dst = op.operands[0].type, op.result.type
        if not (isinstance(src, TileType) and isinstance(dst, TileType) and src.dtype.is_int
                and dst.dtype.is_int and dst.dtype.bits < src.dtype.bits):
            continue
        value = _host_int(op.operands[0], fn)  # constants alone were folded and checked
        if value is not None:
            what = f"argument '{op.operands[0].hint}'" if op.operands[0] in fn.args else \
                "a value computed from int arguments"
            out.append((value, what, dst.dtype, op.loc))
    return out
