"""The Thunder executor routes torch operations to tile kernels (skipped without Thunder)."""

from __future__ import annotations

import numpy as np
import pytest

from support import example

torch = pytest.importorskip("torch")
tdt = pytest.importorskip("tiledsl.interop.thunder")
try:
    thunder = tdt.import_thunder()
except Exception as e:  # noqa: BLE001 - any import failure means: not installed here
    pytest.skip(f"Thunder does not import here: {e}", allow_module_level=True)

F = torch.nn.functional


def layer_norm_args(x, shape, weight=None, bias=None, eps=1e-5):  # type: ignore[no-untyped-def]
    return (x, weight, bias, eps)


def layer_norm_ok(x, shape, weight=None, bias=None, eps=1e-5):  # type: ignore[no-untyped-def]
    return weight is not None and bias is not None and len(shape) == 1


def test_layer_norm_runs_on_the_kernel() -> None:
    ex = tdt.executor()
    op = tdt.route(ex, F.layer_norm, example("layer_norm").layer_norm, adapt=layer_norm_args,
                   checker=layer_norm_ok)

    def model(x, w, b):  # type: ignore[no-untyped-def]
        return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5) * 2

    x, w, b = (torch.randn(37, 203), torch.randn(203), torch.randn(203))
    jitted = thunder.jit(model, executors=[ex, *thunder.get_default_executors()])
    torch.testing.assert_close(jitted(x, w, b), model(x, w, b), rtol=1e-4, atol=1e-4)
    trace = str(thunder.last_traces(jitted)[-1])
    assert op.name in trace

    # a call the checker refuses (no weight) stays with torch
    def plain(x):  # type: ignore[no-untyped-def]
        return F.layer_norm(x, (x.shape[-1],))
    jitted = thunder.jit(plain, executors=[ex, *thunder.get_default_executors()])
    torch.testing.assert_close(jitted(x), plain(x))
    assert op.name not in str(thunder.last_traces(jitted)[-1])


def test_matmul_routes_and_keeps_dtypes() -> None:
    ex = tdt.executor("tiledsl-matmul")
    op = tdt.route(ex, torch.matmul, example("matmul").matmul,
                   checker=lambda a, b: a.ndim == 2 and b.ndim == 2)
    a = torch.randn(65, 31, dtype=torch.float64)
    b = torch.randn(31, 17, dtype=torch.float64)
    jitted = thunder.jit(lambda a, b: torch.matmul(a, b) + 1,
                         executors=[ex, *thunder.get_default_executors()])
    out = jitted(a, b)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, a @ b + 1)
    assert op.name in str(thunder.last_traces(jitted)[-1])


def test_routing_something_thunder_does_not_trace_is_a_clear_error() -> None:
    import tiledsl as td
    with pytest.raises(td.ArgumentError, match="Thunder has no symbol"):
        tdt.route(tdt.executor(), np.matmul, example("matmul").matmul)


def test_a_route_whose_kernel_returns_another_shape_is_a_clear_error() -> None:
    """The checker lets keepdim=True through: the kernel's (4,) would replace torch's (4, 1)."""
    import tiledsl as td
    ex = tdt.executor("tiledsl-row-sum")
    tdt.route(ex, torch.sum, example("row_sum").row_sum, adapt=lambda x, dim=None, *_, **__: (x,),
              checker=lambda x, dim=None, *_, **__: dim in (1, -1))
    executors = [ex, *thunder.get_default_executors()]
    x = torch.randn(4, 5)
    rows = thunder.jit(lambda x: torch.sum(x, 1), executors=executors)
    torch.testing.assert_close(rows(x), x.sum(1))
    kept = thunder.jit(lambda x: torch.sum(x, 1, keepdim=True), executors=executors)
    with pytest.raises(td.ArgumentError, match=r"in kernel 'row_sum': routed from sum, the "
                       r"kernel would return float32\[4\] where sum returns float32\[4, 1\]"):
        kept(x)
