"""attorch's host idioms (BobMcDear/attorch, probed layer by layer): a layer called as an
`nn.Module`, a device query in a `@triton.heuristics` lambda and Triton's driver asked for its
target, `torch.autocast(dtype=x.dtype)`, `kernel.best_config` after an autotuned launch, a module's
parameter handed to its launch (read on every call), an int
argument as `dim=`, host math on 0-d results (`output /= sum_weights`), a 0-d gradient
flattened into a pointer, a float16 sum's dtype, `x.requires_grad` (the call's: a trace for
each answer), and a tensor an object kept from an earlier trace."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import gpu_backend, has_gpu, run_on
from tiledsl.errors import ArgumentError, TraceError

torch = pytest.importorskip("torch")
F = torch.nn.functional
triton = pytest.importorskip("triton")
tl = triton.language


def allow_tf32() -> bool:  # attorch/utils.py: asked inside a heuristic's lambda
    return torch.cuda.get_device_capability()[0] >= 8


@triton.heuristics({"twice": lambda _: allow_tf32()})
@triton.jit
def _scale(X, Y, n, twice: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    if twice:
        x = x * 2
    tl.store(Y + offs, x, mask=offs < n)


class Scale(torch.nn.Module):
    def forward(self, x):  # torch's Module.__call__ would run this without the rewrite
        y = torch.empty_like(x)
        _scale[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
        return y


LAYER = Scale()


@td.tile_kernel
def layered(x, dim: int):
    hip = triton.runtime.driver.active.get_current_target().backend == "hip"
    with torch.autocast("cuda", dtype=x.dtype):
        y = LAYER(x)
    first, second = y.chunk(2, dim=dim)
    return (first - second) if not hip else first


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})],
                 key=["n"])
@triton.jit
def _partial_sums(X, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + tl.program_id(0), tl.sum(tl.load(X + offs, mask=offs < n, other=0.0)))


@td.tile_kernel
def weighted_mean(x, w):
    """attorch's p-loss and NLL forwards: partial sums per program, summed on the host."""
    n = x.numel()
    partial = torch.empty(triton.cdiv(n, 32), dtype=x.dtype, device=x.device)
    _partial_sums[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, partial, n)
    block = _partial_sums.best_config.kwargs["BLOCK"]
    output = partial[:triton.cdiv(n, block)].sum()
    output /= w.sum()
    return output


@triton.jit
def _scaled_by(G, X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    g = tl.load(G)
    tl.store(Y + offs, g * tl.load(X + offs, mask=offs < n), mask=offs < n)


@td.tile_kernel
def backward_of_mean(output_grad, x):
    """attorch's p-loss backward: a 0-d gradient, flattened, read through its pointer."""
    output_grad = output_grad.flatten()
    y = torch.empty_like(x)
    _scaled_by[(triton.cdiv(x.numel(), 64),)](output_grad, x, y, x.numel(), BLOCK=64)
    return y if not x.requires_grad else None


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_attorch_host_idioms(backend: str) -> None:
    x = np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)
    for dim in (0, 1):  # an int argument as dim=: traced as that int
        first, second = np.split(x.astype(np.float64) * 2, 2, axis=dim)  # twice: sm_80 and up
        np.testing.assert_allclose(run_on(layered, (x, dim), backend), first - second,
                                   rtol=1e-6, atol=1e-6)
    v, w = x.reshape(-1)[:37].copy(), np.full(5, 0.25, np.float32)
    np.testing.assert_allclose(run_on(weighted_mean, (v, w), backend),
                               v.astype(np.float64).sum() / 1.25, rtol=1e-5)
    g = np.array(1.5, np.float32)
    np.testing.assert_allclose(run_on(backward_of_mean, (g, v), backend), 1.5 * v, rtol=1e-6)


def test_host_dtypes_and_refusals() -> None:
    half = torch.full((10, 10), 1.5, dtype=torch.float16)
    total = weighted_mean(half.reshape(-1), torch.ones(2, dtype=torch.float16))
    assert total.dtype == torch.float16 and float(total) == 75.0  # torch's sum keeps float16
    grad = torch.ones(37, requires_grad=True)  # x.requires_grad is the call's: a trace each
    assert backward_of_mean(torch.tensor(1.0), grad) is None
    assert backward_of_mean(torch.tensor(1.0), grad.detach()) is not None


