"""Kernels whose outputs torch differentiates (tiledsl/runtime/differentiable.py): a kernel
returning a `torch.autograd.Function`'s `apply` (Liger's entry points, a TritonBench test's
`out.sum().backward()`) has that Function's backward, run as a second kernel that recomputes
the forward. Checked against float64 torch autograd on ragged shapes."""

from __future__ import annotations

import pytest
from support import gpu_backend

import tiledsl as td

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = triton.language


@triton.jit
def _rms_fwd(X, W, Y, RSTD, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    rstd = 1 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(RSTD + row, rstd)
    tl.store(Y + row * n_cols + cols, x * rstd * tl.load(W + cols, mask=mask), mask=mask)


@triton.jit
def _rms_bwd(DY, X, W, RSTD, DX, DW_ROWS, n_cols, BLOCK: tl.constexpr, HAS_DW: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    dy = tl.load(DY + row * n_cols + cols, mask=mask, other=0.0)
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    w = tl.load(W + cols, mask=mask, other=0.0)
    rstd = tl.load(RSTD + row)
    xhat = x * rstd
    dxhat = dy * w
    dx = rstd * (dxhat - xhat * tl.sum(dxhat * xhat, axis=0) / n_cols)
    tl.store(DX + row * n_cols + cols, dx, mask=mask)
    if HAS_DW:
        tl.store(DW_ROWS + row * n_cols + cols, dy * xhat, mask=mask)


NEEDS: set[tuple[bool, ...]] = set()  # the `ctx.needs_input_grad` RMSNorm's backward saw


class RMSNorm(torch.autograd.Function):
    """Liger's shape of Function: forward saves the inputs and a per-row statistic, backward
    asks `ctx.needs_input_grad` whether to compute the weight's gradient."""

    @staticmethod
    def forward(ctx, x, w, eps):
        rows, cols = x.shape
        y = torch.empty_like(x)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        block = triton.next_power_of_2(cols)
        _rms_fwd[(rows,)](x, w, y, rstd, cols, eps, BLOCK=block)
        ctx.save_for_backward(x, w, rstd)
        ctx.block = block
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w, rstd = ctx.saved_tensors
        rows, cols = x.shape
        dx = torch.empty_like(x)
        NEEDS.add(tuple(ctx.needs_input_grad))
        has_dw = ctx.needs_input_grad[1]
        dw_rows = torch.empty_like(x) if has_dw else dx
        _rms_bwd[(rows,)](dy, x, w, rstd, dx, dw_rows, cols, BLOCK=ctx.block, HAS_DW=has_dw)
        return dx, dw_rows.sum(0) if has_dw else None, None


@td.tile_kernel
def rms_norm(x, w):
    return RMSNorm.apply(x, w, 1e-6)


@td.tile_kernel
def rms_norm_and_none(x, w):
    return RMSNorm.apply(x, w, 1e-6), None


def _reference(x, w, dy):
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    y = x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + 1e-6) * w64
    return (y, *torch.autograd.grad(y, (x64, w64), dy.double()))


@pytest.mark.parametrize("device", ["cpu", gpu_backend()])
def test_backward_of_a_functions_apply(device: str) -> None:
    """`loss.backward()` through the kernel's output reaches both arguments' `.grad`."""
    on = "cuda" if device == "triton-gpu" else "cpu"
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, 37, generator=gen).to(on).requires_grad_()
    w = torch.randn(37, generator=gen).to(on).requires_grad_()
    dy = torch.randn(5, 37, generator=gen).to(on)
    y = rms_norm(x, w)
    assert y.requires_grad and y.grad_fn is not None
    (y * dy).sum().backward()
    want_y, want_dx, want_dw = _reference(x.cpu(), w.cpu(), dy.cpu())
    for got, want in ((y, want_y), (x.grad, want_dx), (w.grad, want_dw)):
        torch.testing.assert_close(got.detach().cpu().double(), want, rtol=2e-5, atol=2e-5)


@td.tile_kernel
def rms_norm_of_cast(x, w):
    return RMSNorm.apply(x.to(torch.float64), w.double(), 1e-6)  # (mamba3 casts Q to bf16)


