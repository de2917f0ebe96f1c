"""Indexing tensors in host code (lang/views.py `tensor_index`, lang/host_stores.py): `x[:, :-1]`,
`x[0]`, `x[..., ::2]`, `x[:, None]` are views that share the tensor's memory, and `x[:, -1] = 0`
is a grid of its own. Helion's GRPO loss (helion_grpo.py) runs as written but one rewrite."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tiledsl as td
from helion_grpo import grpo_loss_backward, grpo_loss_forward
from support import gpu_backend, on_cuda, under_configs
from tiledsl.errors import BackendError, ShapeError, TraceError
from tiledsl.ir.parser import parse_ir
from tiledsl.ir.printer import print_ir

torch = pytest.importorskip("torch")

BACKENDS = ["numpy", "triton-interpret", "spatial", gpu_backend()]
T, BETA, EPS_LOW, EPS_HIGH = 0.9, 0.04, 0.2, 0.4


def grpo_inputs(rng: np.random.Generator, b: int = 3, l: int = 7, v: int = 45) -> dict[str, Any]:
    logits = rng.standard_normal((b, l + 1, v)).astype(np.float32)
    ids = rng.integers(0, v, (b, l)).astype(np.int64)
    selected = (np.take_along_axis(logits[:, :-1], ids[..., None], 2)[..., 0] / T
                ).astype(np.float32)
    near = lambda: (selected + 0.3 * rng.standard_normal((b, l))).astype(np.float32)  # noqa: E731
    return {"logits": logits, "ids": ids, "selected": selected, "old": near(), "ref": near(),
            "adv": rng.standard_normal(b).astype(np.float32),
            "mask": (rng.random((b, l)) > 0.25).astype(np.float32),
            "grad": rng.standard_normal((b, l)).astype(np.float32)}


def grpo_reference(x: dict[str, Any]) -> tuple[np.ndarray, ...]:
    """Helion's `torch_grpo_loss` and its gradient, in float64."""
    f = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in x.items()}
    scaled = f["logits"][:, :-1] / T
    top = scaled.max(-1)
    lse = top + np.log(np.exp(scaled - top[..., None]).sum(-1))
    logp = f["selected"] - lse
    coef_1 = np.exp(logp - f["old"])
    loss1 = coef_1 * f["adv"][:, None]
    loss2 = np.clip(coef_1, 1 - EPS_LOW, 1 + EPS_HIGH) * f["adv"][:, None]
    kl = (np.exp(f["ref"] - logp) - (f["ref"] - logp) - 1) * f["mask"]
    loss = -np.minimum(loss1, loss2) * f["mask"] + BETA * kl
    dlogp = -loss1 * (loss2 >= loss1) + BETA * (1 - np.exp(f["ref"] - logp))
    dlogp = dlogp * f["grad"] / T * f["mask"]
    probs = np.exp(scaled - lse[..., None])
    chosen = np.arange(scaled.shape[-1]) == x["ids"][..., None]
    grad = np.zeros_like(f["logits"])
    grad[:, :-1] = np.where(chosen, dlogp[..., None] * (1 - probs), -dlogp[..., None] * probs)
    return loss, kl, (loss1 < loss2).astype(np.float64), lse, grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_grpo_loss_as_helion_writes_it(backend: str) -> None:
    x = grpo_inputs(np.random.default_rng(0))
    loss, kl, clipped, lse, grad = grpo_reference(x)
    forward = (x["logits"], x["selected"], x["old"], x["ref"], x["adv"], x["mask"], T, BETA,
               EPS_LOW, EPS_HIGH)
    for _, outs in under_configs(grpo_loss_forward, forward, backend, samples=1):
        for out, ref in zip(outs, (loss, kl, clipped, lse)):
            td.testing.assert_close(out, ref, np.float32)
    backward = (x["grad"], x["logits"], x["selected"], x["ids"], x["old"], x["ref"], x["adv"],
                x["mask"], lse.astype(np.float32), T, BETA, EPS_LOW, EPS_HIGH)
    for _, out in under_configs(grpo_loss_backward, backward, backend, samples=1):
        td.testing.assert_close(out, grad, np.float32)


def test_grpo_loss_without_its_optional_tensors() -> None:
    """No old log-probs (the ratio is 1), no mask, no KL term: the loss is -advantage, and the
    log-sum-exp is still computed over the first L rows."""
    x = grpo_inputs(np.random.default_rng(1), 2, 5, 19)
    lse = grpo_reference(x)[3]
    loss, kl, _, got = grpo_loss_forward(x["logits"], x["selected"], None, None, x["adv"], None,
                                         T, 0.0, EPS_LOW, EPS_HIGH)
    td.testing.assert_close(loss, np.broadcast_to(-x["adv"][:, None], (2, 5)), np.float32)
    td.testing.assert_close(got, lse, np.float32)
    np.testing.assert_array_equal(kl, 0)  # never written: its zeros stay


