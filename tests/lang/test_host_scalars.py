"""`x.item()` of a one-element tensor in host code (tiledsl/frontend/host_scalars.py), read on
the device by the programs that use it; `assert` on the data in host code, a device assertion;
and a column loaded from memory, which the race check leaves to the NumPy backend's record of
the data. Together: Liger's cross entropy, which counts the labels it keeps with `.item()`,
asserts they lie in the vocabulary, and writes the gradient over its logits in place, reading
each row's label column first and writing it last; and its fused linear cross entropy, which
adds host matrix products (tiledsl/lang/host_matmul.py) chunk by chunk."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from tests.support import fresh, gpu_backend, run_on
from tiledsl.testing import assert_close

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = triton.language


@triton.jit
def _cross_entropy_kernel(X_ptr, X_stride, Y_ptr, loss_ptr, n_cols, n_non_ignore, ignore_index,
                          BLOCK_SIZE: tl.constexpr):
    """After Liger's liger_cross_entropy_kernel: the loss of one row, and its gradient written
    over the row's logits."""
    program_id = tl.program_id(0).to(tl.int64)
    Y_ptr += program_id
    y = tl.load(Y_ptr)
    X_ptr += program_id * X_stride
    if y == ignore_index:
        for i in range(0, n_cols, BLOCK_SIZE):
            X_offsets = i + tl.arange(0, BLOCK_SIZE)
            tl.store(X_ptr + X_offsets, 0.0, mask=X_offsets < n_cols)
        return
    loss_ptr += program_id
    m = float("-inf")
    d = 0.0
    ori_X_y = tl.load(X_ptr + y).cast(tl.float32)  # the label's logit, before it is written
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols,
                          other=float("-inf")).cast(tl.float32)
        m_new = tl.maximum(m, tl.max(X_block))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
        m = m_new
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols,
                          other=float("-inf")).cast(tl.float32)
        X_block = tl.exp(X_block - m) / d / n_non_ignore
        tl.store(X_ptr + X_offsets, X_block, mask=X_offsets < n_cols)
    tl.store(X_ptr + y, (tl.exp(ori_X_y - m) / d - 1) / n_non_ignore)  # the label's, again
    tl.store(loss_ptr, (m + tl.log(d) - ori_X_y) / n_non_ignore)


@td.tile_kernel
def cross_entropy(_input, target, ignore_index: int = -100, check: bool = True):
    """After Liger's cross_entropy_forward: the mean loss over the kept labels, and the
    gradient, written over the logits."""
    BT, V = _input.shape
    loss_1d = torch.zeros(BT, dtype=torch.float32, device=_input.device)
    target_mask = target != ignore_index
    n_non_ignore = target_mask.sum().item()
    if check:
        assert (target * target_mask).max() < _input.shape[-1], "a label past the vocabulary"
        assert (target * target_mask).min() >= 0, "a negative label"
    _cross_entropy_kernel[(BT,)](_input, _input.stride(-2), target, loss_1d, V, n_non_ignore,
                                 ignore_index, BLOCK_SIZE=32)
    return torch.sum(loss_1d), _input