def test_a_gradient_reaches_an_argument_through_a_host_cast() -> None:
    """The apply's inputs are casts of the arguments: the gradients reach the arguments, in
    their dtype, as torch's autograd takes them through `x.to(dtype)`."""
    gen = torch.Generator().manual_seed(5)
    x, w = torch.randn(4, 19, generator=gen), torch.randn(19, generator=gen)
    x.requires_grad_(), w.requires_grad_()
    dy = torch.randn(4, 19, generator=gen, dtype=torch.float64)
    y = rms_norm_of_cast(x, w)
    assert y.dtype == torch.float64
    y.backward(dy)
    want_y, want_dx, want_dw = _reference(x, w, dy)
    assert x.grad.dtype == w.grad.dtype == torch.float32
    torch.testing.assert_close(y.detach(), want_y.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x.grad.double(), want_dx, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(w.grad.double(), want_dw, rtol=1e-6, atol=1e-6)


@td.tile_kernel
def rms_norm_doubled(x, w):
    return RMSNorm.apply(x, w, 1e-6) * 2  # (host math on the output: fast_ce_loss's `/ n`)


def test_outputs_that_are_not_one_applys_say_so() -> None:
    x = torch.randn(3, 20, requires_grad=True)
    with pytest.warns(td.TileDSLWarning, match=r"calls RMSNorm.apply, but its outputs are not"):
        y = rms_norm_doubled(x, torch.randn(20))
    assert y.grad_fn is None


def test_only_the_inputs_that_need_a_gradient_get_one() -> None:
    """A weight without grad: the backward is traced with `needs_input_grad[1]` False (its
    gradient is not computed) and torch gets None for it."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 20, generator=gen, requires_grad=True)
    w = torch.randn(20, generator=gen)
    dy = torch.randn(3, 20, generator=gen)
    (dx,) = torch.autograd.grad(rms_norm(x, w), (x,), dy)
    torch.testing.assert_close(dx.double(), _reference(x, w, dy)[1], rtol=2e-5, atol=2e-5)
    assert w.grad is None and (True, False, False) in NEEDS


def test_none_beside_the_output_and_an_expanded_gradient() -> None:
    """A None returned beside the tensor (fla's `return o, final_state`), and `y.sum()`'s
    gradient, a stride-0 expanded tensor, which the backward kernel gets contiguous (a Triton
    backward indexing it as contiguous reads past it on a GPU)."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 9, generator=gen, requires_grad=True)
    w = torch.randn(9, generator=gen, requires_grad=True)
    y, none = rms_norm_and_none(x, w)
    assert none is None
    y.sum().backward()
    _, want_dx, want_dw = _reference(x, w, torch.ones(4, 9))
    torch.testing.assert_close(x.grad.double(), want_dx, rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(w.grad.double(), want_dw, rtol=2e-5, atol=2e-5)


@triton.jit
def _silu_mul_fwd(A, B, C, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(A + offs, mask=m)
    tl.store(C + offs, a * tl.sigmoid(a) * tl.load(B + offs, mask=m), mask=m)


@triton.jit
def _silu_mul_bwd(DC, A, B, n, BLOCK: tl.constexpr):
    """Liger's swiglu backward: the gradients written over the inputs."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    dc, a, b = tl.load(DC + offs, mask=m), tl.load(A + offs, mask=m), tl.load(B + offs, mask=m)
    s = tl.sigmoid(a)
    tl.store(A + offs, dc * b * (s + a * s * (1 - s)), mask=m)
    tl.store(B + offs, dc * a * s, mask=m)


class SiluMul(torch.autograd.Function):
    """The `setup_context` style, with a backward that writes into the saved inputs."""

    @staticmethod
    def forward(a, b):
        c = torch.empty_like(a)
        _silu_mul_fwd[(triton.cdiv(a.numel(), 16),)](a, b, c, a.numel(), BLOCK=16)
        return c

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        _silu_mul_bwd[(triton.cdiv(a.numel(), 16),)](dc, a, b, a.numel(), BLOCK=16)
        return a, b


@td.tile_kernel
def silu_mul(a, b):
    return SiluMul.apply(a, b)


def test_setup_context_style_and_a_backward_writing_its_inputs() -> None:
    """As Liger's swiglu: the gradients are written over the saved inputs (which the user's
    tensors then hold, as with Liger itself) and returned."""
    gen = torch.Generator().manual_seed(2)
    a0, b0, dc = (torch.randn(29, generator=gen) for _ in range(3))
    a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    c = silu_mul(a, b)
    c.backward(dc)
    a64, b64 = a0.double().requires_grad_(), b0.double().requires_grad_()
    want = torch.nn.functional.silu(a64) * b64
    want_da, want_db = torch.autograd.grad(want, (a64, b64), dc.double())
    torch.testing.assert_close(c.detach().double(), want.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(a.grad.double(), want_da, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(b.grad.double(), want_db, rtol=1e-5, atol=1e-6)


FORWARD_NEEDS: list[tuple[bool, ...]] = []  # the `ctx.needs_input_grad` forwards saw


class SavedIfNeeded(torch.autograd.Function):
    """mamba3's shape: the forward saves its inputs only where `any(ctx.needs_input_grad)`."""

    @staticmethod
    def forward(ctx, a, b):
        FORWARD_NEEDS.append(tuple(ctx.needs_input_grad))
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(a, b)
        return SiluMul.forward(a, b)

    backward = SiluMul.backward


@td.tile_kernel
def silu_mul_if_needed(a, b):
    return SavedIfNeeded.apply(a, b)


def test_needs_input_grad_in_the_forward() -> None:
    """The forward's `ctx.needs_input_grad` is the call's (its trace is per answer)."""
    gen = torch.Generator().manual_seed(4)
    a0, b0, dc = (torch.randn(21, generator=gen) for _ in range(3))
    FORWARD_NEEDS.clear()
    plain = silu_mul_if_needed(a0, b0)
    assert plain.grad_fn is None and FORWARD_NEEDS == [(False, False)]
    a = a0.clone().requires_grad_()
    silu_mul_if_needed(a, b0.clone()).backward(dc)  # (the backward writes over its inputs)
    a64 = a0.double().requires_grad_()
    (want,) = torch.autograd.grad(torch.nn.functional.silu(a64) * b0.double(), (a64,),
                                  dc.double())
    torch.testing.assert_close(a.grad.double(), want, rtol=1e-5, atol=1e-6)
    assert (True, False) in FORWARD_NEEDS
    torch.testing.assert_close(silu_mul_if_needed(a0, b0), plain)  # the first trace again


class WithState(torch.autograd.Function):
    """fla's fused_recurrent_delta shape: an optional initial state saved as None, outputs the
    wrapper unpacks (`o, final_state = Fn.apply(...)`) before returning them."""

    @staticmethod
    def forward(ctx, a, b, initial=None):
        FORWARD_NEEDS.append(tuple(ctx.needs_input_grad))  # (each forward traced)
        ctx.save_for_backward(a, b, initial)
        return SiluMul.forward(a, b), None

    @staticmethod
    def backward(ctx, dc, d_final):
        a, b, initial = ctx.saved_tensors
        assert initial is None
        _silu_mul_bwd[(triton.cdiv(a.numel(), 16),)](dc, a, b, a.numel(), BLOCK=16)
        return a, b, None


@td.tile_kernel
def with_state(a, b):
    o, final_state = WithState.apply(a, b, None)
    return o, final_state


def test_a_replayed_context_with_none_and_unpacked_outputs() -> None:
    """The backward rebuilds the context (None included) and runs no forward; the wrapper's
    unpacking of the apply's outputs gets stand-ins of their shapes."""
    gen = torch.Generator().manual_seed(6)
    a0, b0, dc = (torch.randn(23, generator=gen) for _ in range(3))
    a = a0.clone().requires_grad_()
    FORWARD_NEEDS.clear()
    o, final_state = with_state(a, b0.clone())
    assert final_state is None
    o.backward(dc)
    assert FORWARD_NEEDS.count((True, False, False)) == 1  # (the backward ran no forward)
    a64 = a0.double().requires_grad_()
    (want,) = torch.autograd.grad(torch.nn.functional.silu(a64) * b0.double(), (a64,),
                                  dc.double())
    torch.testing.assert_close(a.grad.double(), want, rtol=1e-5, atol=1e-6)


@triton.jit
def _half_square_sum(X, LOSS, n, BLOCK: tl.constexpr):
    """loss = sum(x^2) / 2, and x's gradient (x itself) stored over x, as Liger's cross
    entropy stores its gradient into the logits."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0)
    tl.store(LOSS, tl.sum(x * x, axis=0) / 2)
    tl.store(X + offs, x, mask=offs < n)


@triton.jit
def _scale(X, G, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(X + offs, tl.load(X + offs, mask=offs < n) * tl.load(G), mask=offs < n)


class HalfSquareSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        loss = torch.zeros((), dtype=torch.float32, device=x.device)
        _half_square_sum[(1,)](x, loss, x.numel(), BLOCK=64)
        ctx.save_for_backward(x.detach())
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        _scale[(1,)](grad, grad_output, grad.numel(), BLOCK=64)
        return grad


@td.tile_kernel
def half_square_sum(x):
    return HalfSquareSum.apply(x)


def test_a_forward_writing_its_input_saves_it_for_backward() -> None:
    """Liger's cross entropy's shape: the forward writes the gradient into the input (which
    requires grad) and saves it; the backward scales it by the 0-d loss's gradient. The
    context is the argument alone, so the backward runs without the forward."""
    x = torch.linspace(-1, 2, 37).requires_grad_()
    loss = half_square_sum(x)
    assert loss.shape == ()
    (3 * loss).backward()
    want = torch.linspace(-1, 2, 37, dtype=torch.float64)
    torch.testing.assert_close(loss.detach().double(), (want * want).sum() / 2)
    torch.testing.assert_close(x.grad.double(), 3 * want)


class Counted(torch.autograd.Function):
    """A forward that writes into a buffer argument (a counter) and saves what it made."""

    @staticmethod
    def forward(ctx, x, count):
        y = torch.empty_like(x)
        _silu_mul_fwd[(triton.cdiv(x.numel(), 16),)](x, x, y, x.numel(), BLOCK=16)
        count += 1
        ctx.save_for_backward(y)  # (made by the forward: the backward must run it again)
        return y

    @staticmethod
    def backward(ctx, dy):
        raise AssertionError("not reached: the kernel's backward is refused first")


@td.tile_kernel
def counted(x, count):
    return Counted.apply(x, count)


@td.tile_kernel
def doubled(a, b):
    return SiluMul.apply(a, b) * 2


def test_what_has_no_backward() -> None:
    """A forward that writes an argument cannot be run again by its backward: a clear error
    when the gradient is asked for. An output changed after the apply is not one Function's:
    not differentiable, as before."""
    x = torch.randn(10, requires_grad=True)
    y = counted(x, torch.zeros(1))
    with pytest.raises(td.TraceError, match=r"kernel 'counted' writes its argument count: its "
                       r"backward, which runs the forward again"):
        y.sum().backward()
    assert not doubled(x, torch.randn(10)).requires_grad


class GradsInForward(torch.autograd.Function):
    """Liger's fused linear cross entropy's shape: the forward computes the gradients itself,
    only for the inputs that require grad, and saves them; its loss is 0-d."""

    @staticmethod
    def forward(ctx, x, b):
        gx = x * 2 if x.requires_grad else torch.zeros_like(x)
        ctx.save_for_backward(gx)
        return (x * x).sum() + b

    @staticmethod
    def backward(ctx, grad_output):
        (gx,) = ctx.saved_tensors
        if torch.equal(grad_output, torch.tensor(1.0, device=grad_output.device)):
            return gx, grad_output
        return grad_output * gx, grad_output  # (JSD's: a 0-d gradient times a saved tensor)


@td.tile_kernel
def grads_in_forward(x, b):
    return GradsInForward.apply(x, b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_requires_grad_in_the_recomputed_forward_and_a_0d_argument(dtype: str) -> None:
    """The backward's run of the forward sees `x.requires_grad` as the call had it (else the
    saved gradient is zeros: a silent wrong answer); a 0-d tensor argument (PolyNorm's bias)
    gets its gradient; a 0-d gradient of any value (its `torch.equal` reads it, bfloat16 too)
    multiplies a saved tensor in host code."""
    dt = getattr(torch, dtype)
    x = torch.linspace(-1, 1, 37).to(dt).requires_grad_()
    b = torch.tensor(0.5, dtype=dt, requires_grad=True)
    for weight in (1.0, 3.0):
        gx, gb = torch.autograd.grad(grads_in_forward(x, b) * weight, (x, b))
        torch.testing.assert_close(gx.float(), (2 * weight * x.detach()).float().to(dt).float(),
                                   rtol=1e-2, atol=1e-2)
        assert gb.shape == () and float(gb) == weight
