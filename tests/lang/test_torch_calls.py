"""torch's functions on tile values (lang/torch_calls.py), as Helion kernels write them:
`torch.nn.functional.softmax(x[tile_n, :], dim=1)`, `torch.amax`, `torch.bmm`, `torch.baddbmm`,
torch dtypes and `device=x.device`."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support import gpu_backend, run_on
from tiledsl.testing import assert_close

import tiledsl as td

torch = pytest.importorskip("torch")
BACKENDS = ["numpy", "triton-interpret", gpu_backend()]


@td.tile_kernel
def softmax(x):
    """Helion's `softmax` example as written."""
    n, _m = x.size()
    out = td.empty_like(x)
    for tile_n in td.tile(n):
        out[tile_n, :] = torch.nn.functional.softmax(x[tile_n, :], dim=1)
    return out


@td.tile_kernel
def attention_step(q, k, v):
    """One key block of Helion's attention: `torch.bmm` scores, `torch.amax`, `torch.exp`,
    `torch.baddbmm` into the accumulator, torch dtypes and `device=`."""
    b, m, d = q.shape
    out = td.empty([b, m, d], dtype=torch.float32, device=q.device)
    for tb, tm in td.tile(b, m):
        s = torch.bmm(q[tb, tm, :], k[tb, :, :].transpose(1, 2), out_dtype=torch.float32)
        p = torch.exp(s - torch.amax(s, dim=-1, keepdim=True))
        acc = td.zeros([tb, tm, d], dtype=torch.float32)
        acc = torch.baddbmm(acc, p.to(v.dtype), v[tb, :, :])
        out[tb, tm, :] = acc / torch.sum(p, dim=-1, keepdim=True)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_functions_on_tiles(backend: str) -> None:
    rng = np.random.default_rng(16)
    x = rng.standard_normal((37, 19)).astype(np.float16)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    td.testing.assert_close(run_on(softmax, (x,), backend), e / e.sum(1, keepdims=True),
                            np.float16)
    q, k, v = (rng.standard_normal((2, 16, 16)).astype(np.float32) for _ in range(3))
    s = q.astype(np.float64) @ k.transpose(0, 2, 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    td.testing.assert_close(run_on(attention_step, (q, k, v), backend),
                            (p @ v) / p.sum(-1, keepdims=True), np.float32)


def test_a_torch_function_without_a_counterpart_names_the_call() -> None:
    @td.tile_kernel
    def gamma(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = torch.lgamma(x[t])
        return out

    with pytest.raises(td.TraceError, match="torch.lgamma has no tiledsl counterpart") as e:
        gamma(np.ones(4, np.float32))
    assert "out[t] = torch.lgamma(x[t])" in str(e.value)


@td.tile_kernel
def torch_host(x, y):
    """Host code as Helion writes it: torch's factories and dtype rules on the kernel's
    tensors, sizes one by one; torch's activations and tensor methods on tiles."""
    T, N = x.shape
    mixed = torch.zeros(T, N, dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    acts = torch.empty(5, T, N, dtype=torch.float32)
    counts = torch.full((T,), 3)
    ones = torch.ones(T, N, dtype=x.dtype)
    for tm, tn in td.tile(T, N):
        v = x[tm, tn]
        mixed[tm, tn] = v + y[tm, tn] + torch.zeros_like(v, dtype=torch.float32)
        acts[0, tm, tn] = torch.nn.functional.silu(v) + v.sigmoid()
        acts[1, tm, tn] = torch.nn.functional.gelu(v) + td.gelu(v, approximate="tanh")
        acts[2, tm, tn] = torch.nn.functional.leaky_relu(v, 0.2) + torch.nn.functional.softplus(v)
        acts[3, tm, tn] = torch.clamp(v, min=0.0) + v.clamp(max=0.5) + v.abs().sqrt()
        acts[4, tm, tn] = td.math.fma(v, v, v.exp())
        ones[tm, tn] = ones[tm, tn] * 2
    for t in td.tile(T):
        counts[t] = counts[t] + 1
    return mixed, acts, counts, ones


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_factories_in_host_code_and_activations(backend: str) -> None:
    rng = np.random.default_rng(17)
    x = rng.standard_normal((37, 19)).astype(np.float16)
    y = rng.standard_normal((37, 19)).astype(np.float32)
    mixed, acts, counts, ones = run_on(torch_host, (x, y), backend)
    v = x.astype(np.float64)
    erf = np.vectorize(math.erf)
    tanh_gelu = 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))
    assert mixed.dtype == np.float32 and counts.dtype == np.int64 and ones.dtype == np.float16
    td.testing.assert_close(mixed, v + y, np.float32)
    td.testing.assert_close(acts, np.stack([
        v / (1 + np.exp(-v)) + 1 / (1 + np.exp(-v)),
        0.5 * v * (1 + erf(v / np.sqrt(2))) + tanh_gelu,
        np.where(v > 0, v, 0.2 * v) + np.log1p(np.exp(v)),
        np.maximum(v, 0) + np.minimum(v, 0.5) + np.sqrt(np.abs(v)),
        v * v + np.exp(v)]), np.float16)
    np.testing.assert_array_equal(counts, 4)
    np.testing.assert_array_equal(ones, 2)


@td.tile_kernel
def torch_matmul_acc(a, b):
    """Helion's jagged_dense_bmm: an accumulator of the inputs' dtype and torch.matmul, which
    returns that dtype (td.dot and `@` return float32 for 16-bit inputs)."""
    out = td.empty((a.shape[0], b.shape[1]), torch.promote_types(a.dtype, b.dtype))
    for tm, tn in td.tile(a.shape[0], b.shape[1]):
        acc = td.zeros((tm, tn), dtype=a.dtype)
        for tk in td.tile(a.shape[1]):
            acc = acc + torch.matmul(a[tm, tk], b[tk, tn])
        out[tm, tn] = acc
    return out


def test_torch_matmul_returns_torch_s_dtype() -> None:
    rng = np.random.default_rng(18)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((37, 45), (45, 29)))
    out = torch_matmul_acc(a, b)
    assert out.dtype == np.float16
    td.testing.assert_close(out, a.astype(np.float64) @ b, np.float16, factor=4.0)


