"""The launch plan of an ahead-of-time package: what the generated `launch()` does, as data.

`tiledsl.interop.export` writes the plan into a package's manifest.json, and `tiledsl.interop.aot` follows it
with CuPy, launching the cubins with no Triton at all. The plan mirrors `codegen._launcher` step
by step: the allocations of the kernel body in program order, then each generated kernel with its
parameters in the order the cubin takes them. tests/interop/test_export.py executes plans under Triton's
interpreter and compares with float64 references, which is what keeps the two in step.

Two things the Python launcher never shows have to be spelled out here:
- block sizes are constexprs, compiled into the cubin; they are no cubin parameters (they are
  recorded per launch as documentation, and for running the plan under the interpreter);
- Triton appends hidden pointer parameters to every kernel (global scratch, and profile scratch
  in newer versions) that its own launcher fills. We count the PTX `.entry` parameters, pass null
  for the extras, and refuse kernels that need scratch memory for them to point at.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from lowering.backends.triton.codegen import GeneratedKernel, KernelParam, generate_cached
from lowering.backends.triton.compile import Compiled, compile_module
from lowering.backends.triton.space import SHARED_BYTES
from lowering.backends.triton.targets import array_strides
from tiledsl.runtime.config import Config
from tiledsl.errors import BackendError
from tiledsl.ir.core import Function, Op, Value
from tiledsl.ir.ops import ALLOCATIONS
from tiledsl.ir.types import TensorType, TileType

POINTER_ALIGN = 16  # bytes: compile.signature() tells Triton every pointer is this aligned
# Triton signature types of scalars passed by value -> the dtype the cubin reads them as
SCALAR_DTYPE = {"fp32": "float32", "i32": "int32", "i64": "int64", "i1": "bool"}


def export_plan(fn: Function, config: Config, args: list[Any], arch: str) -> dict[str, Any]:
    """The manifest's argument, buffer, output and launch sections for `fn` under `config`
    compiled for `arch`, plus the files a package needs: {"manifest": {...}, "files": {package
    file name: path of the compiled file to copy}, "texts": {package file name: text}}."""
    arg_names = dict(zip(fn.args, fn.arg_names))
    names = _Names(arg_names.values())
    buffers, buffer_of = _allocations(fn, names)
    outputs = [_output(v, arg_names, buffer_of) for v in fn.outputs]
    strides = array_strides(fn, args)
    module = generate_cached(fn, config, strides)
    compiled = compile_module(module, arch)
    launches, files = [], {}
    for k, c in zip(module.kernels, compiled):
        launch, scalar_buffers = _launch(k, c, arg_names, buffer_of, names, arch, strides)
        buffers += scalar_buffers
        launches.append(launch)
        files[launch["ptx"]] = c.ptx_path
        files[launch["cubin"]] = c.cubin_path
    manifest = {
        "triton_version": compiled[0].triton_version if compiled else None,
        "arguments": [_argument(a, arg_names[a], strides) for a in fn.args],
        "buffers": buffers,
        "outputs": outputs,
        "launches": launches,
    }
    return {"manifest": manifest, "files": files, "texts": {"kernel_triton.py": module.source}}


class _Names:
    """Unique names for buffers, distinct from the argument names (one namespace reads best)."""

    def __init__(self, reserved: Iterable[str]) -> None:
        self.used = set(reserved)

    def fresh(self, hint: str) -> str:
        name, i = hint, 1
        while name in self.used:
            name, i = f"{hint}_{i}", i + 1
        self.used.add(name)
        return name


def _argument(v: Value, name: str, strides: dict[Value, tuple[int, ...]]) -> dict[str, Any]:
    """One kernel parameter as the caller passes it. Shapes, strides and dtypes are literals in
    the generated code, so a package only takes exactly these."""
    t = v.type
    if isinstance(t, TensorType):
        return {"name": name, "kind": "tensor", "shape": list(t.shape), "dtype": t.dtype.name,
                "strides": list(strides[v]), "align": POINTER_ALIGN}
    assert isinstance(t, TileType)
    return {"name": name, "kind": "scalar", "dtype": t.dtype.name}


def _output(v: Value, arg_names: dict[Value, str], buffer_of: dict[Value, str]) -> dict[str, Any]:
    """A returned tensor: an allocated buffer, or an argument the kernel wrote in place."""
    t = v.type
    assert isinstance(t, TensorType)
    out: dict[str, Any] = {"shape": list(t.shape), "dtype": t.dtype.name}
    if v in arg_names:
        return {"arg": arg_names[v], "index": list(arg_names).index(v), **out}
    if v not in buffer_of:  # a view (`return out.T`, `out[:-1]`): a package returns whole ones
        op = v.owner
        what = op.name if op is not None else "an argument's view"
        raise BackendError(f"export: the kernel returns a view ({what}), which a package "
                           "cannot return", loc=op.loc if op is not None else None,
                           hint="return the tensor itself and view it after the call")
    return {"buffer": buffer_of[v], **out}


def _fill_value(x: Any) -> Any:
    """A fill constant as JSON: numbers as numbers, and inf/nan (which JSON lacks) as strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _allocations(fn: Function, names: _Names) -> tuple[list[dict[str, Any]], dict[Value, str]]:
    """The tensors the body allocates (`td.empty`, `td.full`, torch.rand...), as `_launcher`
    allocates them."""
    buffers: list[dict[str, Any]] = []
    buffer_of: dict[Value, str] = {}
    for op in fn.body.ops:
        if op.name not in ALLOCATIONS:
            continue
        t = op.result.type
        assert isinstance(t, TensorType)
        name = buffer_of[op.result] = names.fresh(op.result.hint or "out")
        entry: dict[str, Any] = {"name": name, "shape": list(t.shape), "dtype": t.dtype.name,
                                 "init": "empty"}
        if op.name == "tensor.full":
            entry.update(init="full", value=_fill_value(_constant(op)))
        elif op.name == "tensor.random":  # drawn by the loader on each call (CuPy's generator)
            entry.update(init=op.attrs["kind"], **{k: op.attrs[k] for k in ("low", "high")
                                                    if k in op.attrs})
        buffers.append(entry)
    return buffers, buffer_of


