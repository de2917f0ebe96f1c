"""Shifted tiles (`x[tm + 1, tn]`, `x[t + k]`) and bounded or stepped slices (`out[tm, :n1]`,
`x[tm, 1::2]`) on every CPU backend under sampled configs, against NumPy in float64 on ragged
shapes: lanes shifted off a tensor load 0 and are dropped by stores, lanes past the tile's own
range stay masked (also for reductions over the shifted axis), and stores to disjoint slices
pass the overlap check while overlapping ones are refused when tracing."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pytest
from support import under_configs

import tiledsl as td

BACKENDS = ["numpy", "triton-interpret", "spatial"]


@td.tile_kernel
def second_difference(x):
    """x[i-1] - 2 x[i] + x[i+1] down the rows, 0 outside (negative and positive shifts)."""
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        out[tm, tn] = x[tm - 1, tn] - 2.0 * x[tm, tn] + x[tm + 1, tn]
    return out


@td.tile_kernel
def shift_by(x, k: int):
    """out[i] = x[i + k], 0 where i + k is outside x (a runtime shift)."""
    (n,) = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for t in td.tile(n):
        out[t] = x[t + k]
    return out


@td.tile_kernel
def shifted_row_stats(x):
    """Sum and max over j < n of x[i, j - 2] (0 for j < 2), tile by tile: the lanes of the last
    tile past n would read x[i, n-2:] if they were not masked."""
    m, n = x.shape
    total = td.empty((m,), dtype=td.float32)
    best = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        s = td.zeros((tm,), dtype=td.float32)
        b = td.full((tm,), -float("inf"), dtype=td.float32)
        for tn in td.tile(n):
            v = x[tm, tn - 2]
            s += td.sum(v, axis=1)
            b = td.maximum(b, td.max(v, axis=1))
        total[tm] = s
        best[tm] = b
    return total, best


@td.tile_kernel
def shifted_lane_max(x):
    """Row maxima through a (tm, 16) lane accumulator over 16-wide tiles shifted by 0: the
    lanes of the last tile past n (which load 0) keep what the accumulator held
    (keep-carried-lanes), so rows of negative numbers do not come out 0."""
    m, n = x.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        best = td.full((tm, 16), -float("inf"), dtype=td.float32)
        for tn in td.tile(n, block_size=16):
            best = td.maximum(best, x[tm, tn + 0])
        out[tm] = td.max(best, axis=1)
    return out


@td.tile_kernel
def store_back(x):
    """out[i - 3] = x[i]: the lanes of the last tile past n land inside out and are dropped."""
    (n,) = x.shape
    out = td.zeros((n,), dtype=x.dtype)
    for t in td.tile(n):
        out[t - 3] = x[t]
    return out


@td.tile_kernel
def concat_tiles(x, y):
    """Tiles narrower than the output's columns, placed by shifts (`tn + 0` and `tn + n1`)."""
    m, n1 = x.shape
    _, n2 = y.shape
    out = td.empty((m, n1 + n2), dtype=x.dtype)
    for tm in td.tile(m):
        for tn in td.tile(n1):
            out[tm, tn + 0] = x[tm, tn]
        for tn in td.tile(n2):
            out[tm, tn + n1] = y[tm, tn]
    return out


@td.tile_kernel
def concat_helion(x, y):
    """Helion's concat2d_dim1: tiles over the output's columns read both inputs, shifted."""
    m, n1 = x.shape
    _, n2 = y.shape
    out = td.empty((m, n1 + n2), dtype=x.dtype)
    for tile0, tile1 in td.tile(m, n1 + n2):
        x_part = x[tile0, tile1 + 0]  # lanes at or past n1 read 0
        y_part = y[tile0, tile1 - n1]  # lanes before n1 read 0
        out[tile0, tile1] = td.where((tile1.index < n1)[None, :], x_part, y_part)
    return out


@td.tile_kernel
def interleave(a, b):
    """out[:, ::2] = a, out[:, 1::2] = b: two stepped stores into disjoint columns."""
    m, n = a.shape
    out = td.empty((m, 2 * n), dtype=a.dtype)
    for tm in td.tile(m):
        out[tm, ::2] = a[tm, :]
        out[tm, 1::2] = b[tm, :]
    return out


