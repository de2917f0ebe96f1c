"""The module globals and closure variables a kernel reads, as a key of their values: a kernel's
traces are cached per key, so after `SCALE = 5.0` the next call traces the kernel again
instead of reusing the trace made with `SCALE = 2.0` (Triton's `@jit` refuses a changed global;
tiledsl retraces, as it does for a changed compile-time argument).

What is read: each global or closure variable the kernel's code loads (`SCALE`; not `x.shape`,
an attribute of a local), followed through modules (`settings.SCALE`, `math.pi`), and the same,
recursively, for the plain Python functions of the user's code it calls (`helper(x)` reading
`EPS`) or receives as compile-time arguments (static_args.py keys those with this).

How a value is keyed:
* by value: None, bools, numbers, strings, bytes, NumPy scalars, dtypes, and tuples and lists
  of those (as compile-time arguments are: static_args.py);
* a function of the user's code by its code, defaults, closure and what it reads; a module,
  and a function or class of a library, by its name;
* a torch module by its identity and its state: its plain attributes by value (`layer.eval()`
  flips `training`), its parameters, buffers and submodules as above (a parameter rebound to
  another tensor traces again), on every call;
* anything else (an array, an object) by its identity: binding the name to another object
  traces again, but a change made inside the object (`W[0] = 3`, `cfg.scale = 5`) is not seen,
  as before. Comparing an array's contents on every call would cost as much as reading it, and
  an object has no value to compare; pass such values as arguments.
"""

from __future__ import annotations

import dis
import functools
import hashlib
import marshal
import operator
import os
import sys
import sysconfig
from types import CodeType, FunctionType, ModuleType
from typing import Any, Callable, Hashable

import numpy as np

from tiledsl.dtypes import DType
from tiledsl.errors import _PACKAGE_DIRS