def _constant(op: Op) -> Any:
    src = op.operands[0]
    if src.owner is None or src.owner.name != "const":  # a manifest holds values, not code
        raise BackendError("an exported package fills tensors only with constants (td.full "
                           "of a scalar argument runs through Triton, not an export)", loc=op.loc)
    return src.owner.attrs["value"]


def _launch(k: GeneratedKernel, c: Compiled, arg_names: dict[Value, str],
            buffer_of: dict[Value, str], names: _Names, arch: str,
            strides: dict[Value, tuple[int, ...]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One kernel launch: its cubin, grid, block, shared memory and parameters in cubin order;
    also the 1-element buffers it reads scalar arguments from."""
    _check_launchable(k, c, arch)
    params: list[dict[str, Any]] = []
    constexprs: dict[str, int] = {}
    scalar_buffers: list[dict[str, Any]] = []
    index = {v: i for i, v in enumerate(arg_names)}
    for p in k.params:
        if p.kind == "block":
            assert p.value is not None
            constexprs[p.name] = p.value
        elif p.kind == "scalar_ptr":  # the launcher's full((1,), value, dtype), per launch
            src = _source(p)
            assert isinstance(src.type, TileType)
            name = names.fresh(f"{arg_names[src]}_scalar")
            scalar_buffers.append({"name": name, "shape": [1], "dtype": src.type.dtype.name,
                                   "init": "arg", "arg": arg_names[src]})
            params.append({"kind": "buffer", "name": p.name, "buffer": name,
                           "dtype": src.type.dtype.name, "extent": 1})
        else:
            params.append(_param(p, arg_names, index, buffer_of, k, strides))
    hidden = c.param_count - len(params)
    if hidden < 0:
        raise BackendError(f"{c.kernel}: the PTX entry takes {c.param_count} parameters, fewer "
                           f"than the {len(params)} of the Python signature (internal error)")
    params += [{"kind": "null_pointer", "name": f"hidden_{i}"} for i in range(hidden)]
    launch = {
        "kernel": c.kernel, "ptx": f"{c.kernel}.ptx", "cubin": f"{c.kernel}.cubin",
        "grid": {"programs": k.programs, "persistent": k.persistent},
        "threads": 32 * c.num_warps, "num_warps": c.num_warps, "num_stages": c.num_stages,
        "shared_bytes": c.shared_bytes, "static_shared_bytes": c.static_shared_bytes,
        "registers": c.registers, "spill_bytes": c.spill_bytes,
        "params": params, "constexprs": constexprs,
    }
    if c.spill_bytes > 0:
        launch["warning"] = c.problem
    return launch, scalar_buffers


def _param(p: KernelParam, arg_names: dict[Value, str], index: dict[Value, int],
           buffer_of: dict[Value, str], k: GeneratedKernel,
           strides: dict[Value, tuple[int, ...]]) -> dict[str, Any]:
    """A cubin parameter for a tensor pointer, a scalar by value, a row stride or the
    persistent grid size."""
    if p.kind == "num_programs":  # the launcher passes min(programs, num_sms)
        return {"kind": "num_programs", "name": p.name, "programs": k.programs}
    if p.kind == "stride":  # a loop's row stride or a split loop's extent (loops.py)
        return {"kind": "stride", "name": p.name, "value": p.value, "dtype": "int32"}
    if p.kind == "scalar":
        src = _source(p)
        return {"kind": "scalar", "name": p.name, "arg": arg_names[src], "index": index[src],
                "dtype": SCALAR_DTYPE[p.dtype]}
    if p.kind == "tensor":  # with what the cubin was compiled to address through it
        src = _source(p)
        t = src.type
        assert isinstance(t, TensorType)
        pointee = {"dtype": t.dtype.name, "extent": span(t.shape, strides.get(src))}
        if src in index:
            return {"kind": "arg", "name": p.name, "arg": arg_names[src], "index": index[src],
                    **pointee}
        return {"kind": "buffer", "name": p.name, "buffer": buffer_of[src], **pointee}
    raise BackendError(f"{k.name}: parameter {p.name} is a {p.kind!r}, which a cubin launched "
                       "without Triton cannot take (TMA descriptors are built by Triton's "
                       "launcher; export with tma=False)")


def span(shape: Iterable[int], strides: Iterable[int] | None) -> int:
    """Elements from the lowest to the highest one a tensor of this layout addresses."""
    shape = list(shape)
    if strides is None:  # an allocation: contiguous
        return math.prod(shape)
    return 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides))


def _source(p: KernelParam) -> Value:
    assert p.source is not None
    return p.source


def _check_launchable(k: GeneratedKernel, c: Compiled, arch: str) -> None:
    """Refuse what a plain cuLaunchKernel of the cubin cannot provide."""
    if c.global_scratch_bytes > 0 or c.profile_scratch_bytes > 0:
        raise BackendError(
            f"{c.kernel} needs {c.global_scratch_bytes} bytes of global scratch memory (and "
            f"{c.profile_scratch_bytes} of profile scratch) per program, which only Triton's "
            "launcher allocates; an exported package cannot run it. Try another config "
            "(e.g. without tma or persistent)")
    limit = SHARED_BYTES.get(arch, SHARED_BYTES["sm_80"])
    if c.shared_bytes + c.static_shared_bytes > limit:
        raise BackendError(f"{c.kernel} needs {c.shared_bytes + c.static_shared_bytes} bytes of "
                           f"shared memory, {arch} has {limit}: it could not launch; export a "
                           "config with smaller blocks or fewer stages")