@td.tile_kernel
def parts(x):
    """Views by indexing, composed with other views; host stores of a scalar and a copy."""
    m, n = x.shape
    odd = x[1:, 1::2].T          # a slice's transpose: (n // 2, m - 1)
    last = x[-1]                 # an int drops its dimension
    rows = x[1:3].reshape(-1)    # contiguous rows flatten
    col = x[..., None][:, 2]     # a new axis, then an int: column 2 as (m, 1)
    out = td.empty(odd.shape, x.dtype)
    for ti, tj in td.tile(odd.shape):
        out[ti, tj] = odd[ti, tj] * 2
    tail = td.empty((n + 2 * n + m,), x.dtype)
    head = tail[:n]
    for t in td.tile(n):
        head[t] = last[t]
    tail[n:3 * n] = rows         # a copy into a part of the output
    tail[3 * n:] = col.reshape(m)
    return out, tail


@td.tile_kernel
def fill_column(x, s):
    x[:, 0] = s                  # a scalar argument written into a column, in place


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_by_indexing_read_and_write_the_tensor(backend: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 9)).astype(np.float32)
    tail = np.concatenate([x[-1], x[1:3].reshape(-1), x[:, 2]])
    for _, (out, got) in under_configs(parts, (x,), backend, samples=1):
        np.testing.assert_array_equal(out, x[1:, 1::2].T * 2)
        np.testing.assert_array_equal(got, tail)
    y = x.copy()
    if backend == "triton-gpu":  # in place on the device, then back
        y_gpu = on_cuda(y)
        fill_column.run(y_gpu, 0.5, backend="triton")
        y = y_gpu.cpu().numpy()
    else:
        fill_column.run(y, 0.5, backend=backend)
    assert (y[:, 0] == 0.5).all() and (y[:, 1:] == x[:, 1:]).all()


def test_a_view_by_indexing_round_trips_through_ir_text() -> None:
    text = print_ir(parts.traced(np.ones((6, 9), np.float32)).ir)
    assert "tensor.slice" in text
    assert print_ir(parse_ir(text)) == text


@td.tile_kernel
def first_k(x, k: int):
    part = x[:k]
    out = td.empty(part.shape, x.dtype)
    for t in td.tile(part.shape[0]):
        out[t] = part[t]
    return out


def test_an_int_argument_bound_traces_as_a_static_int() -> None:
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(first_k(x, 4), x[:4])
    np.testing.assert_array_equal(first_k(x, 7), x[:7])


def _indexed(index: Any, value: Any = None) -> Any:
    @td.tile_kernel
    def kernel(x):
        if value is None:
            part = x[index]
        else:
            x[index] = value
    return kernel


@pytest.mark.parametrize("index, error, match", [
    ((slice(None, None, -1),), TraceError, "step must be at least 1"),
    ((slice(3, 3),), ShapeError, "selects no element"),
    ((0, 9), ShapeError, "index 9 is out of range for dimension 1"),
    ((0, 0, 0), ShapeError, "has 2 dimension"),
    ((Ellipsis, Ellipsis), TraceError, "single ellipsis"),
    ((0.5,), TraceError, "indexed with ints, slices, None and"),
], ids=["negative step", "empty", "out of range", "too many", "two ellipses", "float"])
def test_bad_host_indices_are_clear_errors(index: tuple, error: type, match: str) -> None:
    with pytest.raises(error, match=match) as e:
        _indexed(index)(np.ones((4, 9), np.float32))
    assert "x[index]" in str(e.value)


@td.tile_kernel
def store_row_into_column(x, row):
    x[:, 0] = row


def test_bad_host_stores_are_clear_errors() -> None:
    x = np.ones((4, 9), np.float32)
    with pytest.raises(ShapeError, match=r"shape \(4,\) cannot take a tensor of shape \(9,\)"):
        store_row_into_column(x, x[0])
    with pytest.raises(TraceError, match="takes a number, a scalar argument or a tensor"):
        _indexed((slice(None), 0), [1.0, 2.0])(x)
    with pytest.raises(ShapeError, match=r"view of shape \(16,\) .* would need a copy") as e:
        _indexed_view(x)  # torch's .view never copies; .reshape would, and write the copy
    assert "x[:, :4].view(-1)" in str(e.value)


@td.tile_kernel
def _indexed_view(x):
    flat = x[:, :4].view(-1)  # rows of 4 of 9: not one stride
    for t in td.tile(flat.shape[0]):
        flat[t] = 0


