"""Helper functions with tile loops and branches of their own, called from a kernel.

Triton kernels keep their inner loops in `@triton.jit` helpers (the fused-attention tutorial's
`_attn_fwd_inner(acc, l_i, m_i, q, ...)` runs the key loop and returns the carried values).
tiledsl rewrites a kernel's `for` and `if` statements from its source (rewrite.py), so a helper
needs the same rewrite: the kernel's rewrite turns each call, `f(...)` or `mod.f(...)`, into
`_td_helper(f)(...)`, and `helper` (with the rewrite, which rewrite.py passes) gives back, for a Python function whose body has a `for`,
`if` or `while` statement or a call (the builtins `min` and `max` on runtime values, as in the
persistent-matmul tutorial's `_compute_pid`, and helpers of its own), its rewritten copy (built once per function; it calls its own
helpers the same way). The rewrite keeps Python's meaning for Python values, so it leaves alone
only what cannot gain from it: builtins, lambdas, generators (a `@contextmanager` one is
rewritten: its `yield` keeps its statements in place), functions without source, and
those of the standard library, of tiledsl and of the array libraries (`LIBRARIES`), wrappers
they define included (`@torch.no_grad()`). A `functools.wraps` wrapper of the user's (Liger's
`@ensure_contiguous`) is rewritten from its own source, so the function it calls is too;
`MyFunction.apply(...)` of a `torch.autograd.Function` calls its rewritten `forward`
(autograd_functions.py). Those cost one dictionary lookup. While the copy runs,
the tracer's file is the helper's, so errors name its lines.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import os
import sys
import sysconfig
import textwrap
import weakref
from types import CellType, FunctionType, ModuleType
from typing import Any, Callable

from tiledsl import dtypes
from tiledsl.errors import TraceError
from tiledsl.frontend import autograd_functions
from tiledsl.frontend.captured import is_foreign_tensor
from tiledsl.frontend.td_names import FUNCTIONS, TRITON_LANGUAGE, TRITON_ONLY, substitute
from tiledsl.frontend.tracer import active, current

LIBRARIES = frozenset({"tiledsl", "lowering", "autotune", "numpy", "triton", "torch", "cupy",
                       "jax", "optuna", "scipy"})
_STDLIB = tuple(os.path.realpath(sysconfig.get_paths()[k]) + os.sep
                for k in ("stdlib", "platstdlib"))
_SITE = tuple(os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib"))
_CACHE: weakref.WeakKeyDictionary[FunctionType, Callable[..., Any]] = weakref.WeakKeyDictionary()
_GENERATOR = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


Rewrite = Callable[..., Callable[..., Any]]  # rewrite.rewrite(fn, source, kernel=False)


def helper(fn: Any, rewrite: Rewrite) -> Any:
    """What a kernel calls for `fn(...)`: its copy rewritten by `rewrite`, or `fn` itself (the
    builtins `min` and `max` take runtime values too, as in Triton)."""
    if fn is min or fn is max:
        return _MIN_MAX[fn]
    if id(fn) in _HIGHER_ORDER:  # `map(f, xs)`, `sorted(xs, key=f)`: f is called as a
        return _higher_order(fn, rewrite)  # helper
    if fn is float:
        return _float
    if fn is isinstance:
        return _isinstance
    if type(getattr(fn, "__self__", None)) is dict and getattr(fn, "__name__", "") == "get":
        return functools.partial(dtypes.DType.get, fn.__self__)  # table.get(x.dtype, default)
    if type(fn).__name__ in ("JITFunction", "InterpretedFunction") and \
            (type(fn).__module__ or "").startswith("triton."):
        return _triton_body(helper(_as_tiledsl(fn.fn), rewrite))  # `tl` read as `td`
    if type(fn).__name__ == "TileKernel" and (tr := active()) is not None and \
            tr.depth == "host":
        return _inlined(fn, rewrite)  # another kernel's wrapper called by this one's
    if (forward := autograd_functions.forward_of(fn)) is not None:  # MyFunction.apply(x)
        return autograd_functions.apply(fn.__self__, helper(forward[0], rewrite), forward[1],
                                        lambda f: helper(f, rewrite))
    if type(fn).__name__ == "_lru_cache_wrapper" and type(fn.__wrapped__) is FunctionType:
        return helper(fn.__wrapped__, rewrite)  # `@functools.lru_cache` (FlagGems' get_num_sms)
    if _torch_wrapper(fn):  # `@torch.amp.custom_fwd`, `@torch.no_grad()`: autograd's business
        return helper(fn.__wrapped__, rewrite)
    if (body := _custom_op_body(fn)) is not None:  # `@torch.library.triton_op` / `custom_op`
        return helper(body, rewrite)
    bound = _user_method(fn, rewrite)  # `obj.method(x)`, `obj(x)` of a user's class
    if bound is not None:
        return bound
    if type(fn) is not FunctionType:
        return substitute(fn)  # torch.empty(m, n, dtype=x.dtype) -> td.empty (torch_calls.py)
    if _context_manager(fn):  # Liger's `with device_context(X.device):`
        return contextlib.contextmanager(_generator(fn.__wrapped__, rewrite))
    try:
        out = _CACHE[fn]
    except KeyError:  # (a library's function may have a substitute: torch.cuda's queries)
        found = substitute(fn)
        out = _CACHE[fn] = found if found is not fn else _rewritten(fn, rewrite) or fn
    tr = active()
    if tr is not None and tr.valued and out is not fn and type(fn) is FunctionType:
        return _eager_on_values(fn, out)
    return out


def _eager_on_values(fn: FunctionType, traced: Callable[..., Any]) -> Callable[..., Any]:
    """In a trace with valued arguments (valued_args.py): `fn` as Python runs it where its
    arguments hold real tensors and no value of the kernel's (fla's `prepare_chunk_indices(
    cu_seqlens, BT)` computes with torch), else as the kernel traces it: also where running it
    would launch a Triton kernel (torchao's `generate_permute_indices` computes with torch,
    then launches: the launch is the kernel's)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        given = [*args, *kwargs.values()]
        given += [x for a in given if isinstance(a, (list, tuple)) for x in a]
        if any(is_foreign_tensor(a, zero_d=True) for a in given) and \
                not any(type(a).__module__.startswith("tiledsl.") for a in given):
            try:
                with _no_triton_launches():
                    return fn(*args, **kwargs)
            except _Launches:
                pass
        return traced(*args, **kwargs)
    return call


class _Launches(BaseException):
    """A Triton launch in a helper run as Python (`_eager_on_values`): trace it instead."""


@contextlib.contextmanager
def _no_triton_launches() -> Any:
    """Triton's launches (a JIT function's, an autotuner's, a heuristic's) raise `_Launches`."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    def refuse(*_: Any, **__: Any) -> Any:
        raise _Launches()
    saved = [(c, c.run) for c in (JITFunction, Autotuner, Heuristics)]
    for c, _ in saved:
        c.run = refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        for c, run in saved:
            c.run = run  # type: ignore[method-assign]


_HIGHER_ORDER = frozenset(map(id, (map, filter, sorted, functools.reduce)))  # (builtins: ids
# stay theirs; every call a kernel makes asks, so a set lookup, not an == on the callable)


def _higher_order(fn: Callable[..., Any], rewrite: Rewrite) -> Callable[..., Any]:
    """`fn` (`map`, `filter`, `sorted`, `functools.reduce`) calling the functions it is given
    as the kernel calls them (FlagGems' `list(map(conv, args))` of a helper checking
    `isinstance(v, torch.Tensor)`)."""
    def own(v: Any) -> Any:
        return helper(v, rewrite) if callable(v) and not isinstance(v, type) else v

    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*map(own, args), **{k: own(v) for k, v in kwargs.items()})
    return call


def _user_method(fn: Any, rewrite: Rewrite) -> Callable[..., Any] | None:
    """A bound method, or a callable object's `__call__`, of a class of the user's, rewritten
    and bound (FlagGems' pointwise_dynamic ops are objects whose `__call__` checks
    `isinstance(x, torch.Tensor)` and launches); None for the rest (library objects)."""
    if inspect.ismethod(fn) and type(fn.__func__) is FunctionType:
        func, this = fn.__func__, fn.__self__
    elif _torch_module(fn):  # `layer(x)`: its forward (hooks are autograd's and torch's)
        func, this = type(fn).forward, fn
    elif type(fn) is not FunctionType and not isinstance(fn, type) and \
            type(call := getattr(type(fn), "__call__", None)) is FunctionType:
        func, this = call, fn
    else:
        return None
    inner = helper(func, rewrite)
    return None if inner is func else functools.partial(inner, this)


def _torch_module(fn: Any) -> bool:
    """Whether `fn` is a torch.nn.Module whose forward is a Python function (attorch's layers,
    `GELU()(x)`: torch's `__call__` would run the forward without the rewrite)."""
    nn = getattr(sys.modules.get("torch"), "nn", None)
    return nn is not None and isinstance(fn, nn.Module) and \
        type(getattr(type(fn), "forward", None)) is FunctionType


def _triton_body(body: Callable[..., Any]) -> Callable[..., Any]:
    """A @triton.jit function's body, called with the tracer told so (Tracer.triton_body: its
    sums take Triton's result dtypes, lang/language.py)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        tr = current()
        tr.triton_body += 1
        try:
            return body(*args, **kwargs)
        finally:
            tr.triton_body -= 1
    return call


def user_function(fn: Any) -> Any:
    """`fn` without torch's decorators (`@torch.no_grad()`, `@torch.inference_mode()`,
    `@torch.amp.custom_fwd`): the user's own function, in whose module its names are read
    (`@td.tile_kernel` above `@torch.no_grad()`, lightllm's and vLLM's wrappers)."""
    while _torch_wrapper(fn):
        fn = fn.__wrapped__
    return fn


def _torch_wrapper(fn: Any) -> bool:
    """Whether `fn` is a wrapper torch made of a function of the user's (autocast, grad mode
    and compiler decorators, which change nothing a kernel traces)."""
    inner = getattr(fn, "__wrapped__", None)
    return type(fn) is FunctionType and type(inner) is FunctionType and \
        (fn.__globals__.get("__name__") or "").partition(".")[0] == "torch" and \
        (inner.__module__ or "").partition(".")[0] not in LIBRARIES


def _custom_op_body(fn: Any) -> FunctionType | None:
    """The user's function under a `torch.library.custom_op` or `triton_op` (flash-attn's
    `@triton_op("flash_attn::layer_norm_fwd_impl", ...)`): its body is what the op runs on a
    kernel's tensors. triton_op registers a closure calling it (`backend_fn`) as the op's."""
    if type(fn).__name__ != "CustomOpDef" or not type(fn).__module__.startswith("torch."):
        return None
    body = getattr(fn, "_init_fn", None)
    if type(body) is not FunctionType:
        return None
    cells = dict(zip(body.__code__.co_freevars, body.__closure__ or ()))
    inner = cells["fn"].cell_contents if "fn" in cells else None
    return inner if body.__name__ == "backend_fn" and type(inner) is FunctionType else body


def _context_manager(fn: FunctionType) -> bool:
    """Whether `fn` is `contextlib.contextmanager`'s wrapper of a generator of the user's."""
    inner = getattr(fn, "__wrapped__", None)
    return fn.__globals__.get("__name__") == "contextlib" and fn.__code__.co_name == "helper" \
        and type(inner) is FunctionType and bool(inner.__code__.co_flags & inspect.CO_GENERATOR)


def _generator(fn: FunctionType, rewrite: Rewrite) -> Callable[..., Any]:
    """A generator function rewritten (its `yield` keeps the statements around it as they
    are: rewrite.py), once per function."""
    try:
        return _CACHE[fn]
    except KeyError:
        out = _CACHE[fn] = _rewritten(fn, rewrite, generator=True) or fn
        return out


def _elementwise(builtin: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`min(a, b, ...)` / `max(...)` where an argument is a tile value: `td.minimum` /
    `td.maximum` over them (Triton's code generator maps the builtins so); else the builtin."""
    def call(*args: Any, **kwargs: Any) -> Any:
        from tiledsl.frontend.values import TileValue, binary
        if len(args) < 2 or kwargs or not any(isinstance(a, TileValue) for a in args):
            return builtin(*args, **kwargs)
        out = args[0]
        for a in args[1:]:
            out = binary(name, out, a)
        return out
    return call


