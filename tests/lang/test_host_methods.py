"""torch's method and function spellings of host math (tiledsl/lang/host_methods.py), as the
wrappers of fla (prepare_lens, retention's decay, fused KL divergence), Unsloth (cross
entropy's count, LoRA's matmul into `out` and `addmm_`) and vLLM write them, against torch
on the CPU in float64 where it rounds."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import run_on

torch = pytest.importorskip("torch")


@td.tile_kernel
def index_math(cu, labels, q):
    lens = torch.diff(cu)  # fla's prepare_lens
    chunks = (lens + 3).div(4, rounding_mode="floor")
    trunc = (lens - 7).div(4, rounding_mode="trunc")
    counted = torch.count_nonzero(labels != -100)  # Unsloth's n_items
    total = labels.ne(-100).sum()  # fla's fused linear cross entropy
    decay = (1 - q.new_tensor(2.0).pow(-5.0 - q.new_tensor(range(3)))).log()  # fla's retention
    return lens, chunks, trunc, counted, total, decay, q.reshape_as(q.T.contiguous())


@td.tile_kernel
def lora_products(x, w, a, b, scale: float):
    out = torch.matmul(x, w.t(), out=None)  # Unsloth's LoRA: torch_matmul(X, W.t(), out=out)
    with torch.cuda._DeviceGuard(0):  # (FlagGems' pow, on any machine)
        torch.mm(x, w.t(), out=out)  # (TritonBench's matmul_dequantize)
    out.addmm_(x @ a, b, alpha=scale)
    dw = torch.zeros((w.shape[1], w.shape[1]), dtype=w.dtype)
    torch.addmm(input=dw, mat1=x.t(), mat2=x, out=dw)  # fla's fused KL divergence
    return out, dw.add(dw, alpha=0.5).sub(1.0)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_index_math_spellings(backend: str) -> None:
    cu = np.array([0, 5, 6, 12, 37], np.int32)
    labels = np.array([1, -100, 3, -100, -100, 7], np.int64)
    q = np.random.default_rng(77).standard_normal((2, 5)).astype(np.float32)
    lens, chunks, trunc, counted, total, decay, reshaped = run_on(index_math, (cu, labels, q),
                                                                  backend)
    t = torch.from_numpy(cu)
    np.testing.assert_array_equal(lens, torch.diff(t))
    np.testing.assert_array_equal(chunks, (torch.diff(t) + 3).div(4, rounding_mode="floor"))
    np.testing.assert_array_equal(trunc, (torch.diff(t) - 7).div(4, rounding_mode="trunc"))
    assert counted == 3 and total == 3 and np.asarray(counted).dtype == np.int64
    want = np.log(1 - 2.0 ** (-5.0 - np.arange(3.0)))
    np.testing.assert_allclose(decay, want, rtol=1e-6)
    np.testing.assert_array_equal(reshaped, q.reshape(5, 2))


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_matmul_into_out_and_addmm(backend: str) -> None:
    rng = np.random.default_rng(78)
    x, w = rng.standard_normal((9, 6)), rng.standard_normal((7, 6))
    a, b = rng.standard_normal((6, 3)), rng.standard_normal((3, 7))
    x, w, a, b = (v.astype(np.float32) for v in (x, w, a, b))
    out, dw = run_on(lora_products, (x, w, a, b, 0.5), backend)
    x64, w64, a64, b64 = (v.astype(np.float64) for v in (x, w, a, b))
    np.testing.assert_allclose(out, x64 @ w64.T + 0.5 * (x64 @ a64) @ b64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, 1.5 * (x64.T @ x64) - 1.0, rtol=1e-5, atol=1e-5)


@td.tile_kernel
def clamped(x, ks, vocab: int):
    cutoff = (ks - 1).clamp_(min=0, max=vocab - 1)  # SGLang's top-k renorm
    part = x[:, 3:]
    assert part.storage_offset() == 3 and x.storage_offset() == 0
    return cutoff, torch.clamp(x, min=-0.5), part.clip(max=0.25)


def test_clamp_in_place_and_not_and_a_view_s_storage_offset() -> None:
    x = np.random.default_rng(80).standard_normal((4, 9)).astype(np.float32)
    ks = np.array([0, 3, 70, 12], np.int64)
    cutoff, low, high = clamped(x, ks, 50)
    np.testing.assert_array_equal(cutoff, np.clip(ks - 1, 0, 49))
    np.testing.assert_array_equal(low, np.maximum(x, -0.5))
    np.testing.assert_array_equal(high, np.minimum(x[:, 3:], 0.25))


@td.tile_kernel
def gathered(probs, cutoff, rows):
    pivots = probs.gather(1, cutoff.unsqueeze(1)).squeeze(1)  # SGLang's top-k renorm
    return pivots, torch.gather(probs, 0, rows)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_gather_along_either_dimension(backend: str) -> None:
    rng = np.random.default_rng(84)
    probs = rng.standard_normal((5, 37)).astype(np.float32)
    cutoff, rows = rng.integers(0, 37, 5), rng.integers(0, 5, (3, 37))
    pivots, picked = run_on(gathered, (probs, cutoff, rows), backend)
    np.testing.assert_array_equal(pivots, np.take_along_axis(probs, cutoff[:, None], 1)[:, 0])
    np.testing.assert_array_equal(picked, np.take_along_axis(probs, rows, 0))
    if backend == "numpy":
        with pytest.raises(td.OutOfBoundsError):
            gathered(probs, cutoff + 37, rows)


@td.tile_kernel
def sorted_positions(cdf, top_ps, seq, v):
    cutoff = torch.searchsorted(cdf, (1.0 - top_ps).unsqueeze(1), right=False).squeeze(1)
    return cutoff, torch.searchsorted(seq, v, right=True)  # (SGLang's top-p renorm, 1-D)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_searchsorted_by_rows_and_of_one_sequence(backend: str) -> None:
    rng = np.random.default_rng(85)
    cdf = np.cumsum(np.sort(rng.random((5, 37)), 1), 1).astype(np.float32)
    top_ps = (rng.random(5) * 10).astype(np.float32)
    seq, v = np.sort(rng.integers(0, 20, 50)), rng.integers(-2, 22, (3, 7))
    cutoff, at = run_on(sorted_positions, (cdf, top_ps, seq, v), backend)
    want = [np.searchsorted(row, 1.0 - p) for row, p in zip(cdf, top_ps)]
    np.testing.assert_array_equal(cutoff, want)
    np.testing.assert_array_equal(at, np.searchsorted(seq, v, side="right"))
    assert cutoff.dtype == np.int64


@td.tile_kernel
def pow_inside_a_grid(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x ** 2
    return out


def test_a_tensor_power_inside_a_grid_says_to_index_it() -> None:
    with pytest.raises(td.TraceError, match="must be indexed"):
        pow_inside_a_grid(np.ones(4, np.float32))


@td.tile_kernel
def int4_zero_points(w, k_cache):
    """TritonBench's int4 quantization's `(-w_min / scale).round().clamp(0, 15)` and
    lightllm's `if k_cache == None:` (a torch tensor compared with None is a bool)."""
    w_min, w_max = w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True)
    scale = (w_max - w_min) / 15
    zero = (-w_min / scale).round().clamp(0, 15).to(torch.int32)
    assert not (k_cache == None) and k_cache != None  # noqa: E711
    return zero, w.floor(), w.trunc(), k_cache.sigmoid()


