"""Lightning Thunder integration: route a torch operation to a tile kernel.

    import thunder
    from tiledsl.interop import thunder as tdt

    ex = tdt.executor()                                   # an OperatorExecutor named "tiledsl"
    tdt.route(ex, torch.nn.functional.layer_norm, layer_norm,
              adapt=lambda x, shape, weight=None, bias=None, eps=1e-5: (x, weight, bias, eps),
              checker=lambda x, shape, weight=None, bias=None, eps=1e-5:
                  weight is not None and bias is not None and len(shape) == 1)
    jitted = thunder.jit(model, executors=[ex, *thunder.get_default_executors()])

`route` registers the kernel as a Thunder operator (`register_operator`; its meta function is
the kernel traced for the proxies' shapes and dtypes) and as an implementation of the torch
operation's Thunder symbol (`register_implementation`), used where `checker` accepts the call
and otherwise left to the next executor. `adapt` maps the torch operation's arguments to the
kernel's. The operator runs the kernel through `k(*args)`: CPU tensors on the NumPy backend,
CUDA tensors on Triton.

Thunder is optional (`pip install "tiledsl[thunder]"`). Thunder 0.2.6 refers, while importing,
to torch's named-tensor methods, which torch 2.13 removed; `import_thunder()` defines those
names as methods that raise, so Thunder imports (Thunder never calls them for plain tensors).
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

from tiledsl import dtypes
from tiledsl.errors import ArgumentError, BackendError, TileDSLError
from tiledsl.ir.types import TensorType
from tiledsl.runtime.kernel import TileKernel
from tiledsl.runtime.returns import pack

_REMOVED_NAMED_TENSOR_METHODS = ("align_as", "align_to", "has_names", "refine_names", "rename")
_executors: dict[str, Any] = {}
_ids = itertools.count()


def import_thunder() -> Any:
    """`import thunder`, after the named-tensor shim; a BackendError if it is not installed."""
    try:
        import torch
    except ImportError:
        raise BackendError("the Thunder executor needs PyTorch: pip install torch") from None
    for attr in _REMOVED_NAMED_TENSOR_METHODS:
        if not hasattr(torch.Tensor, attr):
            setattr(torch.Tensor, attr, _removed(attr))
    try:
        import thunder
    except ImportError:
        raise BackendError("the Thunder executor needs Lightning Thunder: "
                           "pip install 'tiledsl[thunder]'") from None
    return thunder


def _removed(attr: str) -> Callable[..., Any]:
    def method(*_: Any, **__: Any) -> Any:
        raise NotImplementedError(f"torch.Tensor.{attr} was removed from this torch")
    method.__name__ = attr
    method.__qualname__ = f"Tensor.{attr}"
    method.__module__ = "torch"
    return method


def executor(name: str = "tiledsl") -> Any:
    """The Thunder `OperatorExecutor` called `name` (created and registered once)."""
    thunder = import_thunder()
    if name not in _executors:
        from thunder.extend import OperatorExecutor, register_executor

        from tiledsl.version import __version__
        ex = OperatorExecutor(name, version=__version__)
        register_executor(ex)
        _executors[name] = ex
    del thunder
    return _executors[name]


def route(ex: Any, torch_fn: Callable[..., Any], kernel: TileKernel, *,
          adapt: Callable[..., tuple] | None = None,
          checker: Callable[..., bool] | None = None) -> Any:
    """Execute `torch_fn` (e.g. `torch.nn.functional.layer_norm`) with `kernel` in Thunder
    programs using executor `ex`. Returns the registered Thunder operator."""
    thunder = import_thunder()
    import thunder.torch as ltorch
    from thunder.core import dtypes as thunder_dtypes
    from thunder.core.proxies import TensorProxy

    if not isinstance(kernel, TileKernel):
        raise ArgumentError(f"route takes a @td.tile_kernel, got {type(kernel).__name__}")
    symbol = ltorch._torch_to_thunder_function_map.get(torch_fn)
    if symbol is None:
        raise ArgumentError(f"Thunder has no symbol for {torch_fn!r}; pass a torch function "
                            "Thunder traces (torch.nn.functional.*, torch.*)",
                            kernel=kernel.name)
    params = list(kernel.signature.parameters)
    adapt = adapt or (lambda *a, **k: a)

    def spec_of(name: str, a: Any) -> tuple:
        if isinstance(a, TensorProxy):
            torch_dtype = thunder_dtypes.to_torch_dtype(a.dtype)
            d = dtypes.from_any(str(torch_dtype).rsplit(".", 1)[-1])
            if d is None:
                raise ArgumentError(f"argument '{name}' has unsupported dtype {a.dtype}",
                                    kernel=kernel.name)
            return ("tensor", tuple(int(s) for s in a.shape), d.short)
        return kernel.specs.of(name, a)

    def meta(*args: Any) -> Any:
        spec = tuple(spec_of(n, a) for n, a in zip(params, args))
        traced = kernel.traces.get(spec).only_arguments("a Thunder op")
        fn = traced.ir
        device = next(a.device for a in args if isinstance(a, TensorProxy))
        outs = []
        for v in fn.outputs:
            t = v.type
            assert isinstance(t, TensorType)
            torch_dtype = getattr(__import__("torch"), t.dtype.name)
            outs.append(TensorProxy(shape=t.shape, device=device,
                                    dtype=thunder_dtypes.to_dtype(torch_dtype)))
        return pack(outs, traced.returns)

    def impl(*args: Any) -> Any:
        return kernel(*args)

    op = ex.register_operator(f"tiledsl_{kernel.name}_{next(_ids)}", meta=meta, fn=impl)

    def run(*args: Any, **kwargs: Any) -> Any:
        return op(*adapt(*args, **kwargs))

    def _check_results(kernel_args: tuple, args: tuple, kwargs: dict[str, Any]) -> None:
        """The kernel must give what the torch operation gives (shapes and dtypes): an `adapt`
        or `checker` that lets another call through would change the program's results."""
        from thunder.core.trace import detached_trace
        with detached_trace():
            want, got = symbol.meta(*args, **kwargs), meta(*kernel_args)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        shown = [[(tuple(int(n) for n in t.shape), str(t.dtype).rsplit(".", 1)[-1])
                  if isinstance(t, TensorProxy) else t for t in ts] for ts in (want, got)]
        if shown[0] != shown[1]:
            raise ArgumentError(f"routed from {symbol.name}, the kernel would return "
                                f"{_describe(shown[1])} where {symbol.name} returns "
                                f"{_describe(shown[0])}; make `checker` refuse this call or "
                                "`adapt` map it to the kernel's arguments", kernel=kernel.name)

    def accepts(*args: Any, **kwargs: Any) -> bool:
        if checker is not None and not checker(*args, **kwargs):
            return False
        try:  # the kernel must trace for these shapes and dtypes
            kernel_args = adapt(*args, **kwargs)
            kernel.traces.get(tuple(spec_of(n, a) for n, a in zip(params, kernel_args)))
        except TileDSLError:
            return False
        _check_results(kernel_args, args, kwargs)
        return True

    ex.register_implementation(symbol, checker=accepts, execution_transform=run)
    del thunder
    return op


def _describe(results: list[Any]) -> str:
    """(shape, dtype) pairs as dtype[shape]; anything else as itself."""
    return ", ".join(f"{r[1]}{list(r[0])}" if isinstance(r, tuple) else repr(r) for r in results)
