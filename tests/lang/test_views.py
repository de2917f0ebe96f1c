"""Views: tile reshapes, permutes, joins and splits, tensor views in host code, and the small
dots the Triton backend widens to tl.dot's 16 lanes, on every CPU backend."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import example, gpu_backend, run_on, under_configs
from tiledsl.errors import ArgumentError, BackendError, ShapeError, TraceError
from tiledsl.ir.parser import parse_ir
from tiledsl.ir.printer import print_ir
from lowering.backends.spatial.arch import PRESETS, Arch

BACKENDS = ["numpy", "triton-interpret", "spatial"]


def wide_dma() -> Arch:
    """generic-8x8 with 8 DMA channels per PE: RoPE streams six tensors (issue 33 multiplexes
    streams over the 4 channels the presets have)."""
    return Arch.from_dict(dict(PRESETS["generic-8x8"]().to_dict(), dma_channels=8))


@pytest.mark.parametrize("backend", BACKENDS)
def test_rope_as_helion_writes_it(backend: str) -> None:
    mod = example("rope")
    args = mod.make_inputs(np.random.default_rng(0), {"batch": 2, "q_heads": 3, "k_heads": 1,
                                                      "seq": 37, "d": 16})
    ref = mod.reference(*args)
    arch = {"arch": wide_dma()} if backend == "spatial" else {}
    space = mod.rope.config_space(*args, backend=backend, **arch)
    for config in (space.default(), *space.sample(1, seed=0)):
        out = mod.rope.run(*args, backend=backend, config=config, **arch)
        td.testing.assert_close(out, ref, np.float32)


@td.tile_kernel
def heads_first(q, w):
    """(b, s, h*d) viewed as (b, h, s, d), scaled per head, written through a (b*h, s, d)
    view of the output and returned as (b, s, h, d)."""
    b, s, hd = q.shape
    h = w.shape[0]
    q4 = q.view(b, s, h, hd // h).permute(0, 2, 1, 3)
    out = td.empty((b, h, s, hd // h), dtype=q.dtype)
    rows = out.reshape(b * h, s, -1)
    for bi, hi in td.grid(b, h):
        for ts in td.tile(s):
            rows[bi * h + hi, ts, :] = q4[bi, hi, ts, :] * w[hi]
    return out.transpose(1, 2)


@td.tile_kernel
def negate_in_place(x):
    """Writes through a flat view of its argument."""
    flat = x.flatten()
    for t in td.tile(flat.shape[0]):
        flat[t] = -flat[t]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_views_share_memory(backend: str) -> None:
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 37, 4 * 12)).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    ref = q.reshape(2, 37, 4, 12) * w[None, None, :, None]
    for config, out in under_configs(heads_first, (q, w), backend, samples=1):
        assert np.asarray(out).shape == (2, 37, 4, 12)
        td.testing.assert_close(out, ref, np.float32)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    y = x.copy()
    negate_in_place.run(y, backend=backend)
    np.testing.assert_array_equal(y, -x)


@td.tile_kernel
def small_product(x, w):
    """A (m, 8) @ (8, 4) product: K and N under tl.dot's 16 lanes."""
    m, _ = x.shape
    out = td.empty((m, w.shape[1]), dtype=td.float32)
    for tm in td.tile(m):
        out[tm, :] = x[tm, :] @ w[:, :]
    return out


