"""`@td.tile_kernel`: the kernel object users call, trace, tune and inspect.

Tracing and the lowering pipeline run once per argument signature (shapes, dtypes, scalar kinds);
a config is applied only when a backend generates code or runs, so trying a config is cheap.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from pathlib import Path
from types import FunctionType
from typing import Any, Callable

import numpy as np

from tiledsl.interop import arrays
from tiledsl.runtime import differentiable, dispatch, registry, returns
from tiledsl import dtypes
from tiledsl.frontend import helpers, reads, static_args
from tiledsl.frontend import valued_args
from tiledsl.frontend.valued_args import ValuesNeeded
from tiledsl.frontend.zero_d_memory import MemoryNeeded
from tiledsl.runtime.config import Config, ConfigSpace
from tiledsl.runtime.arg_specs import ArgSpec, ArgSpecs
from tiledsl.runtime.caches import Caches
from tiledsl.errors import ConfigError, Loc, TileDSLError, TraceError, user_loc
from tiledsl.ir.printer import print_ir
from tiledsl.runtime.runner import Runner, tuned_config
from tiledsl.runtime.spaces import space_for
from tiledsl.frontend.tracer import active
from tiledsl.runtime.helion_settings import HELION_SETTINGS
from tiledsl.runtime.traces import Traced, Traces, with_grads


class TileKernel:
    """A tile kernel: call it on NumPy arrays, or use `run`, `config_space`, `source`."""

    def __init__(self, fn: FunctionType, config: Config | None = None) -> None:
        if not inspect.isfunction(fn):
            raise TraceError(f"@td.tile_kernel decorates a function, got {type(fn).__name__}")
        fn = helpers.user_function(fn)  # (under `@torch.no_grad()`: autograd's business)
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name: str = fn.__name__
        self.file: str = inspect.getsourcefile(fn) or fn.__code__.co_filename
        self.signature = inspect.signature(fn)
        self.specs = ArgSpecs(self.name, self.signature)
        self.caches = Caches()
        self.traces = Traces(fn, self.name, self.file, self.signature, lambda: self.caches,
                             self.specs.flat_names)
        self.runner = Runner(self)
        self.pinned = config  # @td.tile_kernel(config=...): every call's config
        self.configs: list[Config] = [] if config is None else [config]  # Helion's `configs`
        self.settings: dict[str, Any] = {}  # Helion's settings, as given (helion_settings.py)
        if self.name == "<lambda>":
            raise TraceError("@td.tile_kernel needs a function written with `def`, got a lambda",
                             kernel=self.name, loc=Loc(self.file, fn.__code__.co_firstlineno))
        for p in self.signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TraceError(f"kernel '{self.name}' cannot take *args or **kwargs",
                                 kernel=self.name, loc=Loc(self.file, self.traces.def_line()))
        # the caches, per value of the globals and closure variables it reads (reads.py)
        self._reads = reads.Generations(fn, "caches", Caches)

    def __repr__(self) -> str:
        return f"<tile_kernel {self.name} ({self.file}:{self.fn.__code__.co_firstlineno})>"

    # ---- arguments -------------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict) -> list[Any]:
        """Positional argument values in the order of the kernel's parameters."""
        return self.specs.bind(args, kwargs)

    def arg_spec(self, values: list[Any]) -> tuple[ArgSpec, ...]:
        """The signature a trace is cached under; raises ArgumentError for what no backend takes.
        A spec with runtime ints is traced here: an int the body needs static (a shape, a
        range) makes its parameter compile-time, and the spec is made again."""
        self._reads.sync(self)  # a global it reads changed: the traces of its value
        spec = self.specs.all_of(values)
        if spec in self.caches.traces and not any(s[0] == "alias" for s in spec):
            return spec  # traced already (as `specialized` returns it)
        return self.specialized(lambda: self._written_aliases(self.specs.all_of(values)))

    def _written_aliases(self, spec: tuple[ArgSpec, ...]) -> tuple[ArgSpec, ...]:
        """`spec` with its aliases (one array passed as two arguments) kept where the kernel
        writes one of the two, else as the separate arguments they read (arg_specs.py)."""
        if not any(s[0] == "alias" for s in spec):
            return spec
        plain = tuple(spec[s[1]] if s[0] == "alias" else s for s in spec)
        written = set(self.traces.written(plain))
        names = list(self.signature.parameters)
        if any(s[0] == "alias" and {names[j], names[s[1]]} & written
               for j, s in enumerate(spec)):
            return spec
        return plain

    def specialized(self, make: Callable[[], tuple[ArgSpec, ...]]) -> tuple[ArgSpec, ...]:
        """`make()`, made again while tracing it finds int parameters (or, in a host-code
        `if`, Python float ones) that must be static, or 0-d array ones it writes, which are
        memory (frontend/zero_d_memory.py)."""
        while True:
            try:
                spec = make()  # (which may trace: `_written_aliases`)
                if spec in self.caches.traces:
                    return spec
                if any(_may_specialize(s) for s in spec):
                    self._trace_knob_values(spec)
                elif any(s[0] == "scalar" and not s[2] or _may_be_valued(s) for s in spec):
                    self.traces.get(spec)  # a 0-d array argument: memory if the body writes
                    # it; a small int array: valued if host code reads its values
            except (static_args.StaticNeeded, MemoryNeeded, ValuesNeeded) as e:
                kind = self.specs.static if isinstance(e, static_args.StaticNeeded) \
                    else self.specs.valued if isinstance(e, ValuesNeeded) else self.specs.memory
                kind |= e.params  # (each round adds one: the loop ends)
                self.caches.plans.clear()
                self.caches.fast.clear()
                continue
            return spec

    def _trace_knob_values(self, spec: tuple[ArgSpec, ...]) -> None:
        """Trace `spec`, and again with each value of each registered knob (the others at
        their defaults): a value may use an int argument where only a static one will do (the
        race check, with a block size that host code reads)."""
        t = self.traces.get(spec)
        defaults = {n: f.initial for n, f in t.tunables.items()}
        for name, fragment in sorted(t.tunables.items()):
            for value in fragment.choices:
                if value != fragment.initial:
                    knobs = tuple(sorted({**defaults, name: value}.items()))
                    try:
                        self.traces.get(spec, knobs)
                    except TileDSLError:  # the config space says so, with the config
                        pass

    def ir_values(self, *args: Any, **kwargs: Any) -> list[Any]:
        """The values a backend receives for this call (see `_flat`)."""
        values = self.bind(args, kwargs)
        return self.specs.flat(self.arg_spec(values), values)

    # ---- tracing ---------------------------------------------------------------------------
    def traced(self, *args: Any, **kwargs: Any) -> Traced:
        """The IR for these arguments (traced once per signature, then cached)."""
        spec = self.arg_spec(self.bind(args, kwargs))
        return self.traces.get(spec)

    def traced_under(self, config: Config, *args: Any, **kwargs: Any) -> Traced:
        """The IR `config` runs for these arguments: `traced`, with the config's values of the
        registered knobs (td.register_tunable) in place of their defaults."""
        return self.traces.for_config(self.arg_spec(self.bind(args, kwargs)), config)

    @property
    def source_digest(self) -> str:
        """SHA-256 of the source as decorated and of the values of the globals and closure
        variables it reads now (reads.py): what the result cache keys on, and what the tuner's
        other processes check the kernel they import from its file against."""
        text = f"{self.traces.source_text()}\0{reads.text(self.fn)}"
        return hashlib.sha256(text.encode()).hexdigest()

    # ---- configs ---------------------------------------------------------------------------
    def config_space(self, *args: Any, backend: str | None = None, arch: Any = None,
                     **kwargs: Any) -> ConfigSpace:
        """The valid configs for these arguments (with `backend`'s knobs and constraints; the
        spatial backend's depend on `arch`)."""
        spec = self.arg_spec(self.bind(args, kwargs))
        if backend is not None:  # a name it knows (and hashable: the spaces' cache key)
            self.check_backend(backend)
        return self.space(spec, backend, arch)

    def check_backend(self, backend: Any) -> None:
        """A BackendError naming the kernel unless `backend` names a registered backend."""
        try:
            registry.backend(backend)
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None

    def space(self, spec: tuple[ArgSpec, ...], backend: str | None, arch: Any = None
              ) -> ConfigSpace:
        """The config space for an argument spec (spaces.py), made once."""
        return space_for(self, spec, backend, arch)

    # ---- running ---------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run where the arrays live: CPU arrays of any DLPack library (NumPy, torch, JAX...) on
        the NumPy backend through zero-copy views, GPU arrays (CuPy, torch CUDA...) on "triton";
        outputs come back as the caller's kind of array (see tiledsl/interop/arrays.py)."""
        values = self.bind(args, kwargs)
        if all(type(v) in _NUMPY_CALL for v in values):  # the common case, decided quickly
            out = self.runner.run(values, "numpy", None, None)
            return out if np.ndarray in map(type, values) else self._made_by_torch(values, out)
        if differentiable.wanted(values):  # outputs torch differentiates (differentiable.py)
            out = differentiable.call(self, values)
            if out is not NotImplemented:
                return out
        return self._call(values)

    def _made_by_torch(self, values: list[Any], out: Any) -> Any:
        """The outputs of a call with no array argument: torch tensors where the host code
        made its tensors with torch (TritonBench's `wrapper(size_m, d_head)` allocates with
        `torch.randn`, and its caller calls `.clone()` on the result), else NumPy arrays."""
        if out is None or not self.traces.get(self.arg_spec(values)).torch_made:
            return out
        import torch
        return returns.map_tensors(out, lambda a: arrays.from_numpy(a, torch.empty(0)))

    def _call(self, values: list[Any]) -> Any:
        """`__call__` on bound `values` that are not all NumPy's."""
        self._reads.sync(self)
        fast_key = self.fast_key(values)
        if fast_key is not None and (fast := self.caches.fast.get(fast_key)) is not None:
            return fast(values)
        names, flat = static_args.splice(list(self.signature.parameters), values)
        at = arrays.where(self.name, names, flat)
        if at is None or at.library == "numpy":
            return self.runner.run(values, "numpy", None, None)
        if at.gpu and at.library in ("torch", "cupy"):
            spec = self.arg_spec(values) if at.library == "torch" else None
            grads = self._grads(values, spec) if spec is not None else frozenset()
            with with_grads(grads):
                if spec is not None:
                    self.runner.refuse_grad_writes(values, self.traces.written(spec))
                result = self.runner.run(values, "triton", None, None)
                if fast_key is not None:  # the next call of this layout skips what it decided
                    self.runner.remember_fast(fast_key, values)
            return result
        return self._converted(values, names, flat, at, "triton" if at.gpu else "numpy")

    def fast_key(self, values: list[Any]) -> tuple | None:
        """The key of a call on torch CUDA tensors by layout (dispatch.py), compile-time values
        included (they pick the trace); None for other calls."""
        key = dispatch.key(values)
        if key is None:
            return None
        return key + (tuple(v for n, v in zip(self.signature.parameters, values)
                            if type(v) is bool or n in self.specs.static),)

    def _grads(self, values: list[Any], spec: tuple[ArgSpec, ...]) -> frozenset[str]:
        """The arguments that require grad (torch tensors) and whose `x.requires_grad` the code
        reads: the trace with them True is this call's (traces.py's GRADS)."""
        wanting = {n for n, v in zip(self.signature.parameters, values)
                   if getattr(v, "requires_grad", False) is True}
        grads: frozenset[str] = frozenset()
        for _ in range(len(wanting) + 1):  # a branch taken may read another's
            with with_grads(grads):
                more = frozenset(self.traces.get(spec).grad_reads & wanting)
            if more == grads:
                break
            grads = more
        return grads

    def _converted(self, values: list[Any], names: list[str], flat: list[Any], at: Any,
                   backend: str, config: Config | None = None, arch: Any = None) -> Any:
        """Run arrays of another library on `backend` (CUDA arrays viewed as torch tensors, CPU
        ones as NumPy views, written in place), the outputs handed back as the caller's kind."""
        if at.gpu:  # another library's CUDA arrays: viewed as torch tensors, handed back
            import torch
            inner = static_args.map_arrays(
                values, lambda v: torch.from_dlpack(v) if arrays.is_array(v) else v)
            back, written, grads = arrays.from_dlpack_like, [], frozenset()
        else:
            inner = self.numpy_views(values)
            back = arrays.from_numpy
            spec = self.arg_spec(inner)
            grads = self._grads(values, spec) if at.library == "torch" else frozenset()
            with with_grads(grads):
                written = self.traces.written(spec) if at.library == "torch" else []
            self.runner.refuse_grad_writes(values, written)
        try:
            with with_grads(grads):
                result = self.runner.run(inner, backend, config, arch)
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None
        if written:  # writes through NumPy views of torch tensors: tell autograd
            from torch.autograd.graph import increment_version
            for n in written:
                increment_version(flat[names.index(n)])
        like = next(v for v in flat if arrays.is_array(v))
        originals = {id(i): v for i, v in zip(static_args.flatten_arrays(inner), flat)
                     if arrays.is_array(v)}

        def convert(out: Any) -> Any:
            return originals[id(out)] if id(out) in originals else back(out, like)
        try:
            return returns.map_tensors(result, convert)  # (None, numbers: as they are)
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None

    def numpy_views(self, values: list[Any]) -> list[Any]:
        """Bound `values` with CPU arrays of any library (and lists of them) as NumPy views."""
        return [[arrays.to_numpy(x, self.name, f"{n}[{i}]") for i, x in enumerate(v)]
                if isinstance(v, (list, tuple)) and v and all(map(arrays.is_array, v))
                else arrays.to_numpy(v, self.name, n) if arrays.is_array(v) else v
                for n, v in zip(self.signature.parameters, values)]

    def written_args(self, *args: Any, **kwargs: Any) -> list[str]:
        """The arguments the kernel stores into (in place) for these arguments (an element of a
        list argument `a` as `a[i]`)."""
        values = self.bind(args, kwargs)
        return self.traces.written(self.arg_spec(values))

    def run(self, *args: Any, backend: str = "numpy", config: Config | None = None,
            arch: Any = None, **kwargs: Any) -> Any:
        """Run on `backend` with `config` (the tuned config from the result cache, else the
        space's default, when None); `arch` picks the spatial backend's architecture. CPU
        arrays of another library (torch) run on the CPU backends as NumPy views and come back
        as that library's."""
        values = self.bind(args, kwargs)
        if backend != "triton" and not all(type(v) in _NUMPY_CALL for v in values):
            names, flat = static_args.splice(list(self.signature.parameters), values)
            at = arrays.where(self.name, names, flat)
            if at is not None and not at.gpu and at.library != "numpy":
                return self._converted(values, names, flat, at, backend, config, arch)
        return self.runner.run(values, backend, config, arch)

    def not_traced(self) -> None:
        """Calling a kernel while another traces (in its loops or its host code) is an error."""
        tracer = active()
        if tracer is not None:
            tracer.fail(TraceError, f"kernel '{tracer.kernel}' calls kernel '{self.name}'; "
                        "kernels cannot call kernels", hint=f"call its function, "
                        f"{self.name}.fn(...), which traces its body here as a helper's (its "
                        "host code and grids become this kernel's), or move the shared code "
                        "into a plain Python function and call that")

    def compile(self, *args: Any, config: Config | None = None, arch: str = "sm_90",
                **kwargs: Any) -> list[Any]:
        """Compile ahead of time for `arch` (no GPU needed): one report per generated kernel
        with PTX, cubin, registers, spills and shared memory (`.problem` if it should not run).
        The config is `config`, else the tuned one from the result cache, else the default."""
        return self._on_triton("compile", args, kwargs, config, arch)

    def warm(self, *args: Any, config: Config | None = None, arch: str = "sm_90",
             num_sms: int | None = None, **kwargs: Any) -> int:
        """Fill Triton's JIT cache for launching on arrays shaped, typed and strided like these
        on a GPU of `arch` (no GPU needed): the first `backend="triton"` call of that shape then
        loads its kernels instead of compiling them. `num_sms` (default: an H100's 132) matters
        only to persistent configs. The config is `config`, else the tuned one, else the
        default. Returns how many kernels were compiled or found compiled."""
        return self._on_triton("warm", args, kwargs, config, arch, num_sms)

    def _on_triton(self, method: str, args: tuple, kwargs: dict[str, Any],
                   config: Config | None, *extra: Any) -> Any:
        """The Triton backend's `method`(ir, config, values, *extra) for these arguments, under
        `config` (validated) or the space's default; errors name the kernel."""
        values = self.bind(args, kwargs)
        spec = self.arg_spec(values)
        space = self.space(spec, "triton", extra[0])  # the arch's knobs
        config = self.config_for(values, spec, space, "triton", None, config)
        t = self.traces.for_config(spec, config)
        try:
            return getattr(registry.backend("triton"), method)(t.for_backend("triton"), config,
                                                               self.specs.flat(spec, values), *extra)
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None

    def export(self, path: str | Path, *args: Any, arch: str = "sm_90",
               config: Config | None = None, **kwargs: Any) -> Path:
        """Write an ahead-of-time package to directory `path`: cubins for `arch` specialized to
        these arguments' shapes, dtypes and strides, and a manifest that `td.load(path)` launches
        with CuPy alone, without Triton (no GPU needed to export). The config is `config`, else
        the tuned one from the result cache, else the default. Returns the path."""
        from tiledsl.interop.export import export
        return export(self, path, *args, arch=arch, config=config, **kwargs)

    def forget_tuned(self) -> None:
        """Drop the in-process memo of result-cache lookups (and the dispatch cache built on
        it), so the next call reads the result cache again: the tuner calls this after it
        stores a new best config."""
        self.caches.forget_dispatch()

    def config_for(self, values: list[Any], spec: tuple, space: ConfigSpace, backend: str,
                   arch: Any, config: Config | None) -> Config:
        """`config` validated, else the tuned config the result cache holds for these
        arguments on `backend` (and spatial `arch`), else the space's default."""
        if config is not None:
            return space.validate(config)
        return self.tuned_config(values, spec, backend, arch, space) or space.default()

    def tuned_config(self, values: list[Any], spec: tuple, backend: str, arch: Any,
                     space: ConfigSpace) -> Config | None:
        """The tuned config the result cache holds for these arguments (runner.tuned_config);
        None when the kernel pins its config (the space's default then)."""
        if self.pinned is not None:
            return None
        return tuned_config(self, values, spec, backend, arch, space)

    def autotune(self, *args: Any, backend: str = "spatial", **options: Any) -> Any:
        """Tune the config for these arguments; the best is cached and used by `k(*args)` and
        `k.run` from then on. Options: arch, trials, timeout, strategy, storage, study_name,
        seed, check, progress, finalists, rounds (see autotune.tuner.tune). Returns a
        TuneResult."""
        if self.pinned is not None:
            raise ConfigError(f"kernel '{self.name}' pins its config ({self.pinned}), so calls "
                              "would not use a tuned one", kernel=self.name,
                              hint="leave config= out of @td.tile_kernel(...) to tune it; "
                                   "k.run(..., config=...) tries one config")
        return registry.service("tuner").tune(self, list(args), backend=backend, **options)

    def simulate(self, *args: Any, arch: Any = None, config: Config | None = None,
                 trace: str | None = None, **kwargs: Any) -> Any:
        """Time the kernel on a spatial architecture (a preset name or an Arch) with the C++
        simulator; returns a SimReport. `trace` writes a Chrome/Perfetto trace to that path.
        The config is `config`, else the tuned one from the result cache, else the default."""
        values = self.bind(args, kwargs)
        spec = self.arg_spec(values)
        space = self.space(spec, "spatial", arch)
        config = self.config_for(values, spec, space, "spatial", arch, config)
        t = self.traces.for_config(spec, config)
        try:  # the trace path is checked before simulating
            return registry.backend("spatial").simulate(  # type: ignore[attr-defined]
                t.for_backend("spatial"), config, arch=arch, trace_path=trace,
                args=self.specs.flat(spec, values))
        except TileDSLError as e:
            raise e.with_context(kernel=self.name) from None

    def source(self, *args: Any, target: str = "ir", config: Config | None = None,
               arch: Any = None, **kwargs: Any) -> str:
        """What the kernel becomes: "ir" (after the pipeline), "ir-traced", "triton" (the
        generated module), "ptx" (compiled for `arch`, default sm_90, no GPU needed) or
        "spatial" (the dataflow config for `arch`, a preset name, as JSON). The config is
        `config`, else the tuned one from the result cache, else the default."""
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
        space = self.space(spec, backend, arch)
        config = self.config_for(values, spec, space, backend,
                                 arch if backend == "spatial" else None, config)
        if arch is None and target == "ptx":
            arch = "sm_90"
        t = self.traces.for_config(spec, config)
        return emit(t.for_backend(backend), config, self.specs.flat(spec, values), arch=arch)