_MISSING = object()
_LOADS = ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_CLASSDEREF")
_ATTRS = ("LOAD_ATTR", "LOAD_METHOD")
_SCALARS = (type(None), bool, int, str, bytes)
_LIBRARY_DIRS = tuple(os.path.abspath(p) + os.sep for p in {
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"]})


@functools.lru_cache(maxsize=4096)
def paths(code: CodeType) -> tuple[tuple[str, ...], ...]:
    """The global and free-variable names `code` (and the code nested in it: lambdas,
    comprehensions) loads, each with the attributes read from it right after (`math.pi` is
    ("math", "pi"))."""
    out: list[tuple[str, ...]] = []
    ins = list(dis.get_instructions(code))
    for i, op in enumerate(ins):
        if op.opname not in _LOADS or not isinstance(op.argval, str):
            continue
        path = [op.argval]
        for nxt in ins[i + 1:]:
            if nxt.opname not in _ATTRS:
                break
            path.append(nxt.argval)
        out.append(tuple(path))
    for const in code.co_consts:
        if isinstance(const, CodeType):
            out += paths(const)
    return tuple(dict.fromkeys(out))


@functools.lru_cache(maxsize=4096)
def is_user_code(code: CodeType) -> bool:
    """Whether a function is the user's (not tiledsl's, a library's or the standard
    library's): what it reads is part of the kernel."""
    path = os.path.abspath(code.co_filename)
    return not path.startswith(_PACKAGE_DIRS + _LIBRARY_DIRS)


@functools.lru_cache(maxsize=4096)
def plan(code: CodeType) -> tuple[tuple[tuple[str, ...], int], ...]:
    """`paths(code)` with where each starts: the index of its closure cell, or -1 for a module
    global (names local to `code` are left out: a nested function reads them)."""
    return tuple((p, code.co_freevars.index(p[0]) if p[0] in code.co_freevars else -1)
                 for p in paths(code)
                 if p[0] not in code.co_varnames and p[0] not in code.co_cellvars)


def _resolve(fn: FunctionType, path: tuple[str, ...], cell: int) -> Any:
    """The value `path` names in `fn` (closure cell `cell`, or a module global if -1),
    followed through modules; _MISSING for a builtin or an unbound name."""
    if cell >= 0:
        try:
            value = fn.__closure__[cell].cell_contents  # type: ignore[index]
        except ValueError:  # not bound yet
            return _MISSING
    else:
        value = fn.__globals__.get(path[0], _MISSING)
    for attr in path[1:]:
        if not isinstance(value, ModuleType):
            break
        value = getattr(value, attr, _MISSING)
    return value


def values(fn: FunctionType) -> list[tuple[tuple[str, ...], Any]]:
    return [(p, v) for p, c in plan(fn.__code__) if (v := _resolve(fn, p, c)) is not _MISSING]


def _library_module(v: Any) -> bool:
    """A module of tiledsl, a library or the standard library: its attributes (td.tile,
    math.sqrt) are taken as constant, so a call does not look them up again."""
    if type(v) is not ModuleType:
        return False
    file = getattr(v, "__file__", None)
    return file is None or os.path.abspath(file).startswith(_PACKAGE_DIRS + _LIBRARY_DIRS)


_watched: dict[tuple[CodeType, int], tuple] = {}


def watched(fn: FunctionType) -> tuple[tuple[tuple[str, ...], int], ...]:
    """`plan(fn.__code__)` less the paths through a global bound to a library module when first
    asked (`_library_module`): what `snapshot` looks up on every call."""
    k = (fn.__code__, id(fn.__globals__))
    if k not in _watched:
        _watched[k] = tuple((p, c) for p, c in plan(fn.__code__)
                            if c >= 0 or not _library_module(fn.__globals__.get(p[0])))
    return _watched[k]


def snapshot(fn: FunctionType, out: list[Any], seen: set[int]) -> list[Any]:
    """The objects `fn` reads, and those the user's functions among them read, in order: while
    each is the same object as before (and none is a list, which changes in place), the key
    is the same, and need not be made again. (`_resolve` inlined: this runs on every call.)"""
    seen.add(id(fn))
    scope, closure = fn.__globals__, fn.__closure__
    for path, cell in watched(fn):
        if cell < 0:
            v = scope.get(path[0], _MISSING)
        else:
            try:
                v = closure[cell].cell_contents  # type: ignore[index]
            except ValueError:
                v = _MISSING
        for attr in path[1:]:
            if type(v) is not ModuleType:
                break
            v = getattr(v, attr, _MISSING)
        out.append(v)
        if type(v) is not FunctionType and _triton_object(v):
            v = triton_function(v)  # a @triton.jit kernel a launch runs: its reads too
        if type(v) is FunctionType and id(v) not in seen and is_user_code(v.__code__):
            out.append(v.__defaults__)
            out += [_cell(c) for c in v.__closure__ or ()]
            snapshot(v, out, seen)
    return out


def triton_function(v: Any) -> Any:
    """The Python function under a Triton kernel object (a @triton.jit function and its
    autotune and heuristics wrappers, `.fn` after `.fn`), else `v`: a launch runs its body, so
    what it reads is the kernel's too (frontend/launches.py)."""
    for _ in range(16):
        if type(v) is FunctionType or not _triton_object(v):
            return v
        v = getattr(v, "fn", None)
    return v


def _triton_object(v: Any) -> bool:
    """Whether `v` is Triton's (a kernel object, or a `triton.KernelInterface` of another
    library's: FlagGems' `@libentry()`)."""
    if type(v).__module__.startswith("triton."):
        return True
    interface = getattr(sys.modules.get("triton"), "KernelInterface", None)
    return interface is not None and isinstance(v, interface)


def changes_in_place(v: Any) -> bool:
    """Whether a value keyed by value can change without being bound again (a list, a torch
    module's state)."""
    return isinstance(v, list) or (isinstance(v, tuple) and any(map(changes_in_place, v))) \
        or _torch_module(v)


def key(fn: FunctionType, seen: frozenset[int] = frozenset()) -> tuple:
    """The values `fn` reads from outside itself, keyed (see the module's docstring)."""
    seen = seen | {id(fn)}
    return tuple((p, value_key(v, seen)) for p, v in values(fn))


class Identity:
    """A key equal only to itself's object (which it keeps alive, so an id is never reused)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def value_key(v: Any, seen: frozenset[int] = frozenset()) -> Hashable:
    """A read value's key: by value, by name, or by identity (see the module's docstring)."""
    if isinstance(v, (float, complex, np.floating, np.complexfloating)):
        return (type(v).__name__, repr(v))  # -0.0 is not 0.0, and a nan equals itself
    if isinstance(v, _SCALARS):
        return (type(v).__name__, v)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, tuple(value_key(x, seen) for x in v))
    if isinstance(v, np.generic):
        return ("np", v.dtype.str, v.item())
    if isinstance(v, DType):
        return ("dtype", v.short)
    if isinstance(v, np.dtype):
        return ("np.dtype", v.str)
    if isinstance(v, ModuleType):
        return ("module", v.__name__)
    v = triton_function(v)
    if isinstance(v, FunctionType) and is_user_code(v.__code__):
        if id(v) in seen:  # recursion: its reads are being keyed already
            return ("function", v.__code__)
        cells = tuple(_cell(c) for c in v.__closure__ or ())
        return ("function", v.__code__, value_key(v.__defaults__, seen),
                value_key(cells, seen), key(v, seen))
    if _named(v):  # a library's function or class: its name says which
        return ("named", v.__module__, v.__qualname__)
    if _torch_module(v) and id(v) not in seen:
        return ("nn.Module", Identity(v), _module_state(v, seen | {id(v)}))
    return ("id", Identity(v))


def _torch_module(v: Any) -> bool:
    nn = getattr(sys.modules.get("torch"), "nn", None)
    return nn is not None and isinstance(v, nn.Module)


def _module_state(m: Any, seen: frozenset[int]) -> tuple:
    """A torch module keyed by its state as well as its identity: its numbers, bools and
    strings by value (`training`: `layer.eval()`, a BatchNorm's momentum), its parameters,
    buffers and submodules by identity (a parameter rebound) and state. Other attributes are
    left out: hook tables, and what a forward caches while it traces (attorch's AvgPool sets
    `self.kernel`, None before), which would make every call after the first trace again."""
    parts = []
    for name, x in vars(m).items():
        if name in ("_parameters", "_buffers", "_modules"):
            parts.append((name, tuple((k, value_key(t, seen)) for k, t in x.items())))
        elif isinstance(x, (bool, int, float, str)):
            parts.append((name, value_key(x, seen)))
    return tuple(parts)


def _named(v: Any) -> bool:
    module, name = getattr(v, "__module__", None), getattr(v, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(name, str) or "<" in name:
        return False
    return getattr(sys.modules.get(module), name.split(".")[0], None) is not None \
        and (callable(v) or isinstance(v, type))


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a name the closure binds later)
        return None


def text(fn: FunctionType, seen: frozenset[int] = frozenset()) -> str:
    """What `fn` reads, described the same in every process for the same values: what the
    on-disk caches key on, and what the tuner's other processes check against."""
    seen = seen | {id(fn)}
    parts = [f"{'.'.join(p)}={value_text(v, seen)}" for p, v in values(fn)
             if not isinstance(v, ModuleType)]
    return "; ".join(parts)


def value_text(v: Any, seen: frozenset[int] = frozenset()) -> str:
    if isinstance(v, (tuple, list)):
        inner = ", ".join(value_text(x, seen) for x in v)
        return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else \
            f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
    if isinstance(v, (float, complex, np.generic) + _SCALARS):
        return repr(v)
    if isinstance(v, DType):
        return f"td.{v.name}"
    if isinstance(v, np.dtype):
        return f"np.dtype({v.str!r})"
    v = triton_function(v)
    if isinstance(v, FunctionType) and is_user_code(v.__code__):
        digest = hashlib.sha256(marshal.dumps(v.__code__)).hexdigest()[:12]
        inner = "" if id(v) in seen else text(v, seen)
        cells = ", ".join(value_text(_cell(c), seen) for c in v.__closure__ or ())
        return f"<function {v.__qualname__} {digest} ({cells}) {{{inner}}}>"
    if _named(v):
        return f"<{v.__module__}.{v.__qualname__}>"
    return f"<{type(v).__module__}.{type(v).__qualname__} object>"


class Generations:
    """A kernel's in-process caches (the object in attribute `name` of the kernel: traces,
    spaces, plans, ...), one per key of the values it reads; the last MAX_KEPT are kept, so a
    global that toggles between two values does not trace on every call. `fresh()` makes the
    caches of a key not seen before."""

    MAX_KEPT = 8

    def __init__(self, fn: FunctionType, name: str, fresh: Callable[[], Any]) -> None:
        self.fn, self.name, self.fresh = fn, name, fresh
        self.current: tuple | None = None
        self.kept: dict[tuple, Any] = {}
        self.seen: list[Any] = []  # the snapshot the current key was made from
        self.in_place = True  # whether the snapshot holds a value that changes in place

    def sync(self, owner: Any) -> None:
        """Switch `owner`'s caches to those of the values `fn` reads now."""
        seen = snapshot(self.fn, [], set())
        if not self.in_place and len(seen) == len(self.seen) and \
                all(map(operator.is_, seen, self.seen)):
            return  # the same objects as when the key was made
        self.seen, self.in_place = seen, any(map(changes_in_place, seen))
        now = key(self.fn)
        if now == self.current:
            return
        if self.current is not None:
            self.kept[self.current] = getattr(owner, self.name)
            while len(self.kept) > self.MAX_KEPT:
                del self.kept[next(iter(self.kept))]
            setattr(owner, self.name, self.kept.pop(now, None) or self.fresh())
        self.current = now
