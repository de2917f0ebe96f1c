"""Running a kernel on a backend: the dispatch cache and the checks every call makes.

The first call of an argument signature, backend and layout makes a plan (the backend, the
config space, the config to run: the tuned one from the result cache, else the space's
default, the trace, the narrowed int arguments to check, the arguments written in place);
later calls of that key only check what depends on the arrays themselves (overlap, int ranges)
and run. On torch CUDA tensors a backend that prepares launches gives a faster call still
(dispatch.py), remembered per layout.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

import numpy as np

from tiledsl.interop import arrays
from tiledsl.runtime import dispatch, registry
from tiledsl import dtypes
from tiledsl.frontend import static_args
from tiledsl.runtime.arg_specs import ArgSpec
from tiledsl.runtime.config import Config, ConfigSpace
from tiledsl.runtime.returns import pack
from tiledsl.runtime.traces import GRADS
from tiledsl.errors import ArgumentError, BackendError, TileDSLError
from tiledsl.ir.core import Function, Value, walk
from tiledsl.ir.types import TileType

if TYPE_CHECKING:
    from tiledsl.runtime.kernel import TileKernel
    from tiledsl.runtime.traces import Traced



# inside a differentiable kernel's forward (runtime/differentiable.py): writes into arguments
# that require grad are the Function's own (Liger's cross entropy), as in its torch forward
_GRAD_WRITES: ContextVar[bool] = ContextVar("tiledsl_grad_writes", default=False)


@contextmanager
def grad_writes_allowed() -> Iterator[None]:
    token = _GRAD_WRITES.set(True)
    try:
        yield
    finally:
        _GRAD_WRITES.reset(token)


class Plan(NamedTuple):
    """What the first call of a signature, backend and layout decided."""

    backend: Any  # the registered backend
    space: ConfigSpace
    chosen: Config | None  # tuned, else the space's default (None: a pin that does not fit)
    traced: Traced
    narrowed: list  # narrowed_ints of the trace
    written: list[int]  # the IR arguments stored into


class Runner:
    """Runs kernel `k` (its argument specs, traces and caches) on a backend."""

    def __init__(self, k: TileKernel) -> None:
        self.k = k

    def remember_fast(self, fast_key: tuple, values: list[Any]) -> None:
        """After a slow call on torch CUDA tensors: the fast call for their layout, if the
        backend prepares launches."""
        spec = self.k.arg_spec(values)
        if any(s[0] == "list" for s in spec) or self.k.specs.valued:
            return  # (dispatch.key never takes lists, nor an argument's values)
        runtime = [i for i, s in enumerate(spec) if s[0] not in ("const", "alias")]
        flat = self.k.specs.flat(spec, values)
        impl, _, chosen, t, narrowed, written = self.k.caches.plans[
            plan_key(flat, spec, "triton", None)]
        if t.captured:  # (its launch takes tensors the arguments do not hold)
            return
        launch = impl.prepare(t.for_backend("triton"), flat, chosen) \
            if hasattr(impl, "prepare") else None
        if launch is not None:
            call = dispatch.fast_call(
                self.k.name, self.k.specs.flat_names(spec), launch, written,
                lambda values: self.check_narrowed(narrowed, values), t.returns)
            self.k.caches.fast[fast_key] = call if len(runtime) == len(spec) else \
                lambda values: call([values[i] for i in runtime])

    def captured(self, objects: tuple[Any, ...], backend: str) -> list[Any]:
        """The tensors a trace captured (frontend/captured.py) as `backend` takes them: torch
        CUDA tensors on "triton", NumPy views on the CPU backends."""
        out = []
        for o in objects:
            on_gpu = getattr(o, "is_cuda", False)
            if (backend == "triton") != on_gpu:
                where = "on" if on_gpu else "off"
                raise ArgumentError(f"a {type(o).__name__} of shape {tuple(o.shape)} the kernel "
                                    "reaches without taking it as an argument is "
                                    f"{where} the GPU, and this call runs on backend "
                                    f"'{backend}'", kernel=self.k.name,
                                    hint="keep the module's tensors where the arguments are "
                                         "(layer.to(x.device))")
            out.append(o.detach() if on_gpu else arrays.to_numpy(o, self.k.name, "captured"))
        return out

    def check_narrowed(self, narrowed: list, values: list[Any]) -> None:
        for value_of, what, d, loc in narrowed:
            if not np.iinfo(d.np).min <= (n := value_of(values)) <= np.iinfo(d.np).max:
                raise ArgumentError(
                    f"{what} is {n}, out of the range of {d}, the dtype it meets (NumPy raises "
                    "OverflowError there)", kernel=self.k.name, loc=loc,
                    hint="cast the tile to a wider dtype first")

    def run(self, values: list[Any], backend: str, config: Config | None, arch: Any) -> Any:
        """Run on `backend` with `config` (None: the plan's, tuned or default)."""
        self.k.not_traced()
        spec = self.k.arg_spec(values)
        tuning = values  # the caller's arguments: the result cache's key reads them
        values = self.k.specs.flat(spec, values)  # from here on, the IR's arguments
        if type(backend) is not str:  # (unhashable names would be a TypeError below)
            self.k.check_backend(backend)
        key = plan_key(values, spec, backend, arch)
        plan = self.k.caches.plans.get(key)
        if plan is None:  # once per signature, backend and layout: the dispatch cache
            try:
                impl = registry.backend(backend)
            except TileDSLError as e:
                raise e.with_context(kernel=self.k.name) from None
            space = self.k.space(spec, backend, arch)
            tuned = self.k.tuned_config(tuning, spec, backend, arch, space)
            traced = self.k.traces.get(spec)
            self.check_no_overlap(values, spec)
            names = self.k.specs.flat_names(spec)
            written = [names.index(n) for n in self.k.traces.written(spec)]
            chosen = tuned or (space.default() if space.unfit is None else None)
            plan = self.k.caches.plans[key] = Plan(impl, space, chosen, traced,
                                                   narrowed_ints(traced.lowered), written)
        impl, space, chosen, t, narrowed, written = plan
        if written:  # (a read-only array the kernel does not write is fine)
            for i in written:
                if isinstance(values[i], np.ndarray) and not values[i].flags.writeable:
                    self.check_writable(values, spec)
            arrays.check_overlap(self.k.name, self.k.specs.flat_names(spec), values,
                                 written)  # on every call: it depends on the arrays
        if narrowed:
            self.check_narrowed(narrowed, values)
        config = (chosen or space.default()) if config is None else space.validate(config)
        if t.tunables:  # a registered knob's value is the trace's (tunables.py)
            t = self.k.traces.for_config(spec, config)
        for tuner, chosen_config in t.best_configs:  # as Triton's autotuner records the
            tuner.best_config = chosen_config  # config it ran (the trace's, this run's)
        if t.captured:  # tensors the code reaches without arguments (frontend/captured.py)
            values = [*values, *self.captured(t.captured, backend)]
        try:
            outputs = impl.run(t.for_backend(backend), values, config,
                               **({} if arch is None else {"arch": arch}))
        except TileDSLError as e:
            raise e.with_context(kernel=self.k.name) from None
        return pack(outputs, t.returns)

    def refuse_grad_writes(self, values: list[Any], written: list[str]) -> None:
        """A write in place into a torch tensor that requires grad: autograd cannot see it
        (except inside a differentiable kernel's forward, as in a Function's forward)."""
        if _GRAD_WRITES.get():
            return
        names, values = static_args.splice(list(self.k.specs.signature.parameters), values)
        for n in written:  # (a list's tensors by the IR's names: `a[0]`)
            if getattr(values[names.index(n)], "requires_grad", False):
                raise ArgumentError(f"the kernel writes argument '{n}' in place, and that "
                                    "tensor requires grad (autograd cannot see the write); use "
                                    "td.torch_op, or pass a tensor without grad",
                                    kernel=self.k.name)

    def check_no_overlap(self, values: list[Any], spec: tuple[ArgSpec, ...]) -> None:
        """An argument written in place must not have elements that share memory (a stride of
        0, from broadcast_to or torch's expand; overlapping rows from as_strided)."""
        names = self.k.specs.flat_names(spec)
        arrays.check_layouts(self.k.name, names, values,
                             [names.index(n) for n in self.k.traces.written(spec)])

    def check_writable(self, values: list[Any], spec: tuple[ArgSpec, ...]) -> None:
        for name in self.k.traces.written(spec):
            v = values[self.k.specs.flat_names(spec).index(name)]
            if isinstance(v, np.ndarray) and not v.flags.writeable:
                raise ArgumentError(f"kernel '{self.k.name}' writes argument '{name}' in place, "
                                    "but that array is read-only (JAX arrays and some DLPack "
                                    "views are); pass a writable array", kernel=self.k.name)


def plan_key(values: list[Any], spec: tuple, backend: str, arch: Any) -> tuple:
    """The dispatch cache's key: the signature, backend, architecture and the arrays' strides
    (and the arguments that trace with `x.requires_grad` True: traces.py's GRADS)."""
    key = (spec, backend, arch_key(arch), tuple(strides(v) for v in values))
    grads = GRADS.get()
    return (key, grads) if grads else key


def strides(v: Any) -> tuple[int, ...] | None:
    """An array's strides (torch's in elements, others' in bytes); None for a scalar. On every
    call (the dispatch key): NumPy's attribute is looked up first."""
    strides = getattr(v, "strides", None)
    if strides is not None:
        return strides
    stride = getattr(v, "stride", None)
    return tuple(stride()) if callable(stride) else None


def arch_key(arch: Any) -> Any:
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


def host_int(v: Value, fn: Function) -> Callable[[list[Any]], int] | None:
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
    parts = [host_int(o, fn) for o in op.operands]
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
        value = host_int(op.operands[0], fn)  # constants alone were folded and checked
        if value is not None:
            what = f"argument '{op.operands[0].hint}'" if op.operands[0] in fn.args else \
                "a value computed from int arguments"
            out.append((value, what, dst.dtype, op.loc))
    return out


def tuned_config(k: TileKernel, values: list[Any], spec: tuple, backend: str, arch: Any,
                 space: ConfigSpace) -> Config | None:
    """The tuned config the result cache holds for these arguments (looked up once per
    signature, backend, architecture and layout; `k.forget_tuned()` drops the memo)."""
    memo = (spec, backend, arch_key(arch),
            tuple(getattr(v, "strides", None) for v in k.specs.flat(spec, values)))
    if memo not in k.caches.tuned:
        try:
            found = registry.service("tuner").cached_config(k, values, backend, arch)
        except TileDSLError:
            found = None
        k.caches.tuned[memo] = found if found is not None and found in space else None
    return k.caches.tuned[memo]