def test_rounding_methods_and_a_tensor_compared_with_none() -> None:
    rng = np.random.default_rng(11)
    w = (rng.standard_normal((5, 33)) * 3).astype(np.float32)
    w[0, :4] = [0.5, 1.5, 2.5, -0.5]  # halves: torch rounds them to even
    k = rng.standard_normal(7).astype(np.float32)
    zero, floor, trunc, sig = int4_zero_points.run(w, k, backend="numpy")
    t = torch.from_numpy(w)
    lo, hi = t.amin(1, keepdim=True), t.amax(1, keepdim=True)
    want = (-lo / ((hi - lo) / 15)).round().clamp(0, 15).to(torch.int32)
    np.testing.assert_array_equal(zero, want.numpy())
    np.testing.assert_array_equal(floor, np.floor(w))
    np.testing.assert_array_equal(trunc, np.trunc(w))
    np.testing.assert_allclose(sig, 1 / (1 + np.exp(-k.astype(np.float64))), rtol=1e-6)
    assert torch.tensor([0.5, 1.5, 2.5]).round().tolist() == [0.0, 2.0, 2.0]  # (to even)


@td.tile_kernel
def selected_count(x, mask):
    """FlagGems' masked_select's host code: `torch.broadcast_tensors` of an argument and a
    valued one (its size comes from the mask's values)."""
    x, mask = torch.broadcast_tensors(x, mask)
    prefix = mask.contiguous().ravel().cumsum(axis=0)
    out = torch.zeros(prefix[-1].item() + 1, dtype=x.dtype)
    return out, x.contiguous()


def test_broadcast_tensors_with_a_valued_argument() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    mask = torch.tensor([True, False, True, True])
    out, spread = selected_count(x, mask)
    assert out.shape == (10,) and torch.equal(spread, x)


@td.tile_kernel
def extremes(x):
    values, indices = x.max(dim=1)  # torch's (values, indices)
    low = x.min(0, keepdim=True)
    return values, indices, low.values, low.indices, x.max(dim=1)[0]


