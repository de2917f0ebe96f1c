"""`with td.triton_launches():` every Triton launch made inside, `kernel[grid](*args)` of a
`@triton.jit` kernel (autotuned or not), runs through tiledsl instead of Triton: on torch CPU
tensors on the NumPy backend, with its checks (out-of-bounds accesses, races between programs,
reads of unwritten memory), writing its tensors in place as Triton does; on CUDA tensors
through tiledsl's Triton backend.

Nothing is decorated: a library's host code (its wrappers, `torch.autograd.Function`s and
their backwards, modules, host math on what the kernels made) runs as it is, with torch and its
autograd, and only the launches are tiledsl's. Each launch is a small generated tile kernel
that makes that one launch, its arguments the launch's positional arguments and its grid and
keyword arguments constants of it. One is made per kernel, keywords and grid (a grid function
by its code and the values it closes over: `lambda meta: (cdiv(n, meta["BLOCK"]),)` once per
`n`), the last `CACHED` kept, and each traces once per argument layout, as any tile kernel.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import OrderedDict
from typing import Any, Iterator

import numpy as np

from tiledsl.errors import ArgumentError
from tiledsl.runtime.generated import kernel_from_source
from tiledsl.runtime.kernel import TileKernel
from tiledsl.runtime.runner import grad_writes_allowed

CACHED = 256  # launch kernels kept (a grid that closes over a new value each call makes one)
_MADE: OrderedDict[tuple, Any] = OrderedDict()
_COUNT = itertools.count()


@contextlib.contextmanager
def triton_launches() -> Iterator[None]:
    """Run the Triton launches made inside through tiledsl (see the module's docstring)."""
    from triton.runtime.jit import KernelInterface
    saved = KernelInterface.__getitem__

    def getitem(kernel: Any, grid: Any) -> Any:
        return lambda *args, **kwargs: launch(kernel, grid, args, kwargs)
    KernelInterface.__getitem__ = getitem  # type: ignore[method-assign]
    try:
        yield
    finally:
        KernelInterface.__getitem__ = saved  # type: ignore[method-assign]


def launch(kernel: Any, grid: Any, args: tuple, kwargs: dict) -> None:
    """`kernel[grid](*args, **kwargs)` through the tile kernel made for it."""
    key = (kernel, _key(grid, "grid"), tuple(sorted((k, _key(v, k)) for k, v in kwargs.items())),
           len(args))
    made = _MADE.get(key)
    if made is None:
        made = _MADE[key] = _made(kernel, grid, args, kwargs)
        if len(_MADE) > CACHED:
            _MADE.popitem(last=False)
    else:
        _MADE.move_to_end(key)
    with grad_writes_allowed():  # (Triton writes a tensor that requires grad as any other:
        made(*map(_as_triton_types, args))  # a Function's forward or backward writes its
        # inputs' memory)


def _as_triton_types(v: Any) -> Any:
    """A launch's argument as Triton types it: a Python int an int32 where it fits, else an
    int64 (a tile kernel's int argument is an int64: a pointer offset `k * stride` in a loop
    would widen where Triton's stays int32)."""
    if type(v) is int:
        return np.int32(v) if -2**31 <= v < 2**31 else np.int64(v)
    return v


def _key(v: Any, what: str) -> Any:
    """A launch's grid or keyword argument as part of a key: its value; a function, by its
    code and the values it closes over (a grid lambda made per call); a list, its items."""
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, *(_key(x, what) for x in v))
    code = getattr(v, "__code__", None)
    if code is not None:
        cells = tuple(_key(c.cell_contents, what) for c in v.__closure__ or ())
        return ("function", code, cells, _key(v.__defaults__ or (), what))
    try:
        hash(v)
    except TypeError:
        raise ArgumentError(f"a Triton launch's {what} {v!r} is neither a constant nor a "
                            "function of the launch's meta-parameters") from None
    return v


def _made(kernel: Any, grid: Any, args: tuple, kwargs: dict) -> Any:
    """The tile kernel `def launch(a0, a1, ...): KERNEL[GRID](a0, a1, ..., k=KW['k'], ...)`."""
    name = f"{_name(kernel)}_launch"
    params = _params(kernel, len(args))
    keywords = [f"{k}=_td_kw[{k!r}]" for k in kwargs]
    file = f"<tiledsl: a launch of Triton kernel '{name[:-7]}' ({next(_COUNT)})>"
    source = (f"def {name}({', '.join(params)}):\n"
              f"    _td_kernel[_td_grid]({', '.join(params + keywords)})\n")
    return kernel_from_source(TileKernel, name, source, file,
                              {"_td_kernel": kernel, "_td_grid": grid, "_td_kw": dict(kwargs)})


def _params(kernel: Any, n: int) -> list[str]:
    """The launch kernel's parameters: the Triton kernel's first `n` (errors name `out_ptr`),
    else a0, a1, ..."""
    base = kernel
    while not hasattr(base, "arg_names") and getattr(base, "fn", None) is not None:
        base = base.fn
    names = list(getattr(base, "arg_names", None) or ())[:n]
    if len(names) == n and all(isinstance(a, str) and a.isidentifier() and
                               not a.startswith("_td_") for a in names):
        return names
    return [f"a{i}" for i in range(n)]


def _name(kernel: Any) -> str:
    """A Triton kernel's name (an autotuner's or heuristics' is its function's)."""
    name = getattr(kernel, "__name__", None)
    if isinstance(name, str):
        return name
    fn = getattr(kernel, "fn", None)
    return _name(fn) if fn is not None else "kernel"
