"""Triton's tensor descriptors (tiledsl/lang/tensor_descriptors.py): made in the kernel
(`tl.make_tensor_descriptor`) or on the host (`TensorDescriptor`, `from_tensor`) and passed to
a launch, read and written block by block with every dimension bounds-checked, as the
fused-attention and persistent-matmul tutorials write them."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from tiledsl.testing import assert_close

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")
tl = triton.language
TensorDescriptor = pytest.importorskip("triton.tools.tensor_descriptor").TensorDescriptor
BACKENDS = ["numpy", "triton-interpret"]


@triton.jit
def _shift_rows(X, Y, M, N, BM: tl.constexpr, BN: tl.constexpr, PAD: tl.constexpr):
    """Each program copies a block one row down, reading past both ends of the tensor."""
    dx = tl.make_tensor_descriptor(X, shape=[M, N], strides=[N, 1], block_shape=[BM, BN],
                                   padding_option=PAD)
    dy = tl.make_tensor_descriptor(Y, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    row, col = tl.program_id(0) * BM, tl.program_id(1) * BN
    dy.store([row, col], dx.load([row - 1, col]))


@td.tile_kernel
def shifted(x, pad: str = "zero"):
    y = torch.empty_like(x)
    M, N = x.shape
    _shift_rows[(triton.cdiv(M, 16), triton.cdiv(N, 16))](x, y, M, N, 16, 16, pad)
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_descriptor_reads_padding_outside_and_writes_only_inside(backend: str) -> None:
    x = np.random.default_rng(80).standard_normal((37, 21)).astype(np.float32)
    want = np.concatenate([np.zeros((1, 21)), x[:-1]]).astype(np.float64)
    assert_close(shifted.run(x, backend=backend), want, np.float32)
    nan = shifted.run(x, "nan", backend=backend)
    assert np.isnan(nan[0]).all()  # row -1, padded with NaN
    assert_close(nan[1:], x[:-1], np.float32)


def _keep_small(configs, named_args, **kwargs):  # type: ignore[no-untyped-def]
    """Triton's early_config_prune: the positional arguments by name, the keywords apart."""
    return [c for c in configs if c.kwargs["BM"] <= kwargs["M"]]


def _set_blocks(nargs):  # type: ignore[no-untyped-def]
    """The fused-attention tutorial's pre_hook: block shapes set from the config."""
    if isinstance(nargs["a_desc"], TensorDescriptor):
        nargs["a_desc"].block_shape = [nargs["BM"], nargs["BK"]]
    nargs["b_desc"].block_shape = [nargs["BN"], nargs["BK"]]
    nargs["c_desc"].block_shape = [nargs["BM"], nargs["BN"]]


@triton.autotune(configs=[triton.Config({"BM": bm, "BN": 16, "BK": 16}, pre_hook=_set_blocks)
                          for bm in (16, 32, 64)], key=["M"],
                 prune_configs_by={"early_config_prune": _keep_small})
@triton.jit
def _matmul_desc(a_desc, b_desc, c_desc, K, M: tl.constexpr, BM: tl.constexpr,
                 BN: tl.constexpr, BK: tl.constexpr):
    if not isinstance(a_desc, tl.tensor_descriptor):  # the tutorials' _maybe_make_tensor_desc
        a_desc = tl.make_tensor_descriptor(a_desc, [M, K], [K, 1], [BM, BK])
    row, col = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(a_desc.load([row, k]), b_desc.load([col, k]).T)
    c_desc.store([row, col], acc.to(c_desc.dtype))


@td.tile_kernel
def matmul_desc(a, b, host_a: bool = True):
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    dummy = [1, 1]
    a_desc = TensorDescriptor(a, [M, K], [K, 1], dummy) if host_a else a
    b_desc = TensorDescriptor.from_tensor(b, dummy)
    c_desc = TensorDescriptor(c, shape=[M, N], strides=[N, 1], block_shape=dummy)
    grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))  # noqa: E731
    _matmul_desc[grid](a_desc, b_desc, c_desc, K, M=M)
    return c


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_descriptors_with_a_pre_hook_and_a_pruned_autotune(backend: str) -> None:
    rng = np.random.default_rng(81)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((45, 40), (19, 40)))
    want = a.astype(np.float64) @ b.astype(np.float64).T
    space = matmul_desc.config_space(a, b)
    knob = next(p for p in space.params if p.name == "_matmul_desc_config")
    assert knob.choices == (0, 1)  # BM 64 > M pruned
    for host_a in (True, False):
        for config in space.sample(2):
            out = matmul_desc.run(a, b, host_a, backend=backend, config=config)
            assert_close(out, want, np.float16, factor=4)


def test_descriptor_misuse_is_named() -> None:
    @td.tile_kernel
    def on_host(x):
        return td.make_tensor_descriptor(x, [4], [1], [4])

    @td.tile_kernel
    def wrong_rank(x):
        y = td.empty_like(x)
        for pid in td.grid(1):
            d = td.make_tensor_descriptor(x, [4, 4], [4, 1], [4, 4])
            y[0:4, 0:4] = d.load([0])
        return y

    with pytest.raises(td.TraceError, match="made inside the grid"):
        on_host(np.ones(4, np.float32))
    with pytest.raises(td.ShapeError, match=r"one offset per dimension of the block \(4, 4\)"):
        wrong_rank(np.ones((4, 4), np.float32))