def test_torch_calls_that_do_not_fit_name_the_call() -> None:
    @td.tile_kernel
    def in_place(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = torch.nn.functional.relu(x[t], inplace=True)
        return out

    @td.tile_kernel
    def bad_factory(x):
        out = torch.empty(x.shape, dtype=x.dtype, strides=(1,))
        for t in td.tile(x.shape[0]):
            out[t] = x[t]
        return out

    x = np.ones(4, np.float32)
    with pytest.raises(td.TraceError, match=r"relu\(\.\.\., inplace=True\) has no meaning") as e:
        in_place(x)
    assert "torch.nn.functional.relu(x[t], inplace=True)" in str(e.value)
    with pytest.raises(td.TraceError, match=r"torch.empty\(\): .*strides") as e:
        bad_factory(x)
    assert "out = torch.empty(x.shape, dtype=x.dtype, strides=(1,))" in str(e.value)


@td.tile_kernel
def addmm_after_matmul(g, b, a, ints: bool = False):
    """Helion's squeeze-and-excitation backward in fp16: `g @ b.T` is float32 in tiledsl (fp16
    in torch), so torch.addmm multiplies float32 by float16, which promotes as NumPy's matmul
    does; an int operand stays an error."""
    m, n = g.shape[0], a.shape[0]
    out = torch.empty([m, n], dtype=g.dtype)
    for tm, tn in td.tile(m, n):
        acc = td.zeros([tm, tn], dtype=torch.float32)
        for tk in td.tile(b.shape[0]):
            gb = g[tm, :] @ b[tk, :].T
            acc = torch.addmm(acc, gb.to(torch.int32) if ints else gb, a[tn, tk].T)
        out[tm, tn] = acc
    return out


def test_mixed_float_products_promote_and_an_error_inside_a_torch_call_is_said_once() -> None:
    rng = np.random.default_rng(19)
    g, b, a = (rng.standard_normal(s).astype(np.float16) for s in ((37, 45), (29, 45), (45, 29)))
    want = (g.astype(np.float64) @ b.T.astype(np.float64)) @ a.T.astype(np.float64)
    assert_close(addmm_after_matmul(g, b, a), want, np.float16, factor=4.0)
    with pytest.raises(td.DTypeError, match="'@' operand dtypes differ: int32 @ float16") as e:
        addmm_after_matmul(g, b, a, True)
    assert str(e.value).count("in kernel") == 1, str(e.value)


@td.tile_kernel
def eye(n, m=None, *, dtype=None, layout=torch.strided, device=None, pin_memory=None):
    """FlagGems' torch.eye: no tensor argument, keyword-only parameters, a torch dtype as a
    compile-time argument, torch.empty's layout= and pin_memory=None."""
    if dtype is None:
        dtype = torch.get_default_dtype()
    m = n if m is None else m
    out = torch.empty((n, m), dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)
    for tm, tn in td.tile(n, m):
        out[tm, tn] = (tm.index[:, None] == tn.index[None, :]).to(dtype)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_factory_with_keyword_only_torch_arguments(backend: str) -> None:
    half = run_on(eye, (37, 45), backend, dtype=torch.float16)
    assert half.dtype == np.float16 and (half == np.eye(37, 45)).all()
    square = run_on(eye, (5,), backend)
    assert square.dtype == np.float32 and (square == np.eye(5)).all()


@td.tile_kernel
def interleave(x):
    """Helion's int4 GEMM interleaves with `torch.stack([lo, hi], dim=1)` (td.stack's dim=)."""
    n = x.shape[0]
    out = td.empty((n, 2), dtype=x.dtype)
    twice = td.empty((2, n), dtype=x.dtype)
    for t in td.tile(n):
        v = x[t]
        out[t, :] = torch.stack([v, v * 2], dim=1)
        twice[:, t] = td.stack([v, v * 2], dim=0)
    return out, twice


def test_torch_stack_on_tiles() -> None:
    x = np.random.default_rng(23).standard_normal(37).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        out, twice = interleave.run(x, backend=backend)
        np.testing.assert_array_equal(out, np.stack([x, 2 * x], axis=1))
        np.testing.assert_array_equal(twice, np.stack([x, 2 * x]))


@td.tile_kernel
def host_copies(x, v):
    """FlagGems' wrappers: `x.T.clone()` (a copy grid), `.contiguous()` of a view laid out
    row-major (itself), `torch.fill(out, v)` and `.fill_(v)`, torch's flags."""
    c = x.T.clone()
    r = x.reshape(1, -1).contiguous()
    out = torch.empty(x.shape, dtype=x.dtype)
    torch.fill(out, v)
    z = torch.empty((3,), dtype=x.dtype).fill_(2.0)
    z0 = torch.empty((2,), dtype=x.dtype).zero_()
    tail = torch.zeros((x.shape[:-1].numel(), x.shape[-1]), dtype=x.dtype)  # (torch.Size's)
    tail[:, 3:].copy_(x[:, 3:])  # (flash-attn's rotary: a view's copy_)
    assert not x.is_quantized and not x.is_complex() and not x.is_conj()
    assert x.to(x.device) is x and x.to("cuda:0") is x  # (Unsloth's `labels.to(device)`)
    assert x.cuda() is x and x.cuda(0) is x  # (lightllm's `weight.cuda(tp_rank)`)
    h = x.to(x.device, torch.float16)  # (a copy grid, as .to(torch.float16))
    return c, r, out, z, z0, h, tail


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_copies_and_fills(backend: str) -> None:
    x = np.random.default_rng(47).standard_normal((5, 7)).astype(np.float32)
    c, r, out, z, z0, h, tail = run_on(host_copies, (x, 1.5), backend)
    np.testing.assert_array_equal(tail, np.concatenate([0 * x[:, :3], x[:, 3:]], axis=1))
    np.testing.assert_array_equal(h, x.astype(np.float16))
    np.testing.assert_array_equal(c, x.T)
    np.testing.assert_array_equal(r, x.reshape(1, -1))
    assert (out == 1.5).all() and (z == 2.0).all() and (z0 == 0.0).all()


@td.tile_kernel
def vstack_rows2(a, b, c):
    """FlagGems' vstack wrapper: `torch.atleast_2d(tensors)` of a list (views of 1-D inputs)
    and of a 2-D tensor (itself); td.atleast_1d / atleast_3d as torch's."""
    a2, b2 = torch.atleast_2d([a, b])
    assert torch.atleast_2d(c) is c and td.atleast_3d(a).shape == (1, a.shape[0], 1)
    out = td.empty((2 + c.shape[0], a.shape[0]), dtype=a.dtype)
    for tn in td.tile(a.shape[0]):
        out[0:1, tn] = a2[0:1, tn]
        out[1:2, tn] = b2[0:1, tn]
        out[2:, tn] = c[:, tn]
    return out


def test_torch_atleast_views() -> None:
    rng = np.random.default_rng(53)
    a, b = (rng.standard_normal(9).astype(np.float32) for _ in range(2))
    c = rng.standard_normal((3, 9)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(vstack_rows2.run(a, b, c, backend=backend),
                                      np.vstack([a, b, c]))


@td.tile_kernel
def chunked_ce_tail(logits, labels, losses, bias):
    """Unsloth's chunked cross entropy after its kernel, as written: torch's whole-tensor math
    in host code, each op a grid (broadcasting `bias` over rows)."""
    lse = torch.logsumexp(logits + bias, dim=1)
    losses += lse
    losses.masked_fill_(labels == -100, 0)
    scaled = torch.where(labels >= 0, losses * 2, -losses) / 4.0
    return lse, scaled, (logits - 1.0).exp().log()


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_tensor_math_in_host_code(backend: str) -> None:
    rng = np.random.default_rng(48)
    logits = rng.standard_normal((7, 37)).astype(np.float32)
    bias = rng.standard_normal(37).astype(np.float32)
    labels = np.array([1, -100, 3, 0, -100, 2, 5], np.int64)
    losses = rng.standard_normal(7).astype(np.float32)
    z = logits.astype(np.float64) + bias
    lse_want = np.log(np.exp(z).sum(1))
    loss_want = np.where(labels == -100, 0.0, losses + lse_want)
    got = run_on(chunked_ce_tail, (logits, labels, losses, bias), backend)
    td.testing.assert_close(losses, loss_want, np.float32)  # (+= and masked_fill_ in place)
    td.testing.assert_close(got[0], lse_want, np.float32)
    td.testing.assert_close(got[1], np.where(labels >= 0, loss_want * 2, -loss_want) / 4,
                            np.float32)
    td.testing.assert_close(got[2], logits - 1.0, np.float32)

    @td.tile_kernel
    def mismatched(a, b):
        return a + b

    with pytest.raises(td.ShapeError, match="do not broadcast"):
        mismatched(logits, bias[:5])


@td.tile_kernel
def expert_order(topk_ids, scores):
    """SGLang's ep preprocess sorts the flattened top-k expert ids in host code; the scores
    are sorted along rows, descending, and along columns by argsort."""
    reorder_ids, order = torch.sort(topk_ids.view(-1), stable=True)
    by_row = scores.sort(dim=1, descending=True)
    return reorder_ids, order, by_row.values, by_row.indices, torch.argsort(scores, dim=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_code_sorts_whole_tensors(backend: str) -> None:
    rng = np.random.default_rng(49)
    ids = rng.integers(0, 8, (37, 4)).astype(np.int32)  # ties: the order must be stable
    scores = rng.standard_normal((19, 13)).astype(np.float16)
    got = run_on(expert_order, (ids, scores), backend)
    order = np.argsort(ids.reshape(-1), kind="stable")
    down = np.argsort(-scores.astype(np.float64), axis=1, kind="stable")
    want = (ids.reshape(-1)[order], order, np.take_along_axis(scores, down, 1), down,
            np.argsort(scores, axis=0, kind="stable"))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)

    @td.tile_kernel
    def inside(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = torch.sort(x).values[t]
        return out

    with pytest.raises(td.TraceError, match="torch.sort of the whole tensor 'x' inside the "
                                            "grid"):
        inside(scores[0])


@td.tile_kernel
def chunk_offsets(cu_seqlens, scores, BT: int):
    """fla's varlen preparation in host code, as written: chunks per sequence by `triton.cdiv`
    of a tensor (`//` and `%` of tensors), a leading 0 from `new_tensor` joined by `torch.cat`,
    the running total by `cumsum` (int64, as torch's); a 16-bit float cumsum keeps its dtype."""
    import triton
    lens = cu_seqlens[1:] - cu_seqlens[:-1]
    offsets = torch.cat([cu_seqlens.new_tensor([0]), triton.cdiv(lens, BT)]).cumsum(-1)
    weights = torch.tensor([0.5, 2, 4], dtype=torch.float16, device=cu_seqlens.device)
    return offsets, lens % BT, torch.cumsum(scores, dim=0), weights


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_code_integer_division_and_cumsum(backend: str) -> None:
    pytest.importorskip("triton")
    cu = np.array([0, 5, 9, 9, 26], np.int32)
    scores = np.random.default_rng(50).standard_normal((7, 5)).astype(np.float16)
    offsets, tails, sums, weights = run_on(chunk_offsets, (cu, scores, 4), backend)
    lens = np.diff(cu)
    assert offsets.dtype == np.int64 and sums.dtype == np.float16
    np.testing.assert_array_equal(offsets, np.cumsum(np.r_[0, -(-lens // 4)]))
    np.testing.assert_array_equal(weights, np.array([0.5, 2, 4], np.float16))
    np.testing.assert_array_equal(tails, lens % 4)
    td.testing.assert_close(sums, np.cumsum(scores.astype(np.float64), axis=0), np.float16)

    @td.tile_kernel
    def data_sized(cu):
        return td.zeros((cu[-1].item(),), dtype=td.float32)

    assert data_sized(cu).shape == (26,)  # cu's values: a valued argument (valued_args.py)
    with pytest.raises(td.TraceError, match=r"cu\[-1\].item\(\) is used as a size in td.zeros: "
                       "its value is the kernel's data"):
        data_sized(cu.astype(np.float32))  # (a float tensor's values are data, not sizes)

    @td.tile_kernel
    def too_long(cu):
        return td.tensor(list(range(65)))

    @td.tile_kernel
    def mismatched(cu, scores):
        return torch.cat([cu, scores], dim=0)

    with pytest.raises(td.TraceError, match="a flat list of 1 to 64 numbers"):
        too_long(cu)
    with pytest.raises(td.ShapeError, match=r"torch.cat: shapes \(5,\), \(7, 5\) differ"):
        mismatched(cu, scores)



@td.tile_kernel
def flag_gems_host(x, dim: int):
    """FlagGems' wrapper habits: dtype identity (`x.dtype is torch.bfloat16` chose the other
    branch silently before), torch's own dtype predicates on the tensor's dtype, `x.size(dim)`
    of an int argument, device queries, and 0-d results of `squeeze()` and `x[i]`."""
    from torch._prims_common import is_integer_dtype
    acc_dtype = torch.float32 if x.dtype is torch.bfloat16 else x.dtype
    out_dtype = torch.int64 if is_integer_dtype(x.dtype) else acc_dtype
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    with torch.cuda.device(x.device.index):
        sums = torch.zeros((1, x.size(dim)), dtype=out_dtype)
        for t in td.tile(x.shape[1]):
            sums[0, t] = td.sum(x[:, t].astype(out_dtype), axis=0)
    total = torch.zeros((1, 1), dtype=out_dtype)
    for _ in td.grid(1):
        total[0, 0] = td.sum(sums[0, :])
    return sums, total.squeeze(), sums[0, 1], sms, x.stride(dim - 1)


def test_flag_gems_host_spellings() -> None:
    import ml_dtypes
    x = np.random.default_rng(76).standard_normal((5, 6)).astype(ml_dtypes.bfloat16)
    sums, total, second, sms, stride = flag_gems_host.run(x, 1, backend="numpy")
    assert sums.dtype == np.float32 and sums.shape == (1, 6)  # `is torch.bfloat16`: True
    assert stride == 6  # `x.stride(dim - 1)` of an int argument: traced with dim as an int
    assert total.shape == () and second.shape == () and sms == 132
    want = x.astype(np.float64).sum(0)
    assert_close(sums[0], want, np.float32)
    assert_close(second, want[1], np.float32)
    ints = flag_gems_host.run(np.arange(12, dtype=np.int32).reshape(3, 4), 1, backend="numpy")
    assert ints[0].dtype == np.int64 and int(ints[1]) == 66


_SCALES = {torch.float16: 1.0, torch.float32: 2.0}


def _scale_of(x):  # a one-line helper, as SGLang's compute-type helpers are
    return _SCALES[x.dtype]


def _scale_by_name(dt):
    return {torch.float16: 1.0, torch.float32: 2.0}[dt]


@td.tile_kernel
def dtype_tables(x):
    """Sets and dicts of torch's dtypes asked about a tensor's (td) dtype, which hashes apart
    from torch's: `in`, `not in`, `dict.get` (each was silently False, or the default), and
    a dict subscripted in a helper (a KeyError)."""
    half = x.dtype in {torch.float16, torch.bfloat16}
    wide = x.dtype not in frozenset([torch.float16, torch.bfloat16])
    scale = {torch.float16: 1.0, torch.float32: 2.0}.get(x.dtype, 3.0)
    assert _scale_of(x) == scale == _scale_by_name(x.dtype)
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * scale + (10.0 if half else 0.0) + (100.0 if wide else 0.0)
    return out


def test_a_tensor_dtype_is_found_in_sets_and_dicts_of_torch_dtypes() -> None:
    x = np.random.default_rng(87).standard_normal(9).astype(np.float32)
    assert_close(dtype_tables(x), x.astype(np.float64) * 2 + 100, np.float32)
    h = x.astype(np.float16)
    assert_close(dtype_tables(h), h.astype(np.float64) + 10, np.float16)


@td.tile_kernel
def masked_by_broadcast(x, m):
    """FlagGems' masked_select: `inp, mask = torch.broadcast_tensors(inp, mask)` (views)."""
    a, b = torch.broadcast_tensors(x, m)
    out = torch.empty(a.shape, dtype=x.dtype)
    for i, j in td.grid(a.shape[0], a.shape[1]):
        out[i, j] = td.where(b[i, j], a[i, j], 0.0)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_host_broadcast_tensors(backend: str) -> None:
    x = np.random.default_rng(85).standard_normal((1, 5)).astype(np.float32)
    m = np.random.default_rng(86).random((3, 1)) > 0.5
    np.testing.assert_array_equal(masked_by_broadcast.run(x, m, backend=backend),
                                  np.where(m, x, 0))


@td.tile_kernel
def strided_outputs(x):
    """FlagGems allocates outputs in its inputs' layout: `torch.empty_strided(size, stride)`,
    row-major or a permutation of it (here column-major)."""
    a = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
    b = torch.empty_strided((x.shape[1], x.shape[0]), (1, x.shape[1]), dtype=x.dtype)
    assert b.stride() == (1, x.shape[1])
    for tm, tn in td.tile(x.shape[0], x.shape[1]):
        a[tm, tn] = x[tm, tn] * 2.0
        b[tn, tm] = x[tm, tn].T
    return a, b


def test_empty_strided_allocates_the_layout_its_strides_describe() -> None:
    x = np.random.default_rng(89).standard_normal((5, 7)).astype(np.float32)
    a, b = strided_outputs(x)
    np.testing.assert_array_equal(a, 2 * x)
    np.testing.assert_array_equal(b, x.T)
    assert b.strides == (4, 28)  # column-major, as asked

    @td.tile_kernel
    def gaps(x):
        return torch.empty_strided((4, 4), (8, 1), dtype=x.dtype)

    with pytest.raises(td.ShapeError, match="no permutation of a contiguous layout"):
        gaps(x)
