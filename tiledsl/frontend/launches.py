"""A Triton launch in host code, `kernel[grid](*args, **kwargs)`, as a tiledsl grid: the
`@triton.jit` kernel's body, as written, runs once per program of `grid` (Triton's wrappers
merged into a tile kernel keep both their launch and the kernel they launch).

- `grid` is a tuple of sizes, or a function of the launch's arguments by name (`lambda meta:
  (triton.cdiv(n, meta["BLOCK"]),)`), as Triton takes it; `tl.program_id(axis)` in the body is
  the program's index along that axis (`td.program_id`). A Python float given to a parameter
  not annotated `tl.constexpr` is a runtime scalar in the body, as in Triton.
- The body is the kernel's Python function with `tl` (`triton.language`) read as `td`
  (frontend/helpers.py), rewritten as any function a kernel calls.
- An argument with `data_ptr()` and `dtype` that is not a kernel tensor (FlagGems'
  `StridedBuffer`) is a pointer at that address, as Triton takes it (frontend/data_ptrs.py).
- `@triton.heuristics({...})` computes its arguments from the others, as Triton does;
  `@triton.autotune(configs=[...])` becomes a knob of the kernel's config space choosing a
  config (`td.register_tunable`), whose arguments the launch takes. A config's `num_warps`,
  and the launch's `num_warps=`/`num_stages=`, are left to tiledsl's config space.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from tiledsl.errors import Loc, TraceError
from tiledsl import dtypes
from tiledsl.frontend import data_ptrs, loops
from tiledsl.frontend.captured import capture, is_foreign_tensor
from tiledsl.frontend.host_scalars import HostScalar
from tiledsl.frontend.pointers import pointer_at
from tiledsl.frontend.runtime_ints import runtime
from tiledsl.frontend.tracer import current
from tiledsl.frontend.tunables import Choice, register_tunable
from tiledsl.frontend.static_args import need_static as check_static
from tiledsl.frontend.values import TileValue, cast, need_static, to_value
from tiledsl.lang import tensor_descriptors
from tiledsl.lang.language import grid as grid_range

# compiler and launch options a launch (or a heuristic) may give beside the kernel's arguments
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
                  "extern_libs", "debug", "sanitize_overflow", "launch_cooperative_grid",
                  "launch_pdl", "waves_per_eu", "matrix_instr_nonkdim", "kpack", "grf_mode")


def unwrap(kernel: Any) -> tuple[Any, list[tuple[str, Callable]], Any]:
    """The `@triton.jit` function under `kernel`'s autotune and heuristics decorators and any
    other `triton.KernelInterface` wrapper with a `.fn` (FlagGems' `@libentry()`) or torch's
    `torch.library.wrap_triton` (flash-attn's, mamba's launches), or None when
    `kernel` is none of those; its heuristics and its autotuner (or None)."""
    heuristics: list[tuple[str, Callable]] = []
    tuner = None
    for _ in range(16):  # (a wrapper chain, not a cycle)
        if type(kernel).__name__ == "TraceableTritonKernelWrapper":  # torch.library's
            kernel = kernel.kernel  # wrap_triton(k) (and capture_triton): k, as torch runs it
            continue
        kind = _triton_kind(kernel)
        if kind == "JITFunction":
            return kernel, heuristics, tuner
        if kind == "Autotuner":
            tuner = kernel
        elif kind == "Heuristics":
            heuristics = list(kernel.values.items()) + heuristics
        elif kind is None or not hasattr(kernel, "fn"):
            return None, [], None
        kernel = kernel.fn
    return None, [], None


def _triton_kind(obj: Any) -> str | None:
    """Which of Triton's launchable classes `obj` is an instance of (subclasses included:
    FlagGems' LibTuner is an Autotuner)."""
    names = [c.__name__ for c in type(obj).__mro__
             if (c.__module__ or "").startswith("triton.")]
    if "InterpretedFunction" in names:  # @triton.jit under TRITON_INTERPRET=1
        return "JITFunction"
    for kind in ("JITFunction", "Autotuner", "Heuristics", "KernelInterface"):
        if kind in names:
            return kind
    return None


@dataclass(frozen=True)
class Launched:
    """What `kernel[grid](...)` returns in a tile kernel, where Triton returns the compiled
    kernel (Unsloth logs `.name`, `.n_regs`, `.n_spills`, `.metadata`): the kernel's name;
    registers, spills and metadata are None, as the launch compiles nothing while tracing
    (the generated kernel compiles later, per config: `k.compile(...)` reports them)."""
    name: str
    n_regs: None = None
    n_spills: None = None
    metadata: None = None


def launch(kernel: Any, grid: Any, helper: Callable[[Any], Any], line: int) -> Any:
    """What `kernel[grid]` is in a tile kernel: a Triton launch's callable, else the subscript."""
    jit, heuristics, tuner = unwrap(kernel)
    if jit is None:
        return helper(kernel[grid])

    def call(*args: Any, **kwargs: Any) -> Launched:
        tr = current()
        where = Loc(tr.file, line)
        if tr.depth != "host":
            tr.fail(TraceError, f"{jit.fn.__name__}[grid](...) launches a Triton kernel, in "
                    "host code", loc=where, hint="call it before or after the tile loops")
        signature = inspect.signature(jit.fn)  # (a kernel may take `num_warps` itself: Liger's)
        kwargs = {k: v for k, v in kwargs.items()
                  if k in signature.parameters or k not in LAUNCH_OPTIONS}
        try:
            bound = signature.bind_partial(*args, **kwargs)
        except TypeError as e:
            tr.fail(TraceError, f"{jit.fn.__name__}[grid](...): {e}", loc=where)
        meta = dict(bound.arguments)
        if tuner is not None:
            meta = _configured(tuner, meta, set(kwargs), helper, jit.fn.__name__)
        bound = signature.bind_partial(**{k: v for k, v in meta.items()
                                          if k in signature.parameters})
        bound.apply_defaults()
        meta = {**meta, **bound.arguments}
        for name, rule in heuristics:  # (rewritten as helpers: their device queries)
            meta[name] = helper(rule)(meta)
        meta = {k: v for k, v in meta.items()  # a heuristic's `num_warps` (FlagGems' softmax)
                if k in signature.parameters or k not in LAUNCH_OPTIONS}
        sizes = helper(grid)(meta) if callable(grid) else grid
        sizes = tuple(sizes) if isinstance(sizes, (tuple, list)) else (sizes,)
        missing = [p for p in signature.parameters if p not in meta]
        if missing:
            tr.fail(TraceError, f"{jit.fn.__name__}[grid](...) gives no {', '.join(missing)}",
                    loc=where)
        body_fn = helper(jit)
        values = {k: (capture(v, k) if is_foreign_tensor(v, zero_d=True) else _runtime(v))
                  if not _constexpr(signature.parameters[k]) else _static(v)
                  for k, v in meta.items()}
        descriptors = [k for k, v in values.items() if tensor_descriptors.is_host(v)]
        addresses = {k: data_ptrs.launched(v, k) for k, v in values.items()
                     if data_ptrs.is_pointer_like(v)}  # (FlagGems' StridedBuffer)

        def body(item: Any, env: dict) -> dict:
            saved, tr.program_ids = tr.program_ids, list(item) if isinstance(item, tuple) \
                else [item]
            try:  # (a host TensorDescriptor as the kernel sees it, per program; an x.item()
                body_fn(**{**values,  # read by each program: host_scalars.py)
                           **{k: tensor_descriptors.from_host(values[k]) for k in descriptors},
                           **{k: pointer_at(*a) for k, a in addresses.items()},
                           **{k: v.load() for k, v in values.items()
                              if isinstance(v, HostScalar)}})
            finally:
                tr.program_ids = saved
            return {}

        loops.loop(grid_range(*sizes), body, {}, (), None, line)
        return Launched(jit.fn.__name__)
    return call


def _configured(tuner: Any, meta: dict, keywords: set[str], helper: Callable[[Any], Any],
                name: str) -> dict:
    """The launch's arguments under the config a knob chooses among the autotuner's, those
    its `early_config_prune` keeps for these arguments (given as Triton gives them: the
    positional ones by name, and the keywords); the config's `pre_hook` has run (the
    fused-attention tutorial's sets its descriptors' block shapes)."""
    configs = list(tuner.configs)
    prune = getattr(tuner, "early_config_prune", None)
    if prune is not None:
        named = {k: v for k, v in meta.items() if k not in keywords}
        configs = list(helper(prune)(configs, named,
                                     **{k: v for k, v in meta.items() if k in keywords}))
    if not configs:
        current().fail(TraceError, f"{name}'s early_config_prune kept no config")
    chosen = configs[register_tunable(f"{name}_config", Choice(tuple(range(len(configs)))))]
    tuner.best_config = chosen  # as Triton's autotuner records it (attorch's p-loss reads it),
    current().best_configs.append((tuner, chosen))  # and again on each run of the trace
    meta = {**chosen.kwargs, **meta}
    if getattr(chosen, "pre_hook", None) is not None:
        helper(chosen.pre_hook)(meta)
    return meta


def _constexpr(p: inspect.Parameter) -> bool:
    """Whether a kernel parameter is annotated `tl.constexpr` (as a class or a string)."""
    a = p.annotation
    return a is not inspect.Parameter.empty and "constexpr" in (
        a if isinstance(a, str) else getattr(a, "__name__", ""))


def _static(v: Any) -> Any:
    """A `tl.constexpr` argument: an int argument's value reaching it (FlagGems' group_norm,
    `BLOCK_GROUP_SIZE=triton.next_power_of_2(triton.cdiv(C, group))`) makes the kernel trace
    with that int, as Triton compiles one kernel per constexpr value."""
    if isinstance(v, TileValue) and v.shape == () and v.dtype.is_int:
        need_static(v)
    if isinstance(v, TileValue) and v.shape == () and v.dtype.is_bool:  # a test of them
        tr = current()  # (`group_size == K`; a heuristic's `args["smoothing"] > 0.0` of a
        check_static(v.value, tr.int_params | tr.float_params, truth=True)  # Python float)
    if isinstance(v, HostScalar):
        v.fail("as a tl.constexpr argument")
    return v


def _runtime(v: Any) -> Any:
    """A float given to a runtime parameter is Triton's float32 scalar in the body, not a
    Python number: `tl.maximum(fp16_tile, eps)` is float32 (Liger's KL divergence, whose
    eps=1e-10 a float16 max would make 0, then log(0) * 0 = NaN), and `offset.to(tl.float32)`
    works (Liger's); an int divides as Triton's int32 scalars do (runtime_ints.py); other values
    pass as they are."""
    if type(v) is float or isinstance(v, TileValue) and v.weak and v.shape == () and \
            v.dtype.is_float:
        return cast(to_value(v), dtypes.float32)
    return runtime(v)


loops.launch = launch  # the rewrite's `k[grid](...)` (frontend/rewrite.py)
