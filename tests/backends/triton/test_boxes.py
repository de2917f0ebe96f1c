"""boxes.py: a scalar-indexed descriptor dimension folds into the next where that is the same
memory and no box leaves its batch; the launcher describes the folded tensor, and the
interpreter's answers agree with the references either way (a ragged attention:
test_triton_interpret.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.triton.boxes import BoxDim, fold
from support import example, fresh, kernel_of


def test_fold_merges_a_scalar_index_into_a_contiguous_next_dimension() -> None:
    b = BoxDim(4, 4096 * 64, 1, "begin_bh", True, True)
    seq = BoxDim(4096, 64, 64, "begin_tk", False, True)
    d = BoxDim(64, 1, 64, "0", False, True)
    (rows, cols) = fold([b, seq, d])
    assert (rows.extent, rows.stride, rows.box) == (4 * 4096, 64, 64)
    assert rows.coord == "begin_bh * 4096 + begin_tk" and not rows.scalar and cols == d
    # two scalar indices in a row fold into one, with an expression's coordinate parenthesized
    h = BoxDim(8, 4096 * 64, 1, "pid + 1", True, True)
    b8 = BoxDim(2, 8 * 4096 * 64, 1, "b", True, True)
    assert fold([b8, h, seq, d])[0].coord == "(b * 8 + pid + 1) * 4096 + begin_tk"
    assert fold([b, BoxDim(4096, 64, 64, "0", False, True), d])[0].coord == "begin_bh * 4096"


@pytest.mark.parametrize("why, dims", [
    ("a box may leave its batch (zeros there, not the next batch's rows)",
     [BoxDim(4, 40 * 64, 1, "b", True, True), BoxDim(40, 64, 64, "t", False, False)]),
    ("the batch is not the sequence repeated (padded rows)",
     [BoxDim(4, 4104 * 64, 1, "b", True, True), BoxDim(4096, 64, 64, "t", False, True)]),
    ("a tile before the sequence, not a scalar index",
     [BoxDim(4, 4096 * 64, 2, "b", False, True), BoxDim(4096, 64, 64, "t", False, True)]),
    ("coordinates past 32 bits",
     [BoxDim(2**16, 2**16 * 64, 1, "b", True, True), BoxDim(2**16, 64, 64, "t", False, True)]),
])
def test_fold_keeps_dimensions_that_are_not_the_same_memory(why: str, dims: list) -> None:
    assert fold(dims + [BoxDim(64, 1, 64, "0", False, True)])[:2] == dims, why


def test_fold_keeps_two_dimensions() -> None:
    """Triton's descriptors are rank 2 to 5: `x[b, :]` stays a (1, n) box."""
    dims = [BoxDim(4, 64, 1, "b", True, True), BoxDim(64, 1, 64, "0", False, True)]
    assert fold(dims) == dims


@pytest.mark.parametrize("name, dims, blocks, folded, unfolded", [
    ("attention", {"batch": 2, "seq": 64, "d": 32}, (32, 16),
     "q_desc.load([begin_bh * 64 + begin_tq, 0])", None),
    # a[i, tm, tk] folds (m is whole tiles); b[i, tk, tn] does not (the last K tile is cut)
    ("batched_matmul", {"batch": 3, "m": 32, "k": 48, "n": 32}, (32, 32, 32),
     "a_desc.load([begin_bi * 32 + begin_tm, begin_tk])",
     "b_desc.load([begin_bi, begin_tk, begin_tn])"),
], ids=["attention", "bmm-ragged-k"])
def test_folded_descriptors_run_in_the_interpreter(name: str, dims: dict, blocks: tuple,
                                                     folded: str, unfolded: str | None) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(5), dims, np.float16)
    config = td.Config(blocks, 4, 2, tma=True)
    source = kernel_of(name).source(*args, target="triton", config=config)
    assert folded in source and (unfolded is None or unfolded in source)
    out = kernel_of(name).run(*fresh(args), backend="triton-interpret", config=config)
    td.testing.assert_close(out, mod.reference(*fresh(args)), np.float16)


@td.tile_kernel
def zero_then_mm(x, w, out):
    """vLLM's lora_shrink: `output.zero_()` in host code, then a dot: with tma=True the fill
    stores a Python number through a descriptor."""
    out.fill_(0)
    for tm in td.tile(x.shape[0]):
        out[0, tm, :] = x[tm, :] @ w[:, :]


def test_a_fill_through_a_descriptor_stores_a_full_tile() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((37, 32)).astype(np.float16)
    w = rng.standard_normal((32, 16)).astype(np.float16)
    out = np.full((1, 37, 16), 7.0, np.float32)
    config = zero_then_mm.config_space(x, w, out, backend="triton").default()
    config = td.Config(config.block_sizes, config.num_warps, config.num_stages, tma=True)
    assert "tl.full(" in zero_then_mm.source(x, w, out, target="triton", config=config)
    zero_then_mm.run(x, w, out, backend="triton-interpret", config=config)
    td.testing.assert_close(out[0], x.astype(np.float64) @ w, np.float16)
    assert zero_then_mm.compile(x, w, out, arch="sm_90", config=config)  # as a GPU would