@td.tile_kernel
def store_past_the_tile(x):
    v, l_add_1 = x.shape
    out = td.zeros_like(x)
    for tv, tl in td.tile(v, l_add_1 - 1):
        out[tv, tl] = x[tv, tl]
    return out


def test_a_tile_over_fewer_rows_names_the_view_to_index() -> None:
    with pytest.raises(ShapeError, match=r"part = x\[:, :7\]"):
        store_past_the_tile(np.ones((3, 8), np.float32))


@td.tile_kernel
def odd_columns(x):
    part = x[2:, 1::2]
    out = td.empty(part.shape, x.dtype)
    for tm in td.tile(part.shape[0]):
        out[tm, :] = part[tm, :]
    return out


def test_spatial_dma_reads_a_view_at_its_offset_and_strides() -> None:
    """The dataflow's reads of x[2:, 1::2] (x of 7 x 9) start at row 2, column 1, in steps of
    2 columns: their offsets are 9 * row + 1."""
    import json
    x = np.ones((7, 9), np.float32)
    config = odd_columns.config_space(x, backend="spatial").default().replace(block_sizes=(1,))
    flow = json.loads(odd_columns.source(x, target="spatial", config=config))
    reads = sorted((s["copy"]["src"]["offset"], tuple(s["copy"]["src"]["strides"]))
                   for a in flow["agents"] for s in a["program"]
                   if "copy" in s and s["copy"]["src"].get("tensor") == "x")
    assert reads == [(9 * r + 1, (9, 2)) for r in range(2, 7)]


@td.tile_kernel
def shifted_rows(x):
    out = td.empty((x.shape[0] + 1, x.shape[1]), x.dtype)
    below = out[1:]
    for t in td.tile(x.shape[0]):
        below[t, :] = x[t, :] * 2
    out[0] = 1.0
    return out[:-1]


def test_a_returned_view_is_a_view_and_a_package_refuses_it(tmp_path: Any) -> None:
    x = np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_array_equal(shifted_rows(x), np.concatenate([np.ones((1, 3)), x[:-1] * 2]))
    with pytest.raises(BackendError, match="returns a view") as e:
        shifted_rows.export(tmp_path / "pkg", x, arch="sm_90")
    assert "return out[:-1]" in str(e.value)


@td.tile_kernel
def concatenate_columns(a, b):
    m, n1 = a.shape
    out = td.empty((m, n1 + b.shape[1]), a.dtype)
    left, right = out[:, :n1], out[:, n1:]
    for tm in td.tile(m):
        left[tm, :] = a[tm, :]
        right[tm, :] = b[tm, :]
    return out


@td.tile_kernel
def overlapping_parts(a):
    out = td.zeros((a.shape[0] + 1, a.shape[1]), a.dtype)
    above, below = out[:-1], out[1:]
    for tm in td.tile(a.shape[0]):
        above[tm, :] = a[tm, :]
        below[tm, :] = a[tm, :] * 2  # row i + 1 of out: another program's row i of `above`
    return out


@td.tile_kernel
def shift_up_in_place(x):
    above, below = x[:-1], x[1:]
    for tm in td.tile(x.shape[0] - 1):
        above[tm, :] = below[tm, :]  # reads the row the next program writes


def test_stores_through_disjoint_parts_are_apart_and_overlapping_ones_race() -> None:
    a, b = np.ones((5, 3), np.float32), np.full((5, 4), 2, np.float32)
    np.testing.assert_array_equal(concatenate_columns(a, b), np.concatenate([a, b], 1))
    with pytest.raises(TraceError, match=r"store to 'out\[1:\]' may write elements that the "
                       r"store at line \d+ writes too"):
        overlapping_parts(a)
    with pytest.raises(TraceError, match=r"store to 'x\[:-1\]' may write elements that the "
                       r"load at line \d+ reads"):
        shift_up_in_place(a)


def test_the_shape_function_follows_a_view_s_sizes() -> None:
    """Under torch.compile(dynamic=True) output sizes are expressions of the arguments' sizes
    (frontend/symdims.py): `x[:, :-1]` has n - 1 columns at every size."""
    spec = first_columns.arg_spec(first_columns.bind((np.ones((5, 7), np.float32),), {}))
    shapes = first_columns.traces.shape_function(spec)
    sizes = lambda i, d: (11, 13)[d]  # noqa: E731
    assert shapes.followed and shapes.holds(sizes) and shapes.shapes(sizes) == [(11, 12)]


@td.tile_kernel
def first_columns(x):
    part = x[:, :-1]
    out = td.empty(part.shape, x.dtype)
    for tm, tn in td.tile(part.shape):
        out[tm, tn] = part[tm, tn]
    return out


