"""`backend="triton-interpret"`: the generated Triton module run by Triton's interpreter on the CPU.

NumPy arguments become torch CPU tensors without copies (the interpreter needs torch), so kernels
that write into their arguments write into the caller's arrays. This is how CI checks the code
generator on machines without a GPU.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any, Iterator

import ml_dtypes
import numpy as np

from lowering.backends.numpy import check_written, memory
from lowering.backends.triton import interpret_asm, interpret_libdevice, space as triton_space
from lowering.backends.triton.codegen import generate_cached
from lowering.backends.triton.loader import load
from tiledsl import dtypes
from tiledsl.lang import fp8
from tiledsl.runtime import registry
from tiledsl.runtime.config import Config, ConfigSpace
from tiledsl.errors import BackendError
from tiledsl.ir import views
from tiledsl.ir.core import Function, Value
from tiledsl.ir.types import TensorType


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise BackendError("backend 'triton-interpret' needs torch (the Triton interpreter runs "
                           "on torch CPU tensors): pip install torch==2.13.0") from None
    return torch


def viewable(a: np.ndarray) -> bool:
    """Whether torch can view `a` without a copy (torch refuses read-only arrays and negative
    strides: `x[::-1]`)."""
    return a.flags.writeable and all(s >= 0 for s in a.strides)


def to_torch(a: np.ndarray) -> Any:
    """A torch view of `a` (a copy only when torch cannot view it: see `viewable`)."""
    torch = _torch()
    if not viewable(a):
        a = a.copy()
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if a.dtype == fp8.E8M0:  # (Triton takes its bits: tiledsl/lang/fp8.py)
        return torch.from_numpy(a.view(np.uint8))
    if fp8.is_fp8(a.dtype):
        return torch.from_numpy(a.view(np.uint8)).view(getattr(torch, a.dtype.name))
    return torch.from_numpy(a)


def to_numpy(t: Any) -> np.ndarray:
    torch = _torch()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return t.view(torch.uint8).numpy().view(getattr(ml_dtypes, str(t.dtype)[6:]))
    return t.numpy()


def as_ir(a: np.ndarray, v: Value) -> np.ndarray:
    """`a` (a kernel's tensor back from torch) as IR value `v`'s dtype: float8_e8m0fnu's bits
    come back as uint8 (see `to_torch`)."""
    dtype = getattr(v.type, "dtype", None)
    return a.view(fp8.E8M0) if dtype is not None and dtype.short == "f8e8m0" and \
        a.dtype == np.uint8 else a


def _empty(shape: Any, dtype: str) -> Any:
    """An output as the NumPy backend allocates it (so that check_written finds what no store
    wrote), as a torch tensor."""
    d = dtypes.from_any(dtype)
    assert d is not None, dtype
    return to_torch(memory.empty(tuple(shape), d.np))


def _torch_dtype(name: str) -> Any:
    torch = _torch()
    return {"bool": torch.bool}.get(name) or getattr(torch, name)


def scalar(v: Any) -> Any:
    """Python numbers as Triton expects them (it refuses NumPy scalars; a 0-d array or tensor,
    torch's scalar argument, passes its value: on a GPU, `.item()` waits for it)."""
    if getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
        v = v.item()
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    return float(v)


def strides_of(fn: Function, tensors: list[Any]) -> dict[Value, tuple[int, ...]]:
    return {a: tuple(int(s) for s in t.stride()) for a, t in zip(fn.args, tensors)
            if isinstance(a.type, TensorType)}


def _language_objects() -> list[Any]:
    """The modules and classes of triton.language that the interpreter patches."""
    import triton.language as tl
    from triton.language.extra import libdevice
    mods = [tl, tl.core, tl.math, tl.standard, libdevice]
    classes = [tl.tensor, tl.dtype, tl.core.condition, tl.core.tensor_descriptor_base]
    return mods + classes


def _int1(compare: Any) -> Any:
    """The interpreter's comparison `compare`, its result typed int1 as Triton types it: the
    interpreter (3.6 and 3.9) typed it as its operands, so a scalar comparison broadcast into a
    mask (`tile_mask & (batch_id < n)`) held int32 data ('mask has unsupported dtype')."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def int1(self: Any, lhs: Any, rhs: Any) -> Any:
        out = compare(self, lhs, rhs)
        return TensorHandle(np.asarray(out.data).astype(bool), tl.int1)
    return int1


def _restore(snapshot: list[tuple[Any, dict]]) -> None:
    """Put back every attribute the interpreter replaced (names it added stay: its cached,
    rewritten functions refer to them, and compiled code never does)."""
    for obj, before in snapshot:
        now = vars(obj)
        for name, value in before.items():
            if now.get(name) is not value:
                setattr(obj, name, value)


def _cast_to_nearest(cast_impl: Any) -> Any:
    """The interpreter's `cast_impl`, but rounding float32 to bfloat16 to nearest even, as a
    GPU (cvt.rn.bf16.f32), ml_dtypes and the NumPy backend do: the interpreter truncates
    (triton 3.6 to 3.9), even under `fp_downcast_rounding="rtne"`, which reaches this cast."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def cast(self: Any, src: Any, dst_type: Any) -> Any:
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            data = src.data.astype(ml_dtypes.bfloat16).view(np.uint16)  # bfloat16 as uint16
            return TensorHandle(data, dst_type.scalar)
        return cast_impl(self, src, dst_type)
    return cast


def _all_ones(get_all_ones_value: Any) -> Any:
    """The interpreter's all-ones value (what `~x` xors with), as triton 3.9 makes it for
    unsigned ints: triton 3.6 fills -1 into an unsigned array, which NumPy 2 refuses."""
    from triton.runtime import interpreter
    from triton.runtime.interpreter import TensorHandle

    def get(self: Any, type: Any) -> Any:
        np_type = interpreter._get_np_dtype(type)
        if np.issubdtype(np_type, np.unsignedinteger):
            return TensorHandle(np.full(1, np.iinfo(np_type).max, dtype=np_type), type.scalar)
        return get_all_ones_value(self, type)
    return get


def _fp8_as_gpu(convert_float: Any) -> Any:
    """The interpreter's float conversion, but for float8e4nv and float8e5 (held as uint8) the
    GPU's: round to nearest even, saturate (tiledsl/lang/fp8.py). The interpreter's own neither
    saturates nor carries a rounding into the exponent (triton 3.6 to 3.9); casts, constants
    and tl.dot's operands all convert through it."""
    import triton.language as tl
    numpy_of = {tl.float8e4nv: np.dtype(ml_dtypes.float8_e4m3fn),
                tl.float8e5: np.dtype(ml_dtypes.float8_e5m2), tl.float16: np.dtype(np.float16),
                tl.bfloat16: np.dtype(ml_dtypes.bfloat16), tl.float32: np.dtype(np.float32),
                tl.float64: np.dtype(np.float64)}

    def convert(data: Any, src: Any, dst: Any, rounding: Any) -> Any:
        if not ({src, dst} & {tl.float8e4nv, tl.float8e5}) or src not in numpy_of \
                or dst not in numpy_of:
            return convert_float(data, src, dst, rounding)
        held = np.asarray(data).view(numpy_of[src])  # fp8 and bfloat16 arrive as bits
        out = fp8.convert(held, numpy_of[dst])
        return out.view(getattr(np, f"uint{dst.primitive_bitwidth}")) \
            if dst.primitive_bitwidth < 32 else out
    return convert


@contextmanager
def interpreted_stdlib() -> Iterator[None]:
    """Let interpreted kernels call Triton's own `@jit` library (tl.sum, tl.max, tl.sigmoid...),
    and leave triton.language as it was afterwards.

    Those are compiled-mode functions unless TRITON_INTERPRET was set before triton.language was
    first imported; a process that also compiles for GPUs cannot set it, so while an interpreted
    kernel runs, calls to compiled-mode functions go through the interpreter instead. The
    interpreter patches triton.language for nested calls without undoing it (triton 3.9), which
    would break later GPU compiles in the same process: everything it changes is restored.
    Meanwhile its float32 -> bfloat16 conversion rounds to nearest even (`_cast_to_nearest`),
    triton 3.6's gets the `get_bf16` it lacks for bfloat16 constants (`tl.where(m, x,
    float("inf"))` on a bfloat16 x), as triton 3.9 defines it, comparisons are typed int1
    (`_int1`), int arguments typed int64 are
    held as int64, `~` of an unsigned int works on triton 3.6 too (`_all_ones`), and
    libdevice's functions are NumPy's (interpret_libdevice.py), and inline assembly runs as the
    NumPy backend runs it (interpret_asm.py)."""
    import triton.language as tl
    from triton.runtime import interpreter
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    snapshot = [(obj, dict(vars(obj))) for obj in _language_objects()]
    original = JITFunction.__call__
    patch_tensor = interpreter._patch_lang_tensor

    def patch_tensor_index(tensor: Any, scope: Any) -> None:
        # triton 3.6 indexes with int(data) on a 1-element array, which NumPy >= 2.4 refuses
        # (`tl.range(tl.program_id(0), ...)` in persistent kernels); triton 3.9 squeezes first.
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))
    interpreted: dict[Any, Any] = {}

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.fn not in interpreted:
            interpreted[self.fn] = InterpretedFunction(self.fn)
        return interpreted[self.fn](*args, **kwargs)

    implicit_cvt = interpreter._implicit_cvt

    def int64_args(arg: Any) -> Any:
        # An int in [2**31, 2**32) is typed int64 but held as a uint32 array (triton 3.6 and
        # 3.9), so arithmetic on it wrapped at 32 bits: hold it as the int64 it is typed as.
        out = implicit_cvt(arg)
        if isinstance(arg, int) and getattr(out, "dtype", None) == tl.int64:
            out.handle.data = out.handle.data.astype(np.int64)
        return out

    builder = interpreter.InterpreterBuilder
    cast_impl = builder.cast_impl
    JITFunction.__call__ = call  # type: ignore[method-assign]
    interpreter._patch_lang_tensor = patch_tensor_index
    interpreter._implicit_cvt = int64_args
    builder.cast_impl = _cast_to_nearest(cast_impl)
    all_ones = builder.get_all_ones_value
    builder.get_all_ones_value = _all_ones(all_ones)
    interpret_libdevice.install()
    inline_asm = builder.create_inline_asm
    builder.create_inline_asm = interpret_asm.create_inline_asm
    convert_float = interpreter._convert_float
    interpreter._convert_float = _fp8_as_gpu(convert_float)
    add_bf16 = not hasattr(builder, "get_bf16")
    if add_bf16:
        builder.get_bf16 = lambda self, v: self.create_fp_trunc(self.get_fp32(v), tl.bfloat16)
    compares = {n: vars(builder)[n] for n in vars(builder)
                if n.startswith(("create_icmp", "create_fcmp"))}
    for name, compare in compares.items():
        setattr(builder, name, _int1(compare))
    try:
        yield
    finally:
        for name, compare in compares.items():
            setattr(builder, name, compare)
        JITFunction.__call__ = original  # type: ignore[method-assign]
        interpreter._patch_lang_tensor = patch_tensor
        interpreter._implicit_cvt = implicit_cvt
        builder.cast_impl = cast_impl
        builder.get_all_ones_value = all_ones
        builder.create_inline_asm = inline_asm
        interpreter._convert_float = convert_float
        if add_bf16:
            del builder.get_bf16
        _restore(snapshot)


