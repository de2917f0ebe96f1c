"""A kernel's argument specs: the signature a trace is cached under, one entry per argument.

An entry is ("tensor", shape, dtype short) (and the strides of an array that is not row-major:
its trace is for that layout, `layout`), ("scalar", dtype short, weak), ("const", Static: a
compile-time value), ("closure", Static, captured array specs: a function capturing arrays),
("list", "list" | "tuple", element specs): see static_args.py, or ("alias", i): the array
argument i again (`same_array`: Liger's in-place backward passes one gradient as both dY and
dX), traced as that one tensor, so the race check sees a program read and write it in place.
`flat` turns the call's values into the IR's arguments (lists spliced in, compile-time values
and aliases left out); `flat_names` names them as errors do.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from tiledsl import dtypes
from tiledsl.frontend import static_args, valued_args
from tiledsl.errors import ArgumentError
from tiledsl.frontend.subclasses import plain_arrays
from tiledsl.frontend.values import weak_dtype
from tiledsl.ir.views import row_major

ArgSpec = tuple
NUMPY_DTYPES = dtypes._FROM_NUMPY


class ArgSpecs:
    """How kernel `name` (with `signature`) reads its arguments; `static` holds the names of its
    compile-time parameters (annotated td.constexpr, or ints its body needs static)."""

    def __init__(self, name: str, signature: inspect.Signature) -> None:
        self.name = name
        self.signature = signature
        self.arity = len(signature.parameters)
        self.annotated = frozenset(static_args.signature_constexprs(signature))
        self.static: set[str] = set(self.annotated)  # and the ints the body needs static
        self.memory: set[str] = set()  # 0-d array parameters the body writes (MemoryNeeded)
        self.valued: set[str] = set()  # array parameters whose values host code reads
        # (frontend/valued_args.py): keyed by their contents

    def bind(self, args: tuple, kwargs: dict) -> list[Any]:
        """Positional argument values in the order of the kernel's parameters."""
        if not kwargs and len(args) == self.arity:
            return plain_arrays(self.name, self.signature.parameters, list(args))
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            params = ", ".join(self.signature.parameters)
            raise ArgumentError(f"{e} (parameters: {params})", kernel=self.name) from None
        bound.apply_defaults()
        return plain_arrays(self.name, self.signature.parameters, list(bound.arguments.values()))

    def all_of(self, values: list[Any]) -> tuple[ArgSpec, ...]:
        """The spec of each argument, with the compile-time parameters known so far."""
        specs = [self.of(n, v) for n, v in zip(self.signature.parameters, values)]
        tensors = [i for i, s in enumerate(specs) if s[0] == "tensor"]
        for k, j in enumerate(tensors):
            first = next((i for i in tensors[:k] if same_array(values[i], values[j])), None)
            if first is not None:
                specs[j] = ("alias", first)
        return tuple(specs)

    def of(self, name: str, v: Any) -> ArgSpec:
        if name in self.valued and valued_args.may_be_valued(v):  # its values: compile-time
            payload = self._valued(name, v)
            return ("const", static_args.Static(payload, payload.key, payload.text))
        if type(v) is np.ndarray and v.ndim and name not in self.static:  # the common case
            d = NUMPY_DTYPES.get(v.dtype)
            if d is not None:
                return _tensor(v.shape, d.short, v)
        special = self._special(name, v)
        if special is not None:
            return special
        if isinstance(v, (bool, int, float)):
            # A Python int argument is an int64 whatever its value (k * 3 must not wrap at 2**31).
            d = dtypes.int64 if isinstance(v, int) and not isinstance(v, bool) else weak_dtype(v)
            if d == dtypes.int64 and not -2**63 <= v < 2**63:
                raise ArgumentError(f"argument '{name}' is {v}, out of the range of int64 (a "
                                    "Python int argument is an int64)", kernel=self.name)
            return ("scalar", d.short, True)
        if name in self.memory and getattr(v, "ndim", 0) == 0:
            return self._zero_d_memory(name, v)
        if isinstance(v, np.generic) or (isinstance(v, np.ndarray) and v.ndim == 0):
            d = dtypes.from_any(v.dtype)
            if d is None:
                raise ArgumentError(f"argument '{name}' has unsupported dtype {v.dtype}",
                                    kernel=self.name)
            return ("scalar", d.short, False)
        if isinstance(v, np.ndarray) and v.ndim > 0:
            d = NUMPY_DTYPES.get(v.dtype)
            if d is not None:
                return _tensor(v.shape, d.short, v)
        if isinstance(v, np.ndarray) or is_gpu_array(v):
            d = dtypes.from_any(str(v.dtype).rsplit(".", 1)[-1])
            if d is None:
                supported = ", ".join(x.name for x in dtypes.ALL)
                raise ArgumentError(f"argument '{name}' has unsupported dtype {v.dtype} "
                                    f"(supported: {supported})", kernel=self.name)
            if not v.shape:  # a 0-d device tensor, torch's scalar parameter: its value
                return ("scalar", d.short, False)
            return _tensor(tuple(int(s) for s in v.shape), d.short, v)
        raise ArgumentError(f"argument '{name}' is a {type(v).__module__}.{type(v).__qualname__}; "
                            "pass a NumPy array or a number", kernel=self.name,
                            hint="k(*args) takes torch, JAX and CuPy arrays as they are; "
                                 "k.run(..., backend=) takes NumPy arrays on the CPU "
                                 "(np.from_dlpack(t)) and GPU arrays on 'triton'"
                            if hasattr(v, "__dlpack__") else None)

    def _valued(self, name: str, v: Any) -> valued_args.Valued:
        """The contents of valued argument `v` (a NumPy, CuPy or torch array), on the host."""
        gpu = is_gpu_array(v)
        try:
            host = v.get() if gpu and hasattr(v, "get") else v.detach().cpu().numpy() \
                if type(v).__module__.startswith("torch") else np.asarray(v)
        except Exception as e:  # (a FakeTensor under torch.compile has no values to read)
            raise ArgumentError(f"the host code reads the values of argument '{name}' (a size "
                                f"or a test made from them), which this call cannot give ({e})",
                                kernel=self.name, hint="call the kernel eagerly, or pass what "
                                "the host code computes from them as arguments") from None
        device = None if not gpu else int(getattr(v.device, "index", None) or
                                            getattr(v.device, "id", 0) or 0)
        return valued_args.Valued(np.ascontiguousarray(host), device)

    def _zero_d_memory(self, name: str, v: Any) -> ArgSpec:
        """The spec of a parameter the body writes that was given as a 0-d array: a tensor of
        shape () (FlagGems' `sum(x, out=torch.empty(()))`)."""
        if (isinstance(v, np.ndarray) or is_gpu_array(v)) and not v.shape:
            d = dtypes.from_any(str(v.dtype).rsplit(".", 1)[-1])
            if d is not None:
                return _tensor((), d.short, v)
        raise ArgumentError(f"argument '{name}' is written by the kernel (a store into it) but is "
                            f"a {type(v).__module__}.{type(v).__qualname__}", kernel=self.name,
                            hint="pass an array, e.g. np.zeros((), np.float32) or "
                                 "torch.empty(())")

    def _special(self, name: str, v: Any) -> ArgSpec | None:
        """The spec of a compile-time argument or a list of arrays; None for any other."""
        if name in self.static and isinstance(v, (int, float, np.number)) or \
                static_args.is_constant(v):
            if isinstance(v, np.number):
                v = v.item()
            captured = static_args.captured_arrays(v)
            if captured:  # arrays a function captures become tensor arguments
                return ("closure", static_args.static(v), tuple(
                    (i, var, self._captured(f"{name}.{var}", a)) for i, var, a in captured))
            return ("const", static_args.static(v))
        if name in self.annotated:  # (one made static by an int's use may take an array:
            # flash-attn's `seqlen_offsets: Union[int, Tensor]`)
            raise ArgumentError(f"argument '{name}' is compile-time (td.constexpr) but is a "
                                f"{type(v).__module__}.{type(v).__qualname__}",
                                kernel=self.name, hint="pass a Python value, not an array")
        if not isinstance(v, (list, tuple)):
            return None
        elems = []
        for i, x in enumerate(v):
            s = self.of(f"{name}[{i}]", x) \
                if isinstance(x, np.ndarray) or is_gpu_array(x) else None
            if s is None or s[0] != "tensor":
                raise ArgumentError(
                    f"argument '{name}' is a {type(v).__name__} holding a "
                    f"{type(x).__module__}.{type(x).__qualname__} at index {i}; a list or tuple "
                    "argument holds arrays only (a list of tensors), or compile-time values "
                    "only (bool, str, None, callables, numbers)", kernel=self.name)
            elems.append(s)
        return ("list", type(v).__name__, tuple(elems))

    def _captured(self, what: str, a: Any) -> ArgSpec:
        s = self.of(what, a) if isinstance(a, np.ndarray) or is_gpu_array(a) else None
        if s is None or s[0] != "tensor":
            raise ArgumentError(f"'{what}' is a {type(a).__module__}.{type(a).__qualname__} a "
                                "function argument captures; a captured array must be a NumPy "
                                "array (or a GPU array on the GPU) with at least one dimension",
                                kernel=self.name, hint="pass it as an argument of the kernel")
        return s

    def flat(self, spec: tuple[ArgSpec, ...], values: list[Any]) -> list[Any]:
        """The values of the IR's arguments (`fn.args`): runtime arguments, with each list of
        arrays spliced in, compile-time ones left out. What the backends receive."""
        out: list[Any] = []
        for s, v in zip(spec, values):
            if s[0] == "list":
                out.extend(v)
            elif s[0] == "closure":
                out += [a for _, _, a in static_args.captured_arrays(v)]
            elif s[0] not in ("const", "alias"):
                out.append(v)
        return out

    def flat_names(self, spec: tuple[ArgSpec, ...]) -> list[str]:
        """The names of the IR's arguments as errors name them (`a[0]` for a list's first)."""
        out: list[str] = []
        for name, s in zip(self.signature.parameters, spec):
            if s[0] == "list":
                out += [f"{name}[{i}]" for i in range(len(s[2]))]
            elif s[0] == "closure":
                out += [f"{name}.{var}" for _, var, _ in s[2]]
            elif s[0] not in ("const", "alias"):
                out.append(name)
        return out