_MIN_MAX = {min: _elementwise(min, "minimum"), max: _elementwise(max, "maximum")}


def _inlined(kernel: Any, rewrite: Rewrite) -> Callable[..., Any]:
    """A tile kernel called from another's host code (FlagGems' `mean_dim` calls `mean`): its
    body traced here, as `kernel.fn(...)` is; a kernel that reaches itself again is refused."""
    body = helper(kernel.fn, rewrite)

    def call(*args: Any, **kwargs: Any) -> Any:
        tr = current()
        if kernel.name == tr.kernel or kernel.name in tr.inlining:
            kernel.not_traced()  # (recursion: its error)
        tr.inlining.append(kernel.name)
        try:
            return body(*args, **kwargs)
        finally:
            tr.inlining.pop()
    return call


def _as_tiledsl(fn: FunctionType) -> FunctionType:
    """`fn` (a @triton.jit kernel's Python function) with the names its module binds to
    `triton.language` bound to `tiledsl` instead: `tl.load`, `tl.arange`, `tl.program_id` are
    td's. One copy per function while its module's globals stay as they were (so the rewrite's
    cache keys on it); a global bound again makes a new one."""
    module = fn.__globals__
    cells = tuple(_contents(c) for c in fn.__closure__ or ())
    hit = _TRITON_BODIES.get(fn)
    if hit is None or len(hit[1]) != len(module) or \
            any(module.get(k, _MISSING) is not v for k, v in hit[1].items()) or \
            any(a is not b for a, b in zip(hit[2], cells)):
        names = {k: _td_of(v) for k, v in module.items()}
        closure = None if fn.__closure__ is None else tuple(  # (a kernel defined inside a
            CellType(_td_of(v)) if v is not _MISSING else c  # function that imported `tl`:
            for c, v in zip(fn.__closure__, cells))  # torchao's lazily built kernels)
        body = FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, closure)
        body.__kwdefaults__, body.__qualname__ = fn.__kwdefaults__, fn.__qualname__
        body.__module__ = fn.__module__
        hit = _TRITON_BODIES[fn] = (body, dict(module), cells)
    return hit[0]


