"""Compile-time arguments and lists of tensors: kernel arguments that are not one array or one
number.

* A compile-time argument (a `bool`, `str`, `None`, a function or other callable, a NumPy or
  tiledsl dtype, a tuple or list of those and of numbers, or any value wrapped in
  `td.constexpr(...)` or passed to a parameter annotated `td.constexpr`) reaches the kernel
  body as the Python value itself: `if causal:` and `epilogue(acc, tile)` run while the kernel
  traces. The kernel is traced once per value (its spec entry is `("const", Static)`), and the
  IR never sees it: `fn.args` holds tensors and runtime scalars only.
* An int argument that the body uses where a static int is needed (a shape, `range(n)`, a
  `td.tile(n)` size, a block size, an axis) is specialized the same way: the trace stops with
  `StaticNeeded`, the kernel marks the parameter static and traces again with the value as a
  Python int. An int used in arithmetic only stays a runtime int64, unless the race check
  (races.py) cannot otherwise prove a store's programs apart: the int arguments in its indices
  (`x_flat[pid * row_stride + cols]`, Liger's row strides) are then specialized the same way
  (`need_static_in`), so their coefficients are known.
* A list or tuple of arrays (`("list", kind, element specs)`) reaches the body as a Python list
  (or tuple) of Tensor proxies; its elements are IR arguments of their own (`a_0`, `a_1`...), so
  writes into them work as writes into tensor arguments. The kernel is traced per length.

* A function whose closure holds arrays (`lambda acc, tile: acc + bias[tile[1]]`, as Helion's
  epilogues capture tensors) is a compile-time argument whose captured arrays are lifted into
  tensor arguments of the IR (`("closure", Static, ((cell index, name, tensor spec), ...))`):
  the body calls a copy of the function whose cells hold Tensor proxies instead.

Keys: a value is keyed by its type and value; a function by its code, defaults, closure and the
values of the globals it reads (reads.py)
(so the same `lambda` written in a loop hits one trace) when those are values of this kind,
else by its identity. `Static.text` is the stable description the on-disk caches key on.
"""

from __future__ import annotations

import hashlib
import inspect
import marshal
import operator
from dataclasses import dataclass
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any, Callable, Hashable

import numpy as np

from tiledsl.frontend import reads
from tiledsl.dtypes import DType
from tiledsl.ir.core import Value, upstream

HOST_INT_OPS = ("add", "sub", "mul", "floordiv", "mod", "neg", "abs", "maximum", "minimum",
                "and", "or", "xor", "shl", "shr",  # (triton.next_power_of_2 of an int argument)
                "cast", "div")  # (`math.ceil(seqlen / chunk_size)`: mamba's chunk counts)
# and what makes a Python bool of them (`i != dim` in a comprehension of the host code)
TRUTH_OPS = ("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not")


