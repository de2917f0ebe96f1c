"""Arguments whose values host code reads (tiledsl/frontend/valued_args.py): fla's varlen
chunk indices from `cu_seqlens`, vLLM's LoRA early return on a CPU flag, mamba's
`np.diff(query_start_loc)`. The kernel traces once per values, with the host code running on
real tensors, and what it computes reaches the launches as captured tensors."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import run_on

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = triton.language


def prepare_chunk_indices(cu_seqlens, chunk_size):  # fla's (fla/ops/utils/index.py), as written
    counts = triton.cdiv(torch.diff(cu_seqlens), chunk_size)
    indices = torch.cat([torch.arange(n) for n in counts.tolist()])
    return torch.stack([indices.eq(0).cumsum(0) - 1, indices], 1).to(cu_seqlens)


@triton.jit
def _chunk_sum(x_ptr, out_ptr, cu_ptr, idx_ptr, BT: tl.constexpr):
    i_t = tl.program_id(0)
    i_n, i_c = tl.load(idx_ptr + i_t * 2).to(tl.int32), tl.load(idx_ptr + i_t * 2 + 1).to(tl.int32)
    bos, eos = tl.load(cu_ptr + i_n).to(tl.int32), tl.load(cu_ptr + i_n + 1).to(tl.int32)
    o = bos + i_c * BT + tl.arange(0, BT)
    tl.store(out_ptr + i_t, tl.sum(tl.load(x_ptr + o, mask=o < eos, other=0.0)))


@td.tile_kernel
def chunk_sums(x, cu_seqlens):
    idx = prepare_chunk_indices(cu_seqlens, 4)
    out = torch.empty(len(idx), dtype=x.dtype)  # a grid sized by the values
    _chunk_sum[(len(idx),)](x, out, cu_seqlens, idx, 4)
    return out


def _chunk_sums(x: np.ndarray, cu: list[int]) -> np.ndarray:
    return np.array([x[s:min(s + 4, e)].astype(np.float64).sum()
                     for s0, e in zip(cu[:-1], cu[1:]) for s in range(s0, e, 4)])


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_varlen_chunk_indices_from_cu_seqlens(backend: str) -> None:
    x = np.random.default_rng(81).standard_normal(37).astype(np.float32)
    for cu in ([0, 5, 6, 17, 37], [0, 10, 37], [0, 5, 6, 17, 37]):
        got = run_on(chunk_sums, (x, np.array(cu, np.int32)), backend)
        np.testing.assert_allclose(got, _chunk_sums(x, cu), rtol=1e-6, atol=1e-6)
    assert chunk_sums.specs.valued == {"cu_seqlens"}


@td.tile_kernel
def lora_or_not(x, no_lora_flag_cpu):
    if no_lora_flag_cpu.item():  # vLLM's LoRA ops return early without adapters
        return x.clone()
    return x * 2


@td.tile_kernel
def seqlens_by_numpy(x, query_start_loc):
    seqlens = np.diff(query_start_loc.to("cpu"))  # mamba's causal conv (vLLM)
    out = torch.empty(int(seqlens.max()), dtype=x.dtype)
    out.fill_(float(len(seqlens)))
    table = torch.full((8,), -1, dtype=torch.int64)
    table[0:len(seqlens)].copy_(torch.from_numpy(np.repeat(np.arange(3), 1)))  # (its grid
    return out, table  # function's program table: a user's tensor copied in host code)


@td.tile_kernel
def total_sized(lengths, width: int):
    total_length = lengths.sum().item()  # TritonBench's get_xine_cache: a host sum's value
    out = torch.empty((total_length, width), dtype=torch.float32)
    out.fill_(1.0)
    return out


class _Metadata:  # vLLM's conv metadata: tables the wrapper moves to the input's device
    def __init__(self) -> None:
        self.batch_ptr = torch.tensor([0, 0, 1], dtype=torch.int32)


META = _Metadata()


@triton.jit
def _rows_of(x_ptr, batch_ptr, out_ptr):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.load(x_ptr + tl.load(batch_ptr + i)))


@td.tile_kernel
def rows_by_metadata(x):
    batch_ptr = META.batch_ptr
    if batch_ptr.device != x.device:
        batch_ptr = batch_ptr.to(x.device)  # (a user's tensor: where the call's arrays are)
    out = torch.empty(3, dtype=x.dtype)
    _rows_of[(3,)](x, batch_ptr, out)
    return out


def test_a_flag_s_item_and_numpy_of_an_argument() -> None:
    np.testing.assert_array_equal(rows_by_metadata(np.array([5.0, 7.0], np.float32)),
                                  [5.0, 5.0, 7.0])
    assert total_sized(torch.tensor([3, 1, 4], dtype=torch.int32), 2).shape == (8, 2)
    x = torch.randn(6)
    torch.testing.assert_close(lora_or_not(x, torch.tensor([True])), x)
    torch.testing.assert_close(lora_or_not(x, torch.tensor([False])), 2 * x)
    out, table = seqlens_by_numpy(x, torch.tensor([0, 3, 10, 12], dtype=torch.int32))
    assert out.shape == (7,) and bool((out == 3).all())
    assert table.tolist() == [0, 1, 2, -1, -1, -1, -1, -1]


@triton.jit
def _element_mul(X_ptr, X_stride, grad_output_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    X_ptr += program_id * X_stride
    grad_output = tl.load(grad_output_ptr)
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols)
        tl.store(X_ptr + X_offsets, X_block * grad_output, mask=X_offsets < n_cols)


@td.tile_kernel
def cross_entropy_backward(_input, grad_output):  # Liger's, as written
    if torch.equal(grad_output, torch.tensor(1.0, device=grad_output.device)):
        pass
    else:
        BT, V = _input.shape
        BLOCK_SIZE = min(65536 // 2, triton.next_power_of_2(V))
        _element_mul[(BT,)](_input, _input.stride(-2), grad_output, V, BLOCK_SIZE=BLOCK_SIZE,
                            num_warps=32)
    return _input


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_0d_argument_s_value_tested_in_host_code(backend: str) -> None:
    x = np.random.default_rng(83).standard_normal((5, 37)).astype(np.float32)
    for g in (1.0, 2.5, 1.0):
        out = run_on(cross_entropy_backward, (x.copy(), np.array(g, np.float32)), backend)
        np.testing.assert_array_equal(out, x * np.float32(g))


@td.tile_kernel
def writes_what_it_reads(x, cu_seqlens):
    idx = prepare_chunk_indices(cu_seqlens, 4)
    out = torch.empty(len(idx), dtype=x.dtype)
    _chunk_sum[(len(idx),)](x, out, cu_seqlens, idx, 4)
    _bump[(1,)](cu_seqlens)  # its launch would write the trace's copy
    return out


@triton.jit
def _bump(p):
    tl.store(p, tl.load(p) + 1)


@td.tile_kernel
def reads_float_values(x):
    return torch.tensor(x.tolist())


def test_what_values_may_not_do(tmp_path) -> None:  # type: ignore[no-untyped-def]
    x = np.random.default_rng(82).standard_normal(37).astype(np.float32)
    with pytest.raises(td.TraceError, match="writes 'cu_seqlens', whose values its host code"):
        writes_what_it_reads(x, np.array([0, 5, 37], np.int32))
    with pytest.raises(td.TraceError, match="tolist\\(\\): the tensor's values are the"):
        reads_float_values(x)  # (a float tensor's values are data, not sizes)
    flag = np.array([True])
    with pytest.raises(td.TraceError, match="reads the values of no_lora_flag_cpu"):
        lora_or_not.export(tmp_path / "lora.tdpkg", x, flag)


@triton.jit
def _fill_starts(starts_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(starts_ptr + offs, mask=offs < n) * 10, mask=offs < n)


def permute_indices(tokens, alignment):
    """torchao's `generate_permute_indices`: torch host math on the values (`clamp_min` has no
    tiledsl counterpart: the argument is valued), then a launch, returning both."""
    sizes = torch.clamp_min(tokens, alignment)
    offsets = torch.cumsum(sizes, 0) - sizes
    out = torch.empty_like(offsets)
    _fill_starts[(1,)](offsets, out, offsets.numel(), BLOCK=16)
    return out, sizes


@td.tile_kernel
def permuted(tokens):
    return permute_indices(tokens, 3)


def test_a_helper_on_real_tensors_that_launches_is_traced() -> None:
    """Run as Python, the helper would launch real Triton on the CPU: it is traced instead,
    and the torch tensor it returns comes back as the kernel's output."""
    tokens = torch.tensor([4, 0, 7, 2], dtype=torch.int64)
    out, sizes = permuted(tokens)
    want_sizes = torch.clamp_min(tokens, 3)
    assert torch.equal(sizes, want_sizes)
    assert torch.equal(out, (torch.cumsum(want_sizes, 0) - want_sizes) * 10)