def _contents(cell: CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # (an empty cell)
        return _MISSING


_MISSING = object()


def _td_of(v: Any) -> Any:
    """What a @triton.jit body's global is in tiledsl: `triton.language` is `td`, libdevice is
    `td.math`, a Triton function bound to a name of the module's own (Unsloth's `triton_cast =
    tl.cast`, `triton_tanh = libdevice.tanh`, Liger's `from ...libdevice import rsqrt`) is td's
    of that name, and a `tl.constexpr` global is its value."""
    td = sys.modules["tiledsl"]
    if type(v).__name__ == "constexpr" and (type(v).__module__ or "").startswith("triton."):
        return v.value  # `LOG2_E = tl.constexpr(1.44...)` (Liger's cross entropy)
    if isinstance(v, ModuleType):
        name = v.__name__
        if name in ("triton.language", "triton.language.core", "triton.language.standard"):
            return TRITON_LANGUAGE  # td (FlagGems' bitonic sort: `import triton.language.core
            # as core`), with Triton's meaning of a few names (tl.topk)
        if name.startswith("triton.language") and name.endswith("libdevice"):
            return td.math
        return v
    if callable(v) and (getattr(v, "__module__", None) or "").startswith("triton.language"):
        name = getattr(v, "__name__", "")
        if v.__module__.endswith("libdevice") and name == "round":  # (libdevice's own: half
            return td.math.round  # away from zero, `from ...libdevice import round`)
        found = TRITON_ONLY.get(name) or FUNCTIONS.get(name)
        if found is None:
            try:
                found = getattr(td.math, name)
            except AttributeError:
                return v
        return found
    return v


_TRITON_BODIES: weakref.WeakKeyDictionary[FunctionType, tuple[FunctionType, dict, tuple]] = \
    weakref.WeakKeyDictionary()


def _isinstance(obj: Any, classes: Any) -> bool:
    """`isinstance(n, int)` of an int argument (FlagGems' `if isinstance(dim, int): dim =
    [dim]`): the kernel traces again with it as a Python int, whose answer it then is; a
    float argument is a float. A kernel's tensor, and a tile value (Helion's tiles are torch
    tensors), is a `torch.Tensor` (xgrammar's `if isinstance(indices, torch.Tensor):` in the
    wrapper). Else the builtin."""
    from tiledsl.frontend.values import Tensor, TileValue, need_static
    wanted = classes if isinstance(classes, tuple) else (classes,)
    if isinstance(obj, Tensor) or isinstance(obj, TileValue) and not obj.weak:
        if any(getattr(c, "__module__", None) == "torch" and getattr(c, "__name__", None)
               == "Tensor" for c in wanted):
            return True
    if isinstance(obj, TileValue) and obj.weak and obj.shape == ():
        if obj.dtype.is_int and any(c in (int, float, complex) for c in wanted):
            need_static(obj)  # an int argument: traced again as a Python int
        if obj.dtype.is_float and float in wanted:
            return True
    return isinstance(obj, classes)


def _float(x: Any = 0.0) -> Any:
    """`float(x)` of a runtime scalar (FlagGems' linspace: `float(end) - float(start)` on its
    arguments): the value as a float, weak as a Python float is; else the builtin."""
    from tiledsl.frontend.values import TileValue, cast
    if isinstance(x, TileValue) and x.shape == ():
        v = x if x.dtype.is_float else cast(x, dtypes.float64)
        return TileValue(v.value, weak=True)
    return float(x)


def _stdlib(file: str) -> bool:
    """Whether `file` is the standard library's (installed packages, under it too, are not)."""
    path = os.path.realpath(file)
    return path.startswith(_STDLIB) and not path.startswith(_SITE)


def _dtype_lookup(n: ast.AST) -> bool:
    """Whether `n` may look a dtype up as the rewrite spells it (`TABLE[dt]`, `x.dtype is
    torch.float16`, `dt in (...)`): a helper that does so is rewritten (SGLang's compute-type
    helpers are a one-line `return TABLE[x.dtype]`)."""
    if isinstance(n, ast.Subscript):
        key = n.slice
        return isinstance(key, ast.Attribute) and key.attr == "dtype" or \
            isinstance(key, ast.Name) and isinstance(n.value, (ast.Name, ast.Dict))
    return isinstance(n, ast.Compare) and len(n.ops) == 1 and \
        isinstance(n.ops[0], (ast.Is, ast.IsNot, ast.In, ast.NotIn))


def _rewritten(fn: FunctionType, rewrite: Rewrite, generator: bool = False
               ) -> Callable[..., Any] | None:
    """`fn` with its loops, branches, `and`/`or`/`not` and asserts rewritten, or None when it
    needs no rewrite (or is a generator, unless `generator`)."""
    code = fn.__code__
    if fn.__name__ == "<lambda>" or code.co_flags & _GENERATOR and not generator \
            or (fn.__module__ or "").partition(".")[0] in LIBRARIES \
            or (fn.__globals__.get("__name__") or "").partition(".")[0] in LIBRARIES \
            or _stdlib(code.co_filename):
        return None
    try:  # a functools.wraps wrapper's own source, not the function it wraps (Liger's
        # `@ensure_contiguous` on an autograd forward: the wrapper calls `fn(ctx, *args)`)
        source = textwrap.dedent(inspect.getsource(fn.__code__ if hasattr(fn, "__wrapped__")
                                                   else fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):  # no source (a REPL, exec), or a decorated line
        return None
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, ast.FunctionDef) or fdef.name != code.co_name or not any(
            isinstance(n, (ast.For, ast.If, ast.While, ast.Call, ast.IfExp, ast.BoolOp,
                           ast.Assert)) or isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
            or _dtype_lookup(n) for n in ast.walk(fdef)):
        return None  # (its calls too: `min(n - t, 8)`, or a helper with loops of its own)
    try:
        new = rewrite(fn, source, kernel=False)
    except TraceError:  # `global` in a loop: Python runs it as it is (tile loops refuse there)
        return None

    if generator:
        return new  # (its body runs after the call returns: errors name the tracer's file)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        tr = current()
        outer, tr.file = tr.file, code.co_filename
        try:
            return new(*args, **kwargs)
        finally:
            tr.file = outer

    return run