_NUMPY_CALL = {np.ndarray, int, float, bool}  # argument types `k(*args)` runs on NumPy as is


# Helion's `@helion.kernel(...)` options tiledsl takes (`static_shapes`: tiledsl always traces
# per shape, Helion's default; `configs`: its first pins, as `config`; and Helion's settings,
# helion_settings.py); any other is an error that lists these
OPTIONS = ("config", "configs", "static_shapes")


def tile_kernel(fn: FunctionType | None = None, /, *, config: Config | None = None,
                static_shapes: bool = True, configs: Any = None, **unknown: Any) -> Any:
    """Make a tile kernel of a Python function (see the README for the language).

    Also a decorator factory, as Helion's `@helion.kernel(...)`: `@td.tile_kernel()`, and
    `@td.tile_kernel(config=td.Config(...))`, which pins the config every call and backend
    runs unless the call gives one (over a tuned one; the knobs a backend lacks, such as
    warps on NumPy, are dropped there). `static_shapes=True` is what tiledsl does anyway (it
    traces and compiles per shape); `False` is accepted and changes nothing."""
    where = Loc(inspect.getsourcefile(fn) or "", fn.__code__.co_firstlineno) \
        if inspect.isfunction(fn) else user_loc()
    settings = {k: v for k, v in unknown.items() if k in HELION_SETTINGS}
    if len(settings) < len(unknown):
        name = sorted(set(unknown) - set(settings))[0]
        raise TraceError(f"@td.tile_kernel got an unknown option {name!r}", loc=where,
                         hint=f"it takes {', '.join(OPTIONS)} and Helion's settings "
                              "(tiledsl/runtime/helion_settings.py); tune with k.autotune(...) "
                              "and check results with td.testing.assert_close")
    # Helion's candidates: the first pins (helion_settings.py); an empty list pins nothing
    # (`configs=k.configs` of an unpinned kernel, as Helion's attention example passes)
    if configs is not None:
        if not isinstance(configs, (list, tuple)) or configs and config is not None or \
                not all(isinstance(c, Config) for c in configs):
            raise TraceError("@td.tile_kernel(configs=[...]) takes a list of td.Config, and "
                             "not with config=", loc=where)
        configs = list(configs) or None
    if config is not None and not isinstance(config, Config):
        raise TraceError(f"@td.tile_kernel(config=...) takes a td.Config, got "
                         f"{type(config).__name__}", loc=where,
                         hint="td.Config(block_sizes=[64, 64], num_warps=4)")
    if not isinstance(static_shapes, bool):
        raise TraceError(f"@td.tile_kernel(static_shapes=...) takes True or False, got "
                         f"{static_shapes!r}", loc=where)
    if fn is None:
        return lambda f: tile_kernel(f, config=config, static_shapes=static_shapes,
                                     configs=configs, **settings)
    kernel = TileKernel(fn, config if configs is None else configs[0])
    kernel.settings = settings
    if configs is not None:
        kernel.configs = list(configs)
    return kernel


def _may_be_valued(s: ArgSpec) -> bool:
    """A small integer or bool array argument, whose values host code may read
    (frontend/valued_args.py)."""
    if s[0] != "tensor":
        return False
    d = dtypes.BY_SHORT[s[2]]
    return (d.is_int or d.is_bool) and int(np.prod(s[1])) <= valued_args.MAX_ELEMENTS


def _may_specialize(s: ArgSpec) -> bool:
    """A runtime int argument, or a Python float one (static where a host-code `if` tests
    it): tracing may make it compile-time."""
    return s[0] == "scalar" and (dtypes.BY_SHORT[s[1]].is_int or
                                 bool(s[2]) and dtypes.BY_SHORT[s[1]].is_float)