@td.tile_kernel
def strided_reads(x):
    """Odd minus even columns, and the sum of every third column from 2 (stepped loads)."""
    m, n = x.shape
    diff = td.empty((m, n // 2), dtype=x.dtype)
    thirds = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        diff[tm, :] = x[tm, 1::2] - x[tm, :n - 1:2]
        thirds[tm] = td.sum(x[tm, 2::3], axis=1)
    return diff, thirds


rng = np.random.default_rng(11)
X = rng.standard_normal((37, 23)).astype(np.float32)
Y = rng.standard_normal((37, 5)).astype(np.float32)
V = rng.standard_normal(37).astype(np.float32)


def _shifted(x: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros_like(x)
    src = np.arange(len(x)) + k
    ok = (src >= 0) & (src < len(x))
    out[ok] = x[src[ok]]
    return out


def _row_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.concatenate([np.zeros((x.shape[0], 2)), x[:, :-2]], axis=1)
    return v.sum(axis=1), v.max(axis=1)


def _second_difference(x: np.ndarray) -> np.ndarray:
    p = np.pad(x, ((1, 1), (0, 0)))
    return p[:-2] - 2 * x + p[2:]


def _store_back(x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    out[:-3] = x[3:]
    return out


CASES: dict[str, tuple[Any, tuple, Callable[..., Any]]] = {
    "second difference": (second_difference, (X[:13, :11],), _second_difference),
    "runtime shift -5": (shift_by, (V, -5), _shifted),
    "runtime shift 9": (shift_by, (V, 9), _shifted),
    "reductions over a shifted axis": (shifted_row_stats, (X,), _row_stats),
    "lane accumulator": (shifted_lane_max, (X - 5.0,), lambda x: x.max(axis=1)),
    "shifted store": (store_back, (V,), _store_back),
    "narrow tiles": (concat_tiles, (X, Y), lambda x, y: np.concatenate([x, y], axis=1)),
    "helion concat": (concat_helion, (X[:13, :11], Y[:13]),
                      lambda x, y: np.concatenate([x, y], axis=1)),
    "interleave": (interleave, (X, Y[:, :1].repeat(23, 1) + X),
                   lambda a, b: np.stack([a, b], axis=2).reshape(a.shape[0], -1)),
    "strided reads": (strided_reads, (X,),
                      lambda x: (x[:, 1::2] - x[:, :-1:2], x[:, 2::3].sum(axis=1))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_shifts_and_slices_match_numpy(case: str, backend: str) -> None:
    kernel, args, reference = CASES[case]
    ref = reference(*(a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in args))
    refs = ref if isinstance(ref, tuple) else (ref,)
    for config, out in under_configs(kernel, args, backend, seed=4):
        outs = out if isinstance(out, tuple) else (out,)
        for o, r in zip(outs, refs, strict=True):
            np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5, err_msg=f"{case}: {config}")


@pytest.mark.parametrize("backend", ["numpy", "spatial"])
@pytest.mark.parametrize("k", [-1000, 1000, 36])
def test_lanes_shifted_off_the_tensor_are_masked_not_errors(backend: str, k: int) -> None:
    """NumPy and spatial check every scalar index, but a shifted tile's lanes outside the
    tensor are defined: they read 0."""
    np.testing.assert_array_equal(shift_by.run(V, k, backend=backend), _shifted(V, k))


def _trace_error(body: Callable[..., Any], *args: Any) -> str:
    with pytest.raises(td.TraceError) as info:
        td.tile_kernel(body)(*args)
    return str(info.value)


def test_overlapping_stores_are_refused_across_programs_and_ordered_in_one() -> None:
    def overlapping_slices(x, y):  # column n1 - 1 twice, in one program: the later store lands
        m, n1 = x.shape
        out = td.empty((m, n1 + 1), dtype=x.dtype)
        for tm in td.tile(m):
            out[tm, :n1] = x[tm, :]
            out[tm, n1 - 1:] = y[tm, :2]
        return out

    def shifted_twice(x):
        (n,) = x.shape
        out = td.empty((n + 1,), dtype=x.dtype)
        for t in td.tile(n):
            out[t + 0] = x[t]
            out[t + 1] = x[t]
        return out

    def pairs_that_meet(x):  # program g's 2g + 2 is program g + 1's 2g
        y = td.empty_like(x)
        for g in td.grid(x.shape[0] // 2 - 1):
            y[2 * g] = x[2 * g]
            y[2 * g + 2] = x[2 * g]
        return y

    def gcd_divides(x):  # 4i + 2j + 2 is 4i + 2(j + 1)
        y = td.empty((8 * x.shape[0],), dtype=x.dtype)
        for i, j in td.grid(x.shape[0], 2):
            y[4 * i + 2 * j] = x[i]
            y[4 * i + 2 * j + 2] = x[i]
        return y

    for body in (pairs_that_meet, gcd_divides):
        assert "may write elements" in _trace_error(body, V)
    msg = _trace_error(shifted_twice, V)
    assert "may write elements that the store at line" in msg
    assert "out[t + 1] = x[t]" in msg and "out[tm, :n1] = a; out[tm, n1:] = b" in msg
    expected = np.concatenate([X[:, :-1], Y[:, :2]], axis=1)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(
            td.tile_kernel(overlapping_slices).run(X, Y, backend=backend), expected)
    for kernel, args in ((interleave, (X, X)), (concat_tiles, (X, Y))):  # disjoint: they trace
        assert kernel.source(*args)


@td.tile_kernel
def swap_row_pairs(x):
    """Program g writes rows 2g and 2g + 1 (an unrolled pair): disjoint for every two g."""
    m, n = x.shape
    y = td.empty((m, n), dtype=x.dtype)
    for g in td.grid(m // 2):
        for t in td.tile(n):
            y[2 * g, t] = x[2 * g + 1, t]
            y[2 * g + 1, t] = -x[2 * g, t]
    return y


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_stores_at_offsets_a_grid_index_never_bridges_pass(backend: str) -> None:
    x = X[:36, :7]
    want = np.stack([x[1::2], -x[::2]], axis=1).reshape(x.shape)
    np.testing.assert_array_equal(swap_row_pairs.run(x, backend=backend), want)


@td.tile_kernel
def zero_or_double(x, skip):
    """Rows listed in `skip` are zeroed by one loop, the others doubled by another: the two stores
    sit in the two branches of a runtime `if` (Helion's jsd writes its ignored rows this way)."""
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for tm in td.tile(m, block_size=1):
        if skip[tm.begin] != 0:
            for tz in td.tile(n):
                out[tm, tz] = td.zeros((tm, tz), dtype=x.dtype)
        else:
            for tn in td.tile(n):
                out[tm, tn] = 2.0 * x[tm, tn]
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_stores_in_the_two_branches_of_an_if_do_not_overlap(backend: str) -> None:
    skip = np.array([0, 1, 1, 0, 0, 1, 0], np.int32)
    x = np.random.default_rng(3).standard_normal((7, 45)).astype(np.float32)
    for _, out in under_configs(zero_or_double, (x, skip), backend):
        np.testing.assert_array_equal(out, np.where(skip[:, None] != 0, 0, 2 * x))


@td.tile_kernel
def zero_or_copy_rows(x, labels):
    """Liger's tvd / cross_entropy: a `td.grid` row index (not a tile) in both branches."""
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    for r in td.grid(m):
        if labels[r] < 0:
            for tz in td.tile(n):
                out[r, tz] = td.zeros((tz,), dtype=x.dtype)
        else:
            for tn in td.tile(n):
                out[r, tn] = 2.0 * x[r, tn]
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_stores_in_the_two_branches_indexed_by_a_grid_scalar_do_not_overlap(backend: str
                                                                           ) -> None:
    labels = np.array([0, -1, 2, -1, 4, 5, -100], np.int32)
    x = np.random.default_rng(4).standard_normal((7, 45)).astype(np.float32)
    out = zero_or_copy_rows.run(x, labels, backend=backend)
    np.testing.assert_array_equal(out, np.where(labels[:, None] < 0, 0, 2 * x))


def test_stores_in_branches_that_may_meet_are_still_refused() -> None:
    def no_common_tile(x, skip):  # two programs may take different branches
        m, n = x.shape
        out = td.empty((m, n), dtype=x.dtype)
        for tm in td.tile(m):
            if skip[tm.begin] != 0:
                out[tm, :] = x[tm, :]
            else:
                out[tm + 1, :] = x[tm, :]
        return out

    def same_row_along_tn(x, skip):  # programs (tm, 0) and (tm, 1) may take different branches
        m, n = x.shape
        out = td.empty((m, 4), dtype=x.dtype)
        for tm, tn in td.tile(m, n, block_size=(1, 1)):
            if skip[tm.begin, tn.begin] != 0:
                out[tm, :] = td.zeros((tm, 4), dtype=x.dtype)
            else:
                out[tm, :] = td.full((tm, 4), 1.0, dtype=x.dtype)
        return out

    def grid_row_along_j(x, skip):  # a `td.grid` index leaves out j: (i, 0) and (i, 1) meet
        m, n = x.shape
        out = td.empty((m, 4), dtype=x.dtype)
        for i, j in td.grid(m, n):
            if skip[i, j] != 0:
                for tz in td.tile(4):
                    out[i, tz] = td.zeros((tz,), dtype=x.dtype)
            else:
                for tk in td.tile(4):
                    out[i, tk] = td.full((tk,), 1.0, dtype=x.dtype)
        return out

    skip = np.zeros(7, np.int32)
    assert "may write elements" in _trace_error(no_common_tile, X[:7], skip)
    skip2 = np.zeros((7, 3), np.int32)
    for body in (same_row_along_tn, grid_row_along_j):
        assert "may write elements" in _trace_error(body, X[:7, :3], skip2)


@td.tile_kernel
def times_two(x):
    out = td.empty((37,), dtype=x.dtype)
    for tm in td.tile(37):
        out[tm] = x[tm * 2]
    return out


@td.tile_kernel
def by_a_float(x):
    out = td.empty((37,), dtype=x.dtype)
    for tm in td.tile(37):
        out[tm] = x[tm + 1.5]
    return out


@td.tile_kernel
def by_a_tile(x):
    out = td.empty((37,), dtype=x.dtype)
    for tm in td.tile(37):
        out[tm] = x[tm + tm]
    return out


@td.tile_kernel
def by_a_vector(x):
    out = td.empty((37,), dtype=x.dtype)
    for tm in td.tile(37):
        out[tm] = x[tm + x[tm]]
    return out


@td.tile_kernel
def scaled_shift(x):
    out = td.empty((37,), dtype=x.dtype)
    for tm in td.tile(37):
        out[tm] = x[(tm + 1) * 2]
    return out


@td.tile_kernel
def shift_as_value(x):
    out = td.empty((37,), dtype=x.dtype)
    for tm in td.tile(37):
        out[tm] = x[tm] + (tm + 1)
    return out


@td.tile_kernel
def zero_step(x):
    out = td.empty((37,), dtype=x.dtype)
    for tm in td.tile(37):
        out[tm] = td.sum(x[tm, ::0], axis=1)
    return out


@td.tile_kernel
def reversed_slice(x):
    out = td.empty((37,), dtype=x.dtype)
    for tm in td.tile(37):
        out[tm] = td.sum(x[tm, ::-1], axis=1)
    return out


@td.tile_kernel
def empty_slice(x):
    out = td.empty((37,), dtype=x.dtype)
    for tm in td.tile(37):
        out[tm] = td.sum(x[tm, 5:5], axis=1)
    return out


@td.tile_kernel
def runtime_bound(x, k: int):
    out = td.empty((37,), dtype=x.dtype)
    for tm in td.tile(37):
        out[tm] = td.sum(x[tm, :k], axis=1)
    return out


@pytest.mark.parametrize(("kernel", "args", "message"), [
    (times_two, (V,), r"tile 'tm' is not a value"),
    (by_a_float, (V,), r"tile 'tm' \+ float 1.5: a tile can only be shifted by an int or an "
                       r"integer scalar"),
    (by_a_tile, (V,), r"tile 'tm' \+ a tile(.|\n)*tm.index \+ tm.index"),
    (by_a_vector, (V,), r"tile 'tm' \+ a tile<B0xf32> value"),
    (scaled_shift, (V,), r"a shifted tile \(tm plus an offset\) only indexes tensors"),
    (shift_as_value, (V,), r"a shifted tile 'tm' is not a value: it only indexes tensors"
                           r"(.|\n)*tm.index \(plus the offset\)"),
    (zero_step, (X,), r"a slice's step must be at least 1, got 0"),
    (reversed_slice, (X,), r"a slice's step must be at least 1, got -1"),
    (empty_slice, (X,), r"the slice 5:5: of dimension 1 of 'x' \(size 23\) selects no element"),
    (runtime_bound, (X, 3), r"sliced with a runtime bound(.|\n)*td.tile\(n, start=a, stop=b\)"),
], ids=lambda v: v.name if isinstance(v, td.TileKernel) else "")
def test_bad_shifts_and_slices_are_clear_errors(kernel: Any, args: tuple, message: str) -> None:
    with pytest.raises(td.TileDSLError, match=message) as info:
        kernel(*args)
    assert f"in kernel '{kernel.name}'" in str(info.value)
    assert info.value.loc is not None and info.value.loc.file == __file__


@cache
def _conv_args() -> tuple:
    from support import example
    return example("conv2d").make_inputs(np.random.default_rng(2), {
        "batch": 1, "h": 4, "w": 9, "cin": 16, "cout": 32, "kh": 3, "kw": 3}, np.float16)


def test_shifted_loads_take_pointers_under_tma() -> None:
    """A TMA box zero-fills reads outside the tensor but would read the lanes past a tile's own
    range that a shift moves inside it: shifted loads stay pointer loads (with their masks)
    while the filter's loads take a descriptor, and the result is unchanged."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from support import example, kernel_of
    args = _conv_args()
    config = td.Config((16, 32, 16), 4, 2, tma=True)
    text = kernel_of("conv2d").source(*args, target="triton", config=config)
    assert "w_desc.load(" in text and "x_desc" not in text
    assert "offs_tw_m1 = offs_tw - 1" in text and "(offs_tw_m1 >= 0)" in text
    out = kernel_of("conv2d").run(*args, backend="triton-interpret", config=config)
    td.testing.assert_close(out, example("conv2d").reference(*args), np.float16)


def test_generated_triton_masks_a_stencil_as_its_author_would() -> None:
    text = second_difference.source(X, target="triton", config=td.Config((16, 32), 4, 2))
    assert "offs_tm_m1 = offs_tm - 1" in text and "offs_tm_p1 = offs_tm + 1" in text
    assert "mask_tm_m1 = mask_tm & (offs_tm_m1 >= 0)" in text
    assert "mask_tm_p1 = mask_tm & (offs_tm_p1 < 37)" in text  # X: 37 rows
    text = strided_reads.source(X, target="triton")
    assert "(1 + offs_11 * 2)[None, :]" in text and "(2 + offs_7 * 3)[None, :]" in text


@pytest.mark.parametrize("case", ["second difference", "runtime shift -5", "interleave",
                                  "strided reads", "shifted store"])
def test_shifts_and_slices_compile_for_hopper(case: str) -> None:
    pytest.importorskip("triton")
    kernel, args, _ = CASES[case]
    (report,) = kernel.compile(*args, arch="sm_90")
    assert report.problem is None


def test_spatial_dma_moves_by_the_shift_and_clips_at_the_edges() -> None:
    """The dataflow's copies of a shifted store start `shift` elements away, cut at the tensor's
    ends (out[t - 3] = x[t] in tiles of 8 over 37: [0, 5), [5, 13), ..., [29, 34))."""
    import json
    config = store_back.config_space(V, backend="spatial").default().replace(block_sizes=(8,))
    flow = json.loads(store_back.source(V, target="spatial", config=config))
    copies = sorted((s["copy"]["dst"]["offset"], s["copy"]["dst"]["sizes"][0])
                    for a in flow["agents"] for s in a["program"]
                    if "copy" in s and "tensor" in s["copy"]["dst"])
    assert copies == [(0, 5), (5, 8), (13, 8), (21, 8), (29, 5)]
    config = interleave.config_space(X, X, backend="spatial").default()
    flow = json.loads(interleave.source(X, X, target="spatial", config=config))
    odd = [s["copy"]["dst"] for a in flow["agents"] for s in a["program"]
           if "copy" in s and "tensor" in s["copy"]["dst"] and s["copy"]["dst"]["offset"] % 2]
    assert odd and all(d["strides"] == [46, 2] and d["sizes"][1] == 23 for d in odd)


def test_shifts_and_slices_round_trip_through_the_ir_text() -> None:
    from tiledsl.ir.parser import parse_ir
    from tiledsl.ir.printer import print_ir
    from tiledsl.ir.verify import verify
    for kernel, args in ((second_difference, (X,)), (strided_reads, (X,)),
                         (concat_tiles, (X, Y)), (shift_by, (V, 2))):
        text = kernel.source(*args, target="ir")
        fn = parse_ir(text)
        verify(fn)
        assert print_ir(fn) == text
    assert "range<37xB0,shifted>" in second_difference.source(X, target="ir")
    assert "slices = [[1, 2, 7, 3]]" in strided_reads.source(X, target="ir")