@td.tile_kernel
def weight_grad(x, dy, w, programs: td.constexpr):
    """Liger's layer-norm backward: each program sums its rows' dw into a partial row, then
    host code reduces the partials, `_DW.sum(dim=0).to(W.dtype)`."""
    m, n = x.shape
    rows = -(-m // programs)
    partial = td.zeros((programs, n), dtype=td.float32)
    for p in td.grid(programs):
        acc = td.zeros((n,), dtype=td.float32)
        for t in td.tile(m, start=p * rows, stop=td.minimum((p + 1) * rows, m)):
            acc += td.sum(x[t, :].to(td.float32) * dy[t, :].to(td.float32), axis=0)
        partial[p, :] = acc
    return partial.sum(dim=0).to(w.dtype), partial.amax(1), x.mean(), partial.amin(0, True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_reductions_and_casts_of_tensors(backend: str) -> None:
    rng = np.random.default_rng(13)
    x, dy = (rng.standard_normal((9, 5)).astype(np.float16) for _ in range(2))
    w = np.ones(5, np.float16)
    partial = np.stack([(x[3 * p:3 * p + 3].astype(np.float64) * dy[3 * p:3 * p + 3]).sum(0)
                        for p in range(4)])  # rows of 9 in chunks of 3: the last is empty
    for _, (dw, top, mean, low) in under_configs(weight_grad, (x, dy, w, 4), backend, samples=1):
        assert dw.dtype == np.float16 and mean.shape == () and low.shape == (1, 5)  # torch's
        assert mean.dtype == np.float16  # torch's: a float16 tensor's mean, summed in float32
        td.testing.assert_close(dw, partial.sum(0), np.float16)
        td.testing.assert_close(top, partial.max(1), np.float32)
        td.testing.assert_close(mean, np.array(x.astype(np.float64).mean()), np.float16)
        td.testing.assert_close(low, partial.min(0, keepdims=True), np.float32)


@td.tile_kernel
def reduce_dims(x, dims: td.constexpr):
    """mamba's chunk-scan backward: `dD[:n].sum(dim=(0, 1, 2))`, a reduction over several
    dimensions at once (here of a float16 tensor: accumulated in float32 throughout)."""
    return x[:2].sum(dim=dims), x.mean((1, -1), keepdim=True), torch.amax(x, dim=[0, 2])


def test_host_reductions_over_several_dimensions() -> None:
    x = np.random.default_rng(14).standard_normal((3, 4, 5, 6)).astype(np.float16)
    x64 = x.astype(np.float64)
    total, mean, top = reduce_dims(x, (0, 1, 3))
    assert total.dtype == mean.dtype == np.float16 and mean.shape == (3, 1, 5, 1)  # torch's
    td.testing.assert_close(total, x64[:2].sum((0, 1, 3)), np.float16)
    td.testing.assert_close(mean, x64.mean((1, 3), keepdims=True), np.float16)
    np.testing.assert_array_equal(top, x.max((0, 2)))
    with pytest.raises(td.TraceError, match=r"dim must be distinct axes .* got \(1, -3\)"):
        reduce_dims(x, (1, -3))


@td.tile_kernel
def host_views_of_torch(x, mask):
    """torch's host-code spellings of FlagGems' wrappers: `flatten(start, end)`, `ravel`,
    `view_as`, `torch.sum(x, dim)`, and `mask.sum()` of bools (an int64 count)."""
    flat = x.flatten(1, 2)
    out = td.empty(flat.shape, dtype=x.dtype)
    for tm, tn in td.tile(*flat.shape):
        out[tm, tn] = flat[tm, tn] * 2.0
    return out.view_as(x), torch.sum(x.ravel().view_as(x), 0), mask.sum()


def test_host_views_spelled_as_torch_and_a_count_of_bools() -> None:
    x = np.random.default_rng(30).standard_normal((3, 4, 5)).astype(np.float32)
    mask = np.random.default_rng(31).random(37) < 0.5
    for backend in ("numpy", "triton-interpret"):
        doubled, summed, count = host_views_of_torch.run(x, mask, backend=backend)
        np.testing.assert_array_equal(doubled, 2 * x)
        td.testing.assert_close(summed, x.astype(np.float64).sum(0), np.float32)
        assert count.dtype == np.int64 and count.shape == () and count == mask.sum()

    @td.tile_kernel
    def rolled(x):
        return torch.roll(x, 1, 0)

    with pytest.raises(td.TraceError, match="torch.roll has no tiledsl counterpart"):
        rolled(np.ones((4, 4), np.float32))