class constexpr:  # noqa: N801 - spelled as Triton's tl.constexpr and Helion's hl.constexpr
    """Mark an argument as a compile-time constant: `k(x, td.constexpr(64))` passes 64 to the
    body as a Python int (the kernel is traced per value). Also a parameter annotation:
    `def k(x, block: td.constexpr)`."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"

    # As Triton's: a constant such as Liger's `_CASTING_MODE_LLAMA = tl.constexpr(0)` computes
    # and compares as its value (`mode == _CASTING_MODE_LLAMA`), giving plain values.
    def __hash__(self) -> int:
        return hash(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """`@tl.constexpr` on a helper function (FlagGems' `get_scan_accum_type`): it runs
        while the kernel traces, as a Python call."""
        if not callable(self.value):
            raise TypeError(f"'{type(self.value).__name__}' object is not callable")
        return self.value(*args, **kwargs)

    def __index__(self) -> int:
        return operator.index(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __float__(self) -> float:
        return float(self.value)


def _forward(op: Callable[[Any, Any], Any], reflected: bool) -> Callable[[constexpr, Any], Any]:
    def method(self: constexpr, other: Any) -> Any:
        other = other.value if isinstance(other, constexpr) else other
        return op(other, self.value) if reflected else op(self.value, other)
    return method


for _name in ("eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "truediv", "floordiv",
              "mod", "pow", "and", "or", "xor", "lshift", "rshift"):
    _op = getattr(operator, f"{_name}_" if _name in ("and", "or") else _name)
    setattr(constexpr, f"__{_name}__", _forward(_op, False))
    if _name not in ("eq", "ne", "lt", "le", "gt", "ge"):
        setattr(constexpr, f"__r{_name}__", _forward(_op, True))
for _name in ("neg", "pos", "invert", "abs"):
    setattr(constexpr, f"__{_name}__", (lambda op: lambda self: op(self.value))(
        getattr(operator, _name)))


class StaticNeeded(BaseException):  # not an Exception: user code's `except Exception` skips it
    """Raised while tracing when runtime int arguments are used where a static int is needed."""

    def __init__(self, params: frozenset[str]) -> None:
        super().__init__(", ".join(sorted(params)))
        self.params = params


@dataclass(frozen=True, eq=False)
class Static:
    """A compile-time value in an argument spec: equal to another when their keys are."""

    value: Any
    key: Hashable
    text: str  # stable across processes: what on-disk cache keys hold

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Static) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return self.text


_SCALARS = (type(None), bool, str, int, float, complex, bytes)


def is_constant(v: Any) -> bool:
    """Whether `v` is a compile-time argument by its type alone (a Python int or float is not:
    it is a runtime scalar unless the body needs it static)."""
    if isinstance(v, constexpr) or v is None or isinstance(v, (bool, str, bytes, DType, np.dtype)):
        return True
    if _is_torch_constant(v):
        return True
    if isinstance(v, (tuple, list)):
        return all(is_constant(x) or (isinstance(x, (int, float)) and not isinstance(x, np.generic))
                   for x in v)
    return callable(v) and not _is_array(v)


def _is_torch_constant(v: Any) -> bool:
    """torch's dtype, layout, device and memory format objects (`eye(n, dtype=torch.float16,
    layout=torch.strided)`), and Triton's dtypes (`f16_to_f8(x, dtypes=tl.float8e5)`), without
    importing either."""
    module = type(v).__module__
    return module == "torch" and type(v).__name__ in _TORCH_CONSTANTS or \
        module.startswith("triton.language") and type(v).__name__ == "dtype"


_TORCH_CONSTANTS = frozenset({"dtype", "layout", "device", "memory_format"})


def _is_array(v: Any) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype")


def static(v: Any) -> Static:
    """The spec entry's payload for compile-time value `v` (a constexpr is unwrapped)."""
    if isinstance(v, constexpr):
        v = v.value
    return Static(v, _key(v, set()), _text(v, set()))


def _key(v: Any, seen: set[int]) -> Hashable:
    if isinstance(v, float):
        return ("float", repr(v))  # nan equals itself here
    if isinstance(v, _SCALARS):
        return (type(v).__name__, v)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, tuple(_key(x, seen) for x in v))
    if isinstance(v, DType):
        return ("dtype", v.short)
    if isinstance(v, np.dtype):
        return ("np.dtype", v.str)
    if isinstance(v, np.generic):
        return ("np", v.dtype.str, v.item())
    if _is_torch_constant(v):
        return ("torch", type(v).__name__, str(v))
    if isinstance(v, FunctionType) and id(v) not in seen:
        seen = seen | {id(v)}
        cells = tuple(_LIFTED if _is_array(c) else c for c in
                      (_cell(c) for c in (v.__closure__ or ())))
        parts = (v.__code__, _key(v.__defaults__, seen), _key(v.__kwdefaults__, seen),
                 tuple(_key(c, seen) for c in cells), _globals_key(v, seen))
        if not _has_identity(parts):
            return ("function", parts)
    return ("id", reads.Identity(v))


def _globals_key(fn: FunctionType, seen: set[int]) -> Hashable:
    """The values of the globals `fn` reads (reads.py), a captured array as its spec."""
    return tuple((p, _LIFTED if _is_array(x) else reads.value_key(x, frozenset(seen)))
                 for p, x in reads.values(fn))


_LIFTED = "<captured array>"  # a cell whose array is lifted into an argument: keyed by its spec


def captured_arrays(fn: Any) -> list[tuple[int | str, str, Any]]:
    """(where, variable name, array) of the arrays `fn` captures: in its closure (`where` is
    the cell's index) or as the module globals it names (`where` is the name)."""
    if not isinstance(fn, FunctionType):
        return []
    out: list[tuple[int | str, str, Any]] = [
        (i, name, _cell(c)) for i, (name, c) in
        enumerate(zip(fn.__code__.co_freevars, fn.__closure__ or ())) if _is_array(_cell(c))]
    return out + [(name, name, fn.__globals__[name]) for name in fn.__code__.co_names
                  if _is_array(fn.__globals__.get(name))]


def with_cells(fn: FunctionType, replace: dict[int | str, Any]) -> FunctionType:
    """A copy of `fn` whose closure cells (int keys) and globals (str keys) `replace` says
    are replaced."""
    cells = tuple(_make_cell(replace[i]) if i in replace else c
                  for i, c in enumerate(fn.__closure__ or ()))
    scope = fn.__globals__
    if any(isinstance(k, str) for k in replace):
        scope = {**scope, **{k: v for k, v in replace.items() if isinstance(k, str)}}
    out = FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, cells or None)
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__qualname__ = fn.__qualname__
    return out


def _has_identity(key: Any) -> bool:
    if isinstance(key, reads.Identity):
        return True
    return isinstance(key, tuple) and any(_has_identity(k) for k in key)


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a name the closure binds later)
        return None


def _text(v: Any, seen: set[int]) -> str:
    """A description that is the same in every process for the same value."""
    if isinstance(v, (tuple, list)):
        inner = ", ".join(_text(x, seen) for x in v)
        return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else \
            f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
    if isinstance(v, _SCALARS) or isinstance(v, np.generic):
        return repr(v)
    if isinstance(v, DType):
        return f"td.{v.name}"
    if isinstance(v, np.dtype):
        return f"np.dtype({v.str!r})"
    if _is_torch_constant(v):
        return str(v)  # torch.float16, torch.strided
    if isinstance(v, FunctionType) and id(v) not in seen:
        seen = seen | {id(v)}
        digest = hashlib.sha256(marshal.dumps(v.__code__)).hexdigest()[:12]
        cells = ", ".join(_LIFTED if _is_array(_cell(c)) else _text(_cell(c), seen)
                          for c in (v.__closure__ or ()))
        defaults = _text(v.__defaults__, seen) if v.__defaults__ else ""
        scope = "; ".join(f"{'.'.join(p)}={_LIFTED if _is_array(x) else reads.value_text(x)}"
                          for p, x in reads.values(v) if not isinstance(x, ModuleType))
        return f"<function {v.__module__}.{v.__qualname__} {digest} ({cells}) {defaults} " \
            f"{{{scope}}}>"
    if isinstance(v, (BuiltinFunctionType, MethodType, type)) or hasattr(v, "__qualname__"):
        name = getattr(v, "__qualname__", type(v).__qualname__)
        return f"<{type(v).__name__} {getattr(v, '__module__', '')}.{name}>"
    return f"<{type(v).__module__}.{type(v).__qualname__} object>"


def annotated_constexpr(annotation: Any) -> bool:
    """Whether a parameter's annotation marks it compile-time (`td.constexpr`, also as the
    string `from __future__ import annotations` leaves)."""
    if annotation is constexpr:
        return True
    return isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "constexpr"


def need_static(v: Value, int_params: dict[Value, str], truth: bool = False) -> None:
    """Raise StaticNeeded if `v` (the IR value of a traced value the body uses where a static
    int is needed, or with `truth` a Python bool: `i != dim`) is computed from int arguments
    and constants alone; otherwise return (the caller fails)."""
    if not int_params:
        return
    found: set[str] = set()
    if _int_leaves(v, int_params, found, truth) and found:
        raise StaticNeeded(frozenset(found))


def need_static_in(values: list[Value], int_params: dict[Value, str]) -> None:
    """Raise StaticNeeded for every int argument that values' expressions read (through any
    op), if any: where a check needs constants in them, the kernel traces again with those
    arguments as Python ints."""
    found = int_arguments(values, int_params)
    if found:
        raise StaticNeeded(found)


def int_arguments(values: list[Value], int_params: dict[Value, str]) -> frozenset[str]:
    """The int arguments that values' expressions read (through any op)."""
    return frozenset(int_params[v] for v in upstream(values) if v in int_params)


def _int_leaves(v: Value, int_params: dict[Value, str], found: set[str],
                truth: bool = False) -> bool:
    if v in int_params:
        found.add(int_params[v])
        return True
    op = v.owner
    if op is None:
        return False
    if op.name == "const":
        return True
    ops = HOST_INT_OPS + (TRUTH_OPS if truth else ())
    return op.name in ops and \
        all(_int_leaves(o, int_params, found, truth) for o in op.operands)


def map_arrays(values: list[Any], f: Callable[[Any], Any]) -> list[Any]:
    """`values` with `f` applied to each argument that is an array and to each array in a list
    or tuple of arrays (how the tuner ships and copies arguments); others as they are."""
    def one(v: Any) -> Any:
        if isinstance(v, (list, tuple)) and v and all(_is_array(x) for x in v):
            return type(v)(f(x) for x in v)
        return f(v)
    return [one(v) for v in values]


def flatten_arrays(values: list[Any]) -> list[Any]:
    """The arguments with each list or tuple of arrays, and the arrays a function captures,
    spliced in (the IR's argument order, constants aside)."""
    out: list[Any] = []
    for v in values:
        if isinstance(v, (list, tuple)) and v and all(_is_array(x) for x in v):
            out.extend(v)
        else:
            out.append(v)
            out.extend(a for _, _, a in captured_arrays(v))
    return out


def splice(names: list[str], values: list[Any]) -> tuple[list[str], list[Any]]:
    """Names and values with each list of arrays (`a[0]`, `a[1]`...) and the arrays a function
    captures (`epilogue.bias`) spliced in: the names `written_args` gives."""
    out_names: list[str] = []
    for n, v in zip(names, values):
        if isinstance(v, (list, tuple)) and v and all(_is_array(x) for x in v):
            out_names += [f"{n}[{i}]" for i in range(len(v))]
        else:
            out_names.append(n)
            out_names += [f"{n}.{var}" for _, var, _ in captured_arrays(v)]
    return out_names, flatten_arrays(values)


def shippable(kernel: str, names: list[str], values: list[Any]) -> list[Any]:
    """The arguments as another process can receive them: a lambda or nested function is sent
    as its code, defaults and closure (rebuilt over its module's globals there), which pickle
    cannot do. A value that still cannot be pickled is an ArgumentError naming it."""
    import pickle

    from tiledsl.errors import ArgumentError
    out = []
    for name, v in zip(names, values):
        v = _Shipped(v) if isinstance(v, FunctionType) and _needs_shipping(v) else v
        try:
            pickle.dumps(v)
        except Exception as e:  # noqa: BLE001 - pickle raises many kinds
            raise ArgumentError(f"argument '{name}' ({_text(v, set())}) cannot be sent to the "
                                f"tuner's other processes ({type(e).__name__}: {e})",
                                kernel=kernel, hint="pass a module-level function, or values "
                                "that pickle; or tune with isolate=False") from None
        out.append(v)
    return out


def _needs_shipping(fn: FunctionType) -> bool:
    import pickle
    try:
        pickle.dumps(fn)
        return False
    except Exception:  # noqa: BLE001
        return True


class _Shipped:
    """A function sent by value; unpickles as the function itself."""

    def __init__(self, fn: FunctionType) -> None:
        self.fn = fn

    def __reduce__(self) -> tuple:
        fn = self.fn
        cells = tuple(_Shipped(c) if isinstance(c, FunctionType) and _needs_shipping(c) else c
                      for c in (_cell(c) for c in (fn.__closure__ or ())))
        return (_rebuild, (marshal.dumps(fn.__code__), fn.__module__, fn.__name__,
                           fn.__qualname__, fn.__defaults__, fn.__kwdefaults__, cells))


def _rebuild(code: bytes, module: str, name: str, qualname: str, defaults: Any,
             kwdefaults: Any, cells: tuple) -> FunctionType:
    import importlib
    import sys
    try:
        scope = vars(sys.modules.get(module) or importlib.import_module(module))
    except ImportError:
        scope = {"__builtins__": __builtins__}
    closure = tuple(_make_cell(c) for c in cells) or None
    fn = FunctionType(marshal.loads(code), scope, name, defaults, closure)
    fn.__kwdefaults__ = kwdefaults
    fn.__qualname__ = qualname
    return fn


def _make_cell(value: Any) -> Any:
    return (lambda: value).__closure__[0]  # type: ignore[index]


def signature_constexprs(sig: inspect.Signature) -> frozenset[str]:
    """The parameters annotated `td.constexpr`."""
    return frozenset(p.name for p in sig.parameters.values()
                     if annotated_constexpr(p.annotation))