def test_max_and_min_along_a_dim_give_indices() -> None:
    """Ties give the first position, as torch's (a ragged row of 37)."""
    x = torch.from_numpy(np.random.default_rng(13).standard_normal((5, 37)).astype(np.float32))
    x[2, 3] = x[2, 9] = 100.0
    got = extremes(x)
    top, low = x.max(dim=1), x.min(0, keepdim=True)
    for g, w in zip(got, (top.values, top.indices, low.values, low.indices, top.values)):
        assert g.dtype == w.dtype and torch.equal(g, w)


@td.tile_kernel
def group_sizes(ends, x):
    """torchao's deepgemm metadata: `torch.diff(ends, prepend=ends.new_zeros(1))`; a row
    appended along dim 0 of a 2-D tensor, differenced twice."""
    return torch.diff(ends, prepend=ends.new_zeros(1)), \
        torch.diff(x, dim=0, append=x[:1] * 5, n=2)


def test_diff_with_prepend_and_append() -> None:
    ends = torch.tensor([3, 7, 7, 12], dtype=torch.int32)
    x = torch.tensor([[1, 4], [9, 2], [0, 8]], dtype=torch.int64)
    sizes, second = group_sizes(ends, x)
    assert torch.equal(sizes, torch.diff(ends, prepend=ends.new_zeros(1)))
    assert torch.equal(second, torch.diff(x, dim=0, append=x[:1] * 5, n=2))


@td.tile_kernel
def accumulated(a, b):
    """Liger's fused linear JSD: `grad_weight.add_(g.t() @ x)`, and the other in-place
    spellings."""
    gw = torch.zeros(a.shape[1], b.shape[1], dtype=a.dtype, device=a.device)
    gw.add_(a.t() @ b)
    gw.add_(a.t() @ b, alpha=0.5)
    gw.mul_(2.0)
    gw.sub_(1.0)
    return gw.div_(4.0)


def test_in_place_add_sub_mul_div() -> None:
    rng = np.random.default_rng(15)
    a, b = (torch.from_numpy(rng.standard_normal((9, s)).astype(np.float32)) for s in (5, 3))
    want = ((a.double().t() @ b.double()) * 1.5 * 2.0 - 1.0) / 4.0
    torch.testing.assert_close(accumulated(a, b).double(), want, rtol=1e-5, atol=1e-5)


@td.tile_kernel
def folded_batch(s):
    """Liger's multi-token attention: `int(torch.prod(torch.tensor(batch)))` of sizes known
    while tracing is torch's, on those numbers."""
    *batch, rows, cols = s.shape
    n = int(torch.prod(torch.tensor(batch))) if batch else 1
    return s.reshape(n, rows, cols) * 2.0


def test_a_torch_function_of_numbers_known_while_tracing() -> None:
    s = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    assert torch.equal(folded_batch(s), s.reshape(6, 4, 5) * 2)


@td.tile_kernel
def einsums_and_flips(a, b, x, x3, y3):
    """flash-attn's layer-norm-linear backward (`torch.einsum("bo,bi->oi", dout, y)`), mamba's
    SSD backward (a reversed cumulative sum by `flip`, `torch.cumsum(..., out=)`)."""
    z = x.clone()
    torch.cumsum(z, dim=0, out=z)
    return (torch.einsum("bo,bi->oi", a, b), x.flip([-1]).cumsum(dim=-1).flip([-1]), z,
            torch.flip(x, (0, 1)), torch.einsum("ij->ji", a), torch.einsum("ij,ij->i", a, a),
            torch.einsum("bij,bjk->bki", x3, y3))


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_einsum_flip_and_a_result_into_out(backend: str) -> None:
    rng = np.random.default_rng(31)
    a, b, x, x3, y3 = (rng.standard_normal(s).astype(np.float32)
                       for s in ((37, 5), (37, 9), (7, 13), (3, 4, 6), (3, 6, 5)))
    want = [np.einsum("bo,bi->oi", a.astype(np.float64), b),
            np.flip(np.flip(x, -1).astype(np.float64).cumsum(-1), -1),
            x.astype(np.float64).cumsum(0), x[::-1, ::-1], a.T,
            (a.astype(np.float64) * a).sum(1), np.einsum("bij,bjk->bki", x3.astype(np.float64), y3)]
    got = run_on(einsums_and_flips, (a, b, x, x3, y3), backend)
    for g, w in zip(got, want):
        td.testing.assert_close(g, w, np.float32)
    with pytest.raises(td.ShapeError, match="each index once per operand"):
        td.tile_kernel(_diagonal)(a[:5])


def _diagonal(a):
    return torch.einsum("ii->i", a)