def same_array(a: Any, b: Any) -> bool:
    """Whether two arguments are one array: the same object, or NumPy arrays of the same
    memory, shape, strides and dtype (torch's CPU tensors reach the NumPy backend as fresh
    DLPack views)."""
    if a is b:
        return True
    return type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape and \
        a.strides == b.strides and a.dtype == b.dtype and np.may_share_memory(a, b) and \
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]  # (on every
    # call: the cheap tests first; the address only of arrays that may share memory)


def _tensor(shape: tuple[int, ...], dtype: str, v: Any) -> ArgSpec:
    """A tensor's spec: with its strides where it is not row-major (the trace is for its
    layout)."""
    strides = layout(v)
    return ("tensor", shape, dtype) if strides is None else ("tensor", shape, dtype, strides)


def layout(v: Any) -> tuple[int, ...] | None:
    """The strides (elements) of array `v` where it is not row-major: what `x.stride()` answers
    and pointer arithmetic on `x` addresses (Triton's `x_ptr + row * x.stride(0)`). None where it
    is row-major, or laid out as no kernel can address it (NumPy's negative strides of `x[::-1]`,
    strides that are no whole number of elements): those are checked where the kernel runs."""
    if type(v).__module__.startswith("torch"):
        if v.is_contiguous():
            return None
        strides = tuple(int(s) for s in v.stride())
        return strides if min(strides) >= 0 else None
    if isinstance(v, np.ndarray) and v.flags.c_contiguous:  # (the common case, at once)
        return None
    raw = getattr(v, "strides", None)  # bytes: NumPy's and CuPy's (None: row-major)
    size = np.dtype(v.dtype).itemsize
    if raw is None or any(s < 0 or s % size for s in raw):
        return None
    strides = tuple(s // size for s in raw)
    shape = tuple(int(n) for n in v.shape)
    if all(n == 1 or s == r for n, s, r in zip(shape, strides, row_major(shape))):
        return None
    return strides


def is_gpu_array(v: Any) -> bool:
    """A CuPy array or a torch CUDA tensor (anything exposing __cuda_array_interface__)."""
    if type(v).__module__.startswith("torch"):  # which refuses the interface of a tensor
        return bool(getattr(v, "is_cuda", False))  # that requires grad
    try:
        return hasattr(v, "__cuda_array_interface__")
    except Exception:  # torch raises for CPU tensors when asked for the interface
        return False