@pytest.mark.parametrize("dims", [(8, 4), (4, 32), (2, 2)], ids=str)
def test_small_dots_widen_to_mma_lanes(dims: tuple[int, int]) -> None:
    k, n = dims
    rng = np.random.default_rng(2)
    x = rng.standard_normal((37, k)).astype(np.float16)
    w = rng.standard_normal((k, n)).astype(np.float16)
    ref = x.astype(np.float64) @ w
    for config, out in under_configs(small_product, (x, w), "triton-interpret", samples=1):
        td.testing.assert_close(out, ref, np.float16)
    src = small_product.source(x, w, target="triton")
    assert "tl.dot(" in src and "tl.sum(" not in src
    if dims == (8, 4):
        assert all(r.problem is None for r in small_product.compile(x, w, arch="sm_90"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_products(backend: str) -> None:
    """`@` on 3-D tiles, as Helion's bmm: tl.dot on 3-D blocks in the generated Triton."""
    mod = example("bmm")
    args = mod.make_inputs(np.random.default_rng(4), {"batch": 3, "m": 37, "k": 21, "n": 19},
                           np.float16)
    for config, out in under_configs(mod.bmm, args, backend, samples=1):
        td.testing.assert_close(out, mod.reference(*args), np.float16)
    if backend == "triton-interpret":
        assert "acc = tl.dot(a_tile, b_tile, acc)" in mod.bmm.source(*args, target="triton")
        assert all(r.problem is None for r in mod.bmm.compile(*args, arch="sm_90"))


@td.tile_kernel
def pairs(a, b):
    """stack, transpose(a, b), unsqueeze, squeeze and flatten on tiles."""
    m, n = a.shape
    out = td.empty((m, 2 * n), dtype=a.dtype)
    for tm in td.tile(m):
        both = td.stack([a[tm, :], b[tm, :]], axis=1)  # (tm, 2, n)
        swapped = both.transpose(1, 2).unsqueeze(0).squeeze(0)  # (tm, n, 2): interleaved
        out[tm, :] = swapped.reshape(tm, -1)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_stack_and_friends(backend: str) -> None:
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((37, 16)).astype(np.float32) for _ in range(2))
    ref = np.stack([a, b], axis=2).reshape(37, 32)
    for config, out in under_configs(pairs, (a, b), backend, samples=1):
        np.testing.assert_array_equal(out, ref)


@td.tile_kernel
def expanded(a, b):
    """torch's expand and expand_as on tiles: axes of 1 grow, -1 keeps one, new axes lead."""
    m, n = a.shape
    out = td.empty((m, 4), dtype=a.dtype)
    for tm in td.tile(m):
        row = a[tm, :]
        col = b[tm].unsqueeze(1)  # (tm, 1): each sum below counts n copies
        out[tm, 0] = td.sum(col.expand_as(row), axis=1)
        out[tm, 1] = td.sum(col.expand(-1, n), axis=1)
        out[tm, 2] = td.sum(col.expand(1, tm, n), axis=2).squeeze(0)
        bm, bn = row.size()  # Helion's moe_matmul_ogs: `.view(bm, 1).expand(bm, bn)`
        valid = (b[tm] > 0).squeeze(0)  # torch: squeezing an axis not of size 1 keeps it
        kept = td.where(valid.view(bm, 1).expand(bm, bn), row * 0 + col, 0.0)
        out[tm, 3] = td.sum(kept, axis=1)
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_expand_and_expand_as(backend: str) -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((37, 5)).astype(np.float32)
    b = rng.standard_normal(37).astype(np.float32)
    ref = np.repeat(b[:, None] * 5.0, 4, axis=1)
    ref[:, 3] *= b > 0
    for config, out in under_configs(expanded, (a, b), backend, samples=1):
        td.testing.assert_close(out, ref, np.float32)


def test_view_ops_round_trip_through_ir_text() -> None:
    args = example("rope").make_inputs(np.random.default_rng(0))
    for fn in (example("rope").rope.traced(*args).ir,
               heads_first.traced(np.zeros((2, 5, 8), np.float32), np.ones(2, np.float32)).ir):
        text = print_ir(fn)
        assert print_ir(parse_ir(text)) == text


# ---- errors -------------------------------------------------------------------------------
@td.tile_kernel
def merge_blocks(x):
    m, n = x.shape
    out = td.empty((m * n,), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        v = x[tm, tn].reshape(tn, tm)
        out[tm] = v
    return out


@td.tile_kernel
def view_in_loop(x):
    m, = x.shape
    out = td.empty_like(x)
    for tm in td.tile(m):
        out[tm] = x.reshape(m)[tm]
    return out


@td.tile_kernel
def view_of_transpose(x, copy: td.constexpr = True):
    m, n = x.shape
    flat = x.T.reshape(-1) if copy else x.T.view(-1)
    out = td.empty((m * n,), dtype=x.dtype)
    for t in td.tile(m * n):
        out[t] = flat[t]
    return out


@td.tile_kernel
def ragged_merge(x):
    m, n = x.shape
    out = td.empty((1,), dtype=x.dtype)
    for _ in td.grid(1):
        acc = td.zeros((1,), dtype=td.float32)
        for t in td.tile(m, block_size=4):
            acc += td.sum(x[t, :].reshape(-1)).reshape(1)
        out[:] = acc
    return out


@td.tile_kernel
def split_three(x):
    m, = x.shape
    out = td.empty_like(x)
    for tm in td.tile(m):
        lo, hi = td.split(x[tm])
        out[tm] = lo
    return out


@td.tile_kernel
def expand_wide(x):
    m, n = x.shape
    out = td.empty_like(x)
    for tm in td.tile(m):
        out[tm, :] = x[tm, :].expand(tm, 2 * n)
    return out


def test_view_errors_name_the_line() -> None:
    x = np.ones((6, 8), np.float32)
    with pytest.raises(ShapeError, match="block-size axes keep their own") as e:
        merge_blocks(x)
    assert "x[tm, tn].reshape(tn, tm)" in str(e.value)
    with pytest.raises(TraceError, match="views of tensor 'x' are made in host code"):
        view_in_loop(np.ones(8, np.float32))
    x = np.random.default_rng(5).standard_normal((6, 8)).astype(np.float32)
    np.testing.assert_array_equal(view_of_transpose(x), x.T.reshape(-1))  # torch's copy
    with pytest.raises(ShapeError, match=r"view of shape \(48,\) .*\(permuted\) would need a "
                       "copy") as e:  # .view never copies: refused where it is written
        view_of_transpose(x, False)
    assert "x.T.view(-1)" in str(e.value)
    undone = np.ascontiguousarray(x.T).T  # transposed in memory: `x.T` is contiguous again
    np.testing.assert_array_equal(view_of_transpose(undone), x.T.reshape(-1))
    with pytest.raises(BackendError, match="lays out 'x' contiguously in DRAM"):
        view_of_transpose.run(undone, backend="spatial")
    with pytest.raises(BackendError, match="holds the lanes of tile 't'") as e:
        ragged_merge(np.ones((7, 4), np.float32))
    assert "reshape(-1)" in str(e.value)
    with pytest.raises(ShapeError, match="last axis is 2"):
        split_three(np.ones(8, np.float32))
    with pytest.raises(ShapeError, match="only axes of 1 grow") as e:
        expand_wide(x)
    assert "x[tm, :].expand(tm, 2 * n)" in str(e.value)


@td.tile_kernel
def flat_view(x):
    flat = x.view(-1)
    out = td.empty_like(flat)
    for t in td.tile(flat.shape[0]):
        out[t] = flat[t] * 2
    return out


@td.tile_kernel
def flat_copy(x):
    """Unsloth's rope: `Q.reshape(b * s, h * d)` of a transposed Q copies it, as torch's."""
    flat = x.reshape(-1)
    for t in td.tile(flat.shape[0]):
        flat[t] = flat[t] * 2
    return flat


def test_an_argument_that_cannot_be_viewed_is_refused_or_copied() -> None:
    x = np.arange(35, dtype=np.float32).reshape(5, 7).T  # transposed: no flat view
    with pytest.raises(ShapeError, match=r"strides \(1, 7\)\) would need a copy") as e:
        flat_view(x)  # the trace is for its layout: refused at the line, when traced
    assert "x.view" in str(e.value) and "x.contiguous()" in e.value.hint
    for backend in ("numpy", "triton-interpret"):  # reshape copies (the writes stay in it)
        np.testing.assert_array_equal(flat_copy.run(x, backend=backend), 2 * x.reshape(-1))
    np.testing.assert_array_equal(x, np.arange(35, dtype=np.float32).reshape(5, 7).T)
    with pytest.raises(ArgumentError, match="cannot be viewed as shape"):  # a layout no
        negate_in_place(np.arange(35, dtype=np.float32)[::-1].reshape(5, 7)[:, ::-1])  # trace


@td.tile_kernel
def group_means(x, num_groups):
    """Liger's group_norm views (batch, channels, hidden) as (batch, groups, -1) with the group
    count an int argument: traced as a static int."""
    grouped = x.view(x.shape[0], num_groups, -1)
    out = td.empty((x.shape[0], num_groups), dtype=td.float32)
    for b, g in td.grid(x.shape[0], num_groups):
        out[b, g] = td.mean(grouped[b, g, :].astype(td.float32))
    return out


def test_an_int_argument_as_a_view_size_is_traced_as_a_static_int() -> None:
    x = np.random.default_rng(4).standard_normal((2, 6, 5)).astype(np.float32)
    for groups in (2, 3):
        td.testing.assert_close(group_means(x, groups),
                                x.astype(np.float64).reshape(2, groups, -1).mean(-1), np.float32)


@td.tile_kernel
def grown_by_zeros(out, sums):
    """FlagGems' bitonic sort grows a tile with `v + zeros(shape)` (a stand-in for
    tl.broadcast_to): Triton writes the zeros as `0`, so `v + 0` kept v's shape, which a
    reshape (a crash inside Triton) or a reduction (a wrong sum) cannot take."""
    for _ in td.grid(1):
        flip = td.arange(0, 2)[None, :, None] + td.zeros((4, 2, 2), dtype=td.int32)
        td.store(out, [td.arange(0, 16)], td.reshape(flip, (16,)))
        sums[:] = td.sum(td.arange(0, 4)[None, :] + td.zeros((8, 4), dtype=td.int32), axis=0)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_tile_grown_by_a_broadcast_keeps_its_shape(backend: str) -> None:
    out, sums = np.zeros(16, np.int32), np.zeros(4, np.int32)
    grown_by_zeros.run(out, sums, backend=backend)
    np.testing.assert_array_equal(out, np.tile(np.repeat([0, 1], 2), 4))
    np.testing.assert_array_equal(sums, 8 * np.arange(4))


@td.tile_kernel
def unit_axes_dropped(x):
    """Helion's flex attention broadcasts its masks to (1, 1, tm, tn); a reshape back that
    only drops axes of 1 keeps a cut tile's lanes apart (it was refused as a merge)."""
    m, n = x.shape
    out = td.empty_like(x)
    for tm in td.tile(m, block_size=16):
        for tn in td.tile(n, block_size=16):
            s = x[tm, tn]
            keep = tm.index[:, None] >= tn.index[None, None, None, :]
            out[tm, tn] = td.where(keep, s, 0.0).reshape(s.shape)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reshape_of_axes_of_one_keeps_ragged_lanes(backend: str) -> None:
    x = np.random.default_rng(0).standard_normal((45, 37)).astype(np.float32)
    np.testing.assert_array_equal(unit_axes_dropped.run(x, backend=backend), np.tril(x))


@td.tile_kernel
def host_broadcasts(row, col, n):
    """Host code's broadcast views (torch's `expand`, `broadcast_to`, `expand_as`, Triton's
    `td.broadcast_to` of a tensor): stride-0 dimensions, read by tiles and by pointers with the
    strides read off the view (FlagGems' addr and addmv)."""
    b = row.expand(n, -1)
    c = td.broadcast_to(col, (col.shape[0], row.shape[1]))
    d = col.expand_as(c)
    s0, s1 = c.stride()
    out = td.empty((n, row.shape[1]), dtype=row.dtype)
    both = td.empty((col.shape[0], row.shape[1]), dtype=row.dtype)
    for tm, tn in td.tile(n, row.shape[1]):
        out[tm, tn] = b[tm, tn] * 2
    for pid in td.grid(col.shape[0]):
        cols = td.arange(0, 64)
        m = cols < row.shape[1]
        v = td.load(c + pid * s0 + cols * s1, mask=m) + td.load(d + pid * s0 + cols * s1, mask=m)
        td.store(both + pid * row.shape[1] + cols, v, mask=m)
    return out, both


@pytest.mark.parametrize("backend", [*BACKENDS, gpu_backend()])
def test_broadcast_views_in_host_code(backend: str) -> None:
    rng = np.random.default_rng(21)
    row, col = rng.standard_normal((1, 45)).astype(np.float32), \
        rng.standard_normal((37, 1)).astype(np.float32)
    out, both = run_on(host_broadcasts, (row, col, 29), backend)
    np.testing.assert_array_equal(out, 2 * np.broadcast_to(row, (29, 45)))
    np.testing.assert_array_equal(both, 2 * np.broadcast_to(col, (37, 45)))
    text = host_broadcasts.source(row, col, 29, target="ir")
    assert "tensor.expand" in text and print_ir(parse_ir(text)) == text


@td.tile_kernel
def store_into_expanded(row, n):
    b = row.expand(n, -1)
    for tm, tn in td.tile(n, row.shape[1]):
        b[tm, tn] = td.zeros((tm, tn), dtype=row.dtype)


def test_a_store_into_a_broadcast_view_is_refused() -> None:
    with pytest.raises(TraceError, match="an expanded view repeats the elements") as e:
        store_into_expanded(np.ones((1, 8), np.float32), 4)
    assert "b[tm, tn] = " in str(e.value)
    with pytest.raises(ShapeError, match="expands its dimensions of 1"):
        td.tile_kernel(_bad_expand)(np.ones((2, 8), np.float32))


def _bad_expand(x):
    y = x.expand(4, 8)
    for t in td.tile(4):
        y[t, 0] = 0.0


@td.tile_kernel
def colmajor_doubled(x):
    """torchao's column-major output: `x.new_empty(...).as_strided((m, k), (1, m))`."""
    m, k = x.shape
    out = x.new_empty(m, k).as_strided((m, k), (1, m))
    assert out.stride() == (1, m)
    for tm, tk in td.tile(m, k):
        out[tm, tk] = x[tm, tk] * 2
    again = td.empty_like(out).as_strided((m, k), (1, m))  # (a view's: jagged fp8 scales)
    for tm, tk in td.tile(m, k):
        again[tm, tk] = x[tm, tk] + 1
    return out, again


@td.tile_kernel
def inductor_reinterpret(x):
    """Inductor's generated wrappers (TritonBench's fused layer norm): a buffer from
    `empty_strided`, its memory viewed by `torch.ops.inductor._reinterpret_tensor`."""
    import torch
    n = x.shape[0]
    buf = torch.empty_strided((n, 2), (1, n), dtype=torch.float32)  # column-major
    view = torch.ops.inductor._reinterpret_tensor(buf, (2, n), (n, 1), 0)  # its memory, rows
    for t in td.tile(n):
        view[0, t] = x[t] * 3
        view[1, t] = x[t] * 5
    return buf


def test_as_strided_as_a_permuted_row_major_view() -> None:
    x = np.random.default_rng(44).standard_normal((37, 5)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        out, again = colmajor_doubled.run(x, backend=backend)
        np.testing.assert_array_equal(out, 2 * x)
        np.testing.assert_array_equal(again, x + 1)
        assert out.strides == again.strides == (4, 37 * 4)  # column-major, as torch's

    import torch
    cols = inductor_reinterpret(torch.from_numpy(x[:, 0].copy())).numpy()
    np.testing.assert_array_equal(cols, np.stack([3 * x[:, 0], 5 * x[:, 0]], 1))

    @td.tile_kernel
    def overlapping(x):
        return x.as_strided((2, 2), (3, 1))

    with pytest.raises(td.ShapeError, match=r"as_strided\(\(2, 2\), \(3, 1\)\): tiledsl takes"):
        overlapping(x)


@td.tile_kernel
def diag_embed(x, off, dim1: td.constexpr, dim2: td.constexpr):
    """FlagGems' diag_embed and diagonal_backward: zeros written through torch.diagonal's view
    (an int argument's offset and dimensions are static)."""
    import torch
    b, n = x.shape
    m = n + abs(off)
    shape = [b]
    shape.insert(dim1, m)
    shape.insert(dim2, m)
    y = torch.zeros(shape, dtype=x.dtype, device=x.device)
    d = torch.diagonal(y, off, dim1, dim2)
    assert d.shape == (b, n) and d.stride() == torch.zeros(shape).diagonal(off, dim1, dim2).stride()
    for tb, tn in td.tile(b, n):
        d[tb, tn] = x[tb, tn]
    return y


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_writes_through_a_diagonal_view(backend: str) -> None:
    pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    for off, dim1, dim2 in ((0, 1, 2), (2, 1, 2), (-1, 1, 2), (1, 0, 1)):
        want = np.zeros([3, 5 + abs(off), 5 + abs(off)])
        for i in range(3):
            want[i] = np.diag(x[i], off)
        want = np.moveaxis(want, 0, [d for d in range(3) if d not in (dim1, dim2)][0])
        np.testing.assert_array_equal(diag_embed.run(x, off, dim1, dim2, backend=backend), want)
    with pytest.raises(ShapeError, match="not adjacent in memory"):
        diag_embed.run(x, 0, 0, 2, backend=backend)