def write_back(fn: Function, args: list[Any], tensors: list[Any]) -> None:
    """Copy into the caller's arrays what the kernel wrote into the copies `to_torch` made of
    them (a written argument with negative strides): the write must not be lost. The copy is
    exact, as no other argument shares the written one's memory (arrays.check_overlap)."""
    written = views.written(fn)
    for v, a, t in zip(fn.args, args, tensors):
        if v in written and isinstance(a, np.ndarray) and not viewable(a):
            a[...] = as_ir(to_numpy(t), v)


# Persistent kernels launch this many programs in the interpreter, so each walks several tiles.
INTERPRETER_SMS = 3


class TritonInterpretBackend:
    name = "triton-interpret"

    def extend_space(self, space: ConfigSpace, fn: Function, **_: Any) -> ConfigSpace:
        return triton_space.extend(space, fn)

    def lower(self, fn: Function) -> Function:
        """What the GPU runs: the Triton backend's passes on a copy of `fn`."""
        from lowering.pipeline import lower_for_triton
        return lower_for_triton(fn)

    def run(self, fn: Function, args: list[Any], config: Config, **_: Any) -> list[Any]:
        torch = _torch()
        targs = [to_torch(a) if isinstance(v.type, TensorType) else scalar(a)
                 for v, a in zip(fn.args, args)]
        module = load(generate_cached(fn, config, strides_of(fn, targs), interpret=True).source, interpret=True)
        # NumPy runs the kernel here: its warnings about NaN, inf and the poisoned lanes of
        # masked loads are not the user's (a GPU says nothing; the NumPy backend is silent too).
        with interpreted_stdlib(), np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            outs = module.launch(
                *targs,
                empty=_empty,
                full=lambda shape, value, dtype: torch.full(shape, value, dtype=_torch_dtype(dtype)),
                num_sms=INTERPRETER_SMS)
        write_back(fn, args, targs)
        by_tensor = {id(t): a for t, a in zip(targs, args)}
        results = fn.outputs
        return check_written(fn, config, [by_tensor.get(id(o)) if id(o) in by_tensor
                                          else as_ir(to_numpy(o), r) for o, r in zip(outs, results)])


registry.register_backend(TritonInterpretBackend())
