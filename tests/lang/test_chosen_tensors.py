"""A tensor chosen by a runtime condition (tiledsl/frontend/choices.py): FlagGems' cat picks
its input by program (`if pid_y == 0: in_ptr = in_ptr_a elif ...`), its vstack with
`tl.where(i == 0, ptr0, ptr1)`; each access is one per option, masked by its condition."""

from __future__ import annotations

import numpy as np
import pytest
from support import gpu_backend, run_on

import tiledsl as td

BACKENDS = ["numpy", "triton-interpret", "spatial", gpu_backend()]


@td.tile_kernel
def cat_copy_func_kernel_4(out_ptr, in_ptr_a, in_ptr_b, in_ptr_c, in_ptr_d, dim_size_in_a,
                           dim_size_in_b, dim_size_in_c, dim_size_in_d, dim_size_out,
                           dim_prod_post, dim_offset_a, dim_offset_b, dim_offset_c,
                           dim_offset_d, total_elements_a, total_elements_b,
                           total_elements_c, total_elements_d, BLOCK_X: td.constexpr):
    """FlagGems' cat kernel as written (src/flag_gems/ops/cat.py), its program ids a grid."""
    most = max(total_elements_a, total_elements_b, total_elements_c, total_elements_d)
    for pid_x, pid_y in td.grid(td.cdiv(most, BLOCK_X), 4):
        if pid_y == 0:
            in_ptr = in_ptr_a
            dim_size_in = dim_size_in_a
            dim_offset = dim_offset_a
            total_elements = total_elements_a
        elif pid_y == 1:
            in_ptr = in_ptr_b
            dim_size_in = dim_size_in_b
            dim_offset = dim_offset_b
            total_elements = total_elements_b
        elif pid_y == 2:
            in_ptr = in_ptr_c
            dim_size_in = dim_size_in_c
            dim_offset = dim_offset_c
            total_elements = total_elements_c
        else:
            in_ptr = in_ptr_d
            dim_size_in = dim_size_in_d
            dim_offset = dim_offset_d
            total_elements = total_elements_d

        block_start = pid_x * BLOCK_X
        offsets = td.arange(0, BLOCK_X)
        mask = block_start + offsets < total_elements
        idx = block_start + offsets
        pre_idx = idx // (dim_size_in * dim_prod_post)
        dim_idx = (idx // dim_prod_post) % dim_size_in
        post_idx = idx % dim_prod_post
        out_idx = (pre_idx * dim_size_out * dim_prod_post
                   + (dim_idx + dim_offset) * dim_prod_post + post_idx)
        data = td.load(in_ptr + idx, mask=mask)
        td.store(out_ptr + out_idx, data, mask=mask)


def _cat_args(xs: list[np.ndarray]) -> tuple:
    sizes = [x.shape[1] for x in xs]
    out = np.zeros((xs[0].shape[0], sum(sizes), xs[0].shape[2]), xs[0].dtype)
    offsets = np.cumsum([0, *sizes[:-1]]).tolist()
    return (out, *xs, *sizes, out.shape[1], xs[0].shape[2], *offsets,
            *(x.size for x in xs), 64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_flag_gems_cat_picks_its_input_by_program(backend: str) -> None:
    rng = np.random.default_rng(11)
    xs = [rng.standard_normal((3, n, 7)).astype(np.float32) for n in (5, 4, 9, 2)]
    args = _cat_args(xs)
    run_on(cat_copy_func_kernel_4, args, backend)
    np.testing.assert_array_equal(args[0], np.concatenate(xs, axis=1))


@td.tile_kernel
def vstack_rows(out, x0, x1, n0, n1, BLOCK: td.constexpr, racing: td.constexpr):
    """FlagGems' vstack: `tl.where(tensor_idx == 0, x_ptr0, x_ptr1)` picks the input, and the
    row offset with it (`racing`: both inputs land on the first rows)."""
    for pid_x, tensor_idx in td.grid(td.cdiv(max(n0, n1), BLOCK), 2):
        ptr = td.where(tensor_idx == 0, x0, x1)
        n = td.where(tensor_idx == 0, n0, n1)
        start = td.where(tensor_idx == 0 or racing, 0, n0)
        offs = pid_x * BLOCK + td.arange(0, BLOCK)
        td.store(out + start + offs, td.load(ptr + offs, mask=offs < n), mask=offs < n)


def test_flag_gems_vstack_chooses_with_where() -> None:
    x0, x1 = np.arange(1.0, 38.0, dtype=np.float32), -np.arange(1.0, 21.0, dtype=np.float32)
    for backend in ("numpy", "triton-interpret"):
        out = np.zeros(57, np.float32)
        vstack_rows.run(out, x0, x1, 37, 20, 16, False, backend=backend)
        np.testing.assert_array_equal(out, np.concatenate([x0, x1]))
    with pytest.raises(td.TraceError, match="the same elements|writes too"):
        vstack_rows(np.zeros(57, np.float32), x0, x1, 37, 20, 16, True)


@td.tile_kernel
def mixed_choice(a, b, out):
    for pid in td.grid(2):
        p = a if pid == 0 else b
        td.store(out + pid, td.load(p).to(td.float32))


@td.tile_kernel
def scaled_choice(a, b, out):
    for pid in td.grid(2):
        p = a if pid == 0 else b
        td.store(out + pid, td.load(p * 2))


def test_a_choice_s_errors_name_the_line() -> None:
    with pytest.raises(td.TraceError, match="dtypes float16, float32") as e:
        mixed_choice(np.ones(1, np.float32), np.ones(1, np.float16), np.zeros(2, np.float32))
    assert "test_chosen_tensors.py" in str(e.value) and e.value.hint
    with pytest.raises(td.TraceError, match="takes \\+ and - of integer offsets"):
        scaled_choice(np.ones(1, np.float32), np.ones(1, np.float32), np.zeros(2, np.float32))


@td.tile_kernel
def rows_from(x, y, out):
    """Tiles of a chosen tensor: `src[t]` loads and `dst[t] = v` stores per option."""
    for t in td.tile(x.shape[0]):
        src, dst = x, out
        if td.sum(x[t]) > 0:
            src = y
        dst[t] = src[t] * 2.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_chosen_tensor_indexed_by_tiles(backend: str) -> None:
    rng = np.random.default_rng(12)
    x, y = (rng.standard_normal(45).astype(np.float32) for _ in range(2))
    out = np.zeros_like(x)
    config = td.Config((8,))
    if backend == "spatial":
        config = rows_from.config_space(x, y, out, backend="spatial").complete(config)
    run_on(rows_from, (x, y, out), backend, config=config)
    pos = np.add.reduceat(x, np.arange(0, 45, 8)) > 0
    np.testing.assert_array_equal(out, 2 * np.where(np.repeat(pos, 8)[:45], y, x))