def _expected(x: np.ndarray, t: np.ndarray) -> tuple[float, np.ndarray]:
    x64, keep = x.astype(np.float64), t != -100
    p = np.exp(x64 - x64.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    rows = np.arange(len(t))
    loss = -np.log(p[rows, np.where(keep, t, 0)])
    n = keep.sum()
    grad = p / n
    grad[rows[keep], t[keep]] -= 1 / n
    return (loss * keep).sum() / n, grad * keep[:, None]


def _logits(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((9, 75)) * 3).astype(np.float32)  # 75 columns: 3 tiles, ragged
    t = rng.integers(0, 75, 9).astype(np.int64)
    t[[2, 5]] = -100
    return x, t


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_liger_style_cross_entropy_counts_with_item_and_writes_in_place(backend: str) -> None:
    x, t = _logits()
    loss, grad = _expected(x, t)
    pytest.importorskip("torch")
    space = cross_entropy.config_space(x, t, backend=backend.removesuffix("-gpu"))
    for config in (space.default(), *space.sample(1, seed=0)):
        got_loss, got_grad = run_on(cross_entropy, fresh((x, t)), backend, config=config)
        assert np.shape(got_loss) == (), config  # torch.sum of a tensor: 0-d
        assert_close(got_loss, loss, np.float32)
        assert_close(got_grad, grad, np.float32)


def test_host_asserts_on_the_data_are_device_assertions() -> None:
    x, t = _logits(1)
    t[4] = 75
    with pytest.raises(td.DeviceAssertionError, match="a label past the vocabulary"):
        cross_entropy.run(x, t, backend="numpy")
    t[4] = -3
    with pytest.raises(td.DeviceAssertionError, match="a negative label"):
        cross_entropy.run(x, t, backend="numpy")


def test_a_loaded_index_that_reaches_another_program_is_a_race_on_the_data() -> None:
    x, t = _logits(2)
    t[0] = 75 + 4  # row 0's label column is row 1's element 4, which program 1 writes
    with pytest.raises(td.RaceError, match="the index is loaded from memory") as err:
        cross_entropy.run(x, t, check=False, backend="numpy")
    assert "tl.load(X_ptr + y)" in str(err.value) or "X_ptr + X_offsets" in str(err.value)


def test_item_needs_the_device() -> None:
    @td.tile_kernel
    def branches_on_count(x):
        n = (x > 0).sum().item()
        if n > 0:
            return x
        return x

    @td.tile_kernel
    def count_as_constexpr(x):
        y = torch.empty_like(x)
        n = (x > 0).sum().item()
        _cross_entropy_kernel[(1,)](x, 1, x, y, 1, 1, 0, BLOCK_SIZE=n)
        return y

    @td.tile_kernel
    def scaled_by_count(x):  # host math on it stays on the device; grid code loads it
        n = (x > 0).sum().item() * 2 + 1
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = x[t] / n
        return out

    x = np.random.default_rng(3).standard_normal(20).astype(np.float32)
    with pytest.raises(td.TraceError, match=r"\.item\(\) is used as a Python truth value"):
        branches_on_count(x)
    with pytest.raises(td.TraceError, match=r"\.item\(\) is used as a tl.constexpr argument"):
        count_as_constexpr(x)
    assert_close(scaled_by_count(x), x.astype(np.float64) / ((x > 0).sum() * 2 + 1), np.float32)


@td.tile_kernel
def fused_linear_cross_entropy(_input, weight, target, chunk_size: int = 4):
    """After Liger's fused_linear_cross_entropy_forward: logits a chunk of rows at a time
    (`_input_chunk @ weight.t()`), the cross entropy's gradient written over them, then
    projected back onto the input and the weight."""
    BT, H = _input.shape
    V = weight.shape[0]
    grad_input = torch.zeros_like(_input)
    grad_weight = torch.zeros_like(weight)
    loss_1d = torch.zeros(BT, dtype=torch.float32, device=_input.device)
    total_n_non_ignore = (target != -100).sum().item()
    for start_idx in range(0, BT, chunk_size):
        end_idx = min(start_idx + chunk_size, BT)
        _input_chunk = _input[start_idx:end_idx]
        logits_chunk = _input_chunk @ weight.t()
        loss_1d_slice = loss_1d[start_idx:end_idx]
        _cross_entropy_kernel[(end_idx - start_idx,)](
            logits_chunk, logits_chunk.stride(-2), target[start_idx:end_idx], loss_1d_slice, V,
            total_n_non_ignore, -100, BLOCK_SIZE=32)
        loss_1d[start_idx:end_idx] = loss_1d_slice  # (itself: torch copies nothing)
        grad_input[start_idx:end_idx] = logits_chunk @ weight
        grad_weight += torch.mm(logits_chunk.t(), _input_chunk)
    return torch.sum(loss_1d), grad_input, grad_weight


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_liger_style_fused_linear_cross_entropy_multiplies_in_host_code(backend: str) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((11, 16)).astype(np.float32)  # 3 chunks of 4 rows, the last of 3
    w = (rng.standard_normal((53, 16)) * 0.3).astype(np.float32)
    t = rng.integers(0, 53, 11).astype(np.int64)
    t[[3, 8]] = -100
    logits = x.astype(np.float64) @ w.T.astype(np.float64)
    loss, grad = _expected(logits, t)
    want = (loss, grad @ w.astype(np.float64), grad.T @ x.astype(np.float64))
    space = fused_linear_cross_entropy.config_space(x, w, t, backend=backend.removesuffix("-gpu"))
    for config in (space.default(), *space.sample(1, seed=1)):
        got = run_on(fused_linear_cross_entropy, (x, w, t), backend, config=config)
        for g, e in zip(got, want):
            assert_close(g, e, np.float32)


def test_host_matmul_errors() -> None:
    @td.tile_kernel
    def mixed(a, b):
        return a @ b

    a = np.ones((4, 8), np.float32)
    with pytest.raises(td.ShapeError, match="do not multiply"):
        mixed(a, a)
    with pytest.raises(td.DTypeError, match="torch multiplies tensors of one dtype"):
        mixed(a, np.ones((8, 2), np.float16))
    with pytest.raises(td.ShapeError, match="host code multiplies 2-D tensors"):
        mixed(a, np.ones(8, np.float32))


def test_host_stores_of_one_element() -> None:
    """`t[i] = v` in host code writes one element: a number, a shape's int, a 0-d tensor (a
    full reduction) or an `.item()`."""
    @td.tile_kernel
    def summary(x):
        t = torch.zeros(4, dtype=torch.float32)
        t[0] = 5.0
        t[1] = x.shape[0]
        t[2] = x.sum()
        t[-1] = x.max().item()
        return t

    x = np.random.default_rng(6).standard_normal(37).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        got = summary.run(x, backend=backend)
        assert_close(got, np.array([5.0, 37, x.astype(np.float64).sum(), x.max()]), np.float32)