@triton.jit
def _times(X, W, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(Y + offs, tl.load(X + offs, mask=m) * tl.load(W + offs, mask=m), mask=m)


class Weighted(torch.nn.Module):
    """attorch's LayerNorm: the forward hands its own parameter to the launch."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.arange(n, dtype=torch.float32))

    def forward(self, x):
        y = torch.empty_like(x)
        _times[(triton.cdiv(x.numel(), 64),)](x, self.weight, y, x.numel(), BLOCK=64)
        return y


WEIGHTED = Weighted(100)


@td.tile_kernel
def weighted(x):
    return WEIGHTED(x)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_modules_parameter_is_read_on_every_call(backend: str, tmp_path) -> None:
    x = np.random.default_rng(1).standard_normal(100).astype(np.float32)
    w = WEIGHTED.weight.detach().numpy().copy()
    np.testing.assert_allclose(weighted.run(x, backend=backend), x * w, rtol=1e-6)
    with torch.no_grad():
        WEIGHTED.weight.mul_(-2)  # an optimizer's step: in place, seen by the next call
    try:
        np.testing.assert_allclose(weighted.run(x, backend=backend), -2 * x * w, rtol=1e-6)
    finally:
        with torch.no_grad():
            WEIGHTED.weight.div_(-2)
    with pytest.raises(TraceError, match="a package passes only the kernel's arguments"):
        weighted.export(tmp_path / "pkg", x)


@td.tile_kernel
def conv_bias(x):
    """attorch's Conv2d: `output += bias.view(1, -1, 1, 1)` of its own parameter, in host code."""
    output = torch.empty_like(x)
    output.copy_(x)
    output += WEIGHTED.weight[:x.shape[1]].view(1, -1, 1, 1)
    return output


def test_a_parameter_in_host_math() -> None:
    x = torch.randn(2, 7, 3, 4)
    bias = WEIGHTED.weight.detach()[:7].view(1, -1, 1, 1)
    torch.testing.assert_close(conv_bias(x), x + bias)


LINEAR = torch.nn.Linear(129, 45)


class Shifted(torch.nn.Module):
    """Liger's PolyNorm: a 0-d parameter, `nn.Parameter(torch.tensor(1.0))`, handed to its launch."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.tensor(1.5))

    def forward(self, x):
        y = torch.empty_like(x)
        _scaled_by[(triton.cdiv(x.numel(), 64),)](self.bias, x, y, x.numel(), BLOCK=64)
        return y


SHIFTED = Shifted()


@td.tile_kernel
def liger_layers(x, v):
    """Liger's SwiGLU MLP runs `nn.Linear` in its forward (F.linear in host code); its fused
    linear JSD takes `torch.log_softmax(x, dim=-1)` of a host tensor."""
    return LINEAR(x), SHIFTED(v), torch.log_softmax(x, dim=-1), F.softmax(x.half(), dim=1)


def test_liger_module_idioms() -> None:
    x, v = torch.randn(3, 13, 129), torch.randn(37)
    y, shifted, logp, p = liger_layers(x, v)
    want = x.double() @ LINEAR.weight.detach().double().T + LINEAR.bias.detach().double()
    torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(shifted, 1.5 * v)
    torch.testing.assert_close(logp.double(), torch.log_softmax(x.double(), -1), rtol=1e-6,
                               atol=1e-6)
    assert p.dtype == torch.float16  # computed in float32, as torch's
    torch.testing.assert_close(p.double(), torch.softmax(x.half().double(), 1), rtol=2e-3,
                               atol=1e-3)


def test_a_modules_state_is_read_on_every_call() -> None:
    """attorch's BatchNorm branches on `self.training` and reads `self.momentum`: a module is
    keyed by its state, not only its identity (frontend/reads.py)."""
    layer = Weighted(100)

    @td.tile_kernel
    def scaled(x):
        y = layer(x)
        return y * (2.0 if layer.training else 3.0) + layer.shift

    layer.shift = 1.0
    x = torch.ones(100)
    w = layer.weight.detach()
    torch.testing.assert_close(scaled(x), w * 2 + 1)
    layer.eval()
    torch.testing.assert_close(scaled(x), w * 3 + 1)
    layer.shift = 5.0
    torch.testing.assert_close(scaled(x), w * 3 + 5)
    layer.weight = torch.nn.Parameter(torch.full((100,), 7.0))  # rebound: another trace
    torch.testing.assert_close(scaled(x), torch.full((100,), 26.0))


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU")
def test_a_modules_parameter_on_the_gpu() -> None:
    layer = Weighted(100).cuda()

    @td.tile_kernel
    def on_gpu(x):
        return layer(x)

    x = torch.randn(100, device="cuda")
    torch.testing.assert_close(on_gpu(x), x * layer.weight.detach())
    with pytest.raises(ArgumentError, match="is off the GPU"):
        weighted(x)  # WEIGHTED's parameter lives on the CPU


class Cached(torch.nn.Module):
    """attorch's AvgPool: `self.kernel = torch.full(...)` made on the first forward, kept."""

    def __init__(self) -> None:
        super().__init__()
        self.kernel = None

    def forward(self, x):
        if self.kernel is None:
            self.kernel = torch.full((1,), 0.5, dtype=x.dtype, device=x.device)
        y = torch.empty_like(x)
        _scaled_by[(triton.cdiv(x.numel(), 64),)](self.kernel, x, y, x.numel(), BLOCK=64)
        return y


CACHED = Cached()


@td.tile_kernel
def cached(x):
    return CACHED(x)


def test_a_tensor_kept_from_an_earlier_trace_is_named() -> None:
    assert torch.equal(cached(torch.ones(10)), torch.full((10,), 0.5))
    with pytest.raises(TraceError, match="is a tensor of an earlier trace of this kernel"):
        cached(torch.ones(20))  # another shape: another trace, reading the first one's tensor
