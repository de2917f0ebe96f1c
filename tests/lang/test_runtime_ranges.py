"""Loops to a runtime bound inside the grid, each program to its own bound, with no static
bound needed: `td.grid(s)` (Helion's `hl.grid(n)` in device code) and `range(lo, hi, step)`
(Triton's `for i in range(lo, hi)`) run as `while` loops; `td.tile(m_g, n)` (Helion's
`hl.tile([m_g, n])`) as tile loops to an unbounded stop."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import tiledsl as td
from support import gpu_backend, run_on, under_configs
from tiledsl.ir.parser import parse_ir
from tiledsl.ir.printer import print_ir

BACKENDS = ["numpy", "triton-interpret", gpu_backend()]


@td.tile_kernel
def jagged_horner(lens, x):
    """Per row, Horner's rule from the row's last valid element down (a negative step), and
    the count of its nonzero elements through `td.grid` over a loaded length."""
    m, _ = x.shape
    value = td.empty((m,), dtype=td.float32)
    count = td.empty((m,), dtype=td.int32)
    for r in td.grid(m):
        acc = 0.0
        for i in range(lens[r] - 1, -1, -1):
            acc = acc * 0.5 + x[r, i]
        nonzero = td.zeros((), dtype=td.int32)
        for j in td.grid(lens[r]):
            if x[r, j] != 0:
                nonzero += 1
        value[r] = acc
        count[r] = nonzero
    return value, count


def _horner(lens: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, counts = [], []
    for n, row in zip(lens, x.astype(np.float64)):
        acc = 0.0
        for v in row[:n][::-1]:
            acc = acc * 0.5 + v
        values.append(acc)
        counts.append(np.count_nonzero(row[:n]))
    return np.array(values), np.array(counts)


@pytest.mark.parametrize("backend", BACKENDS)
def test_loops_to_loaded_bounds(backend: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 11)).astype(np.float32)
    x[x < -0.5] = 0
    lens = np.array([0, 1, 11, 4, 7, 2], np.int32)  # an empty row, a full one
    value, count = run_on(jagged_horner, (lens, x), backend)
    expected_value, expected_count = _horner(lens, x)
    np.testing.assert_allclose(value, expected_value, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(count, expected_count)


@td.tile_kernel
def group_sums(w, G: td.constexpr):
    """Triton's `for c in range(g * C, (g + 1) * C)`: bounds computed from the grid index."""
    C = w.shape[0] // G
    out = td.empty((G,), dtype=w.dtype)
    for g in td.grid(G):
        acc = 0.0
        for c in range(g * C, (g + 1) * C):
            acc += w[c]
        out[g] = acc
    return out


def test_bounds_from_the_grid_index() -> None:
    w = np.random.default_rng(2).standard_normal(12).astype(np.float32)
    np.testing.assert_allclose(group_sums(w, 3), w.astype(np.float64).reshape(3, 4).sum(1),
                               rtol=1e-6)


def test_a_counted_loop_is_a_for_in_triton() -> None:
    """An upward count (`td.grid(lens[r])`) is Triton's `for j in range(...)`, an scf.for its
    pipeliner can take; a downward one stays a `while`. Both compile for sm_90."""
    args = (np.array([2, 3], np.int32), np.ones((2, 5), np.float32))
    src = jagged_horner.source(*args, target="triton")
    assert "for j in range(" in src and src.count("while ") == 1
    assert "_td_index" not in src  # the counter takes the loop's name
    pytest.importorskip("triton")
    (report,) = jagged_horner.compile(*args, arch="sm_90")
    assert report.problem is None


def test_the_counter_has_the_bounds_dtype() -> None:
    """The counter is a typed int32 (not a weak number): its test needs no int64 casts."""
    ir = jagged_horner.source(np.ones(2, np.int32), np.ones((2, 3), np.float32),
                              target="ir-traced")
    assert ": i64" not in ir


@td.tile_kernel
def ramp(x, s):
    """FlagGems' bicubic upsampling: a counter to a bound computed from a float, used in float
    arithmetic (Triton's interpreter counts in Python ints, which have no `.to`)."""
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        acc = td.zeros((t,), dtype=td.float32)
        for i in range(0, (s + 0.5).to(td.int32), 1):
            acc += x[t] * (i + 0.5)
        out[t] = acc
    return out


@td.tile_kernel
def halvings(x, out):
    """FlagGems' multinomial binds `_` to a tile (`rv, _, _, _ = uniform(...)`), then loops
    `for _ in range(steps)` to a runtime bound: the name is the counter's in the loop."""
    for r in td.grid(x.shape[0]):
        v, _ = td.split(td.join(x[r, :], x[r, :]))
        for _ in range(td.load(out, [r]).to(td.int32)):
            v = v * 0.5
        out[r] = td.sum(v)


@td.tile_kernel
def prefix_sums(lens, k):
    """vLLM's prefix_prefill merged with its wrapper: each trip's `k = tl.load(K + ...)` beside
    the wrapper's tensor `k`, a name no trip reads before binding it and nothing reads after
    the loop (the loop's own); reading it after the loop carries it, which a tensor cannot."""
    K, (m, n) = k, k.shape
    out = td.empty((m,), td.float32)
    for r in td.grid(m):
        acc = td.zeros((), td.float32)
        for i in range(td.load(lens + r)):
            k = td.load(K + r * n + i)
            acc += k
        td.store(out + r, acc)
    return out


def test_a_loop_name_bound_before_to_another_value() -> None:
    x = np.ones((3, 4), np.float32)
    out = np.array([1, 2, 3], np.float32)
    halvings(x, out)
    np.testing.assert_array_equal(out, 4 * 0.5 ** np.array([1, 2, 3]))
    lens = np.array([3, 0, 5], np.int32)
    k = np.random.default_rng(5).standard_normal((3, 5)).astype(np.float32)
    want = [k[r, :n].astype(np.float64).sum() for r, n in enumerate(lens)]
    for backend in ("numpy", "triton-interpret"):
        td.testing.assert_close(prefix_sums.run(lens, k, backend=backend), np.array(want),
                                np.float32)

    @td.tile_kernel
    def read_after(lens, k):
        for r in td.grid(k.shape[0]):
            for i in range(td.load(lens + r)):
                k = td.load(k + r * k.shape[1] + i)  # the trip reads the tensor k first
            td.store(lens + r, k.to(td.int32))

    with pytest.raises(td.TraceError, match="'k' \\(a Tensor\\) is rebound inside a `for` "
                       "loop over a runtime range"):
        read_after(lens, k)


@td.tile_kernel
def varlen_doubled(dt, cu, out, TIE_HDIM: bool, BM: td.constexpr):
    """vLLM's varlen selective_state_update merged with its wrapper: each trip's `dt`, bound
    under a compile-time `if not TIE_HDIM:` (so liveness alone cannot tell it is bound before
    it is read), shadows the wrapper's tensor `dt`; with TIE_HDIM the trip reads the tensor."""
    dt_ptr, out_ptr, D = dt, out, dt.shape[1]
    for pid_b in td.grid(cu.shape[0] - 1):
        bos = td.load(cu + pid_b).to(td.int64)
        dt_ptr += bos * D
        out_ptr += bos * D
        offs = td.arange(0, BM)
        for i_t in range(td.load(cu + pid_b + 1).to(td.int64) - bos):
            if not TIE_HDIM:
                dt = td.load(dt_ptr + offs, mask=offs < D, other=0.0)
            td.store(out_ptr + offs, dt * 2, mask=offs < D)
            dt_ptr += D
            out_ptr += D


def test_a_name_bound_under_a_compile_time_if_is_the_trip_s_own() -> None:
    dt = np.random.default_rng(6).standard_normal((5, 45)).astype(np.float32)
    cu = np.array([0, 2, 2, 5], np.int32)
    for backend in ("numpy", "triton-interpret"):
        out = np.zeros_like(dt)
        varlen_doubled.run(dt, cu, out, False, 64, backend=backend)
        np.testing.assert_array_equal(out, 2 * dt)
    with pytest.raises(td.TraceError, match="tensor 'dt' must be indexed before computing"):
        varlen_doubled(dt, cu, np.zeros_like(dt), True, 64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_counter_used_as_a_float(backend: str) -> None:
    x = np.random.default_rng(4).standard_normal(37).astype(np.float32)
    td.testing.assert_close(run_on(ramp, (x, 2.7), backend), x * 4.5, np.float32)


def test_errors() -> None:
    @td.tile_kernel
    def breaks(lens, x):
        out = td.zeros_like(x)
        for r in td.grid(x.shape[0]):
            for i in range(lens[r]):
                if x[r, i] < 0:
                    break
                out[r, i] = x[r, i]
        return out

    @td.tile_kernel
    def runtime_step(lens, x):
        out = td.zeros_like(x)
        for r in td.grid(x.shape[0]):
            for i in range(0, x.shape[1], lens[r]):
                out[r, i] = x[r, i]
        return out

    lens, x = np.array([2, 3], np.int32), np.ones((2, 3), np.float32)
    with pytest.raises(td.TraceError, match="runtime bound cannot have 'break'") as e:
        breaks(lens, x)
    assert str(e.value).splitlines()[1].strip() == "break"  # the user's line
    with pytest.raises(td.TraceError, match="the step must be a nonzero int"):
        runtime_step(lens, x)
    with pytest.raises(td.BackendError, match="cannot map a `while` loop"):
        jagged_horner.run(lens, x, backend="spatial")


@td.tile_kernel
def grouped_gemm_jagged(a_packed, b, group_offsets):
    """Helion's `grouped_gemm_jagged` as written (`td.addmm` for `torch.addmm`): a 2-D tile
    loop over a group's loaded row count and the columns; rows reach `a_packed` through the
    index tile `start + tile_m.index`."""
    total_m, k = a_packed.shape
    _, n = b.shape
    out = td.empty((total_m, n), dtype=td.promote_types(a_packed.dtype, b.dtype))
    for g in td.grid(group_offsets.shape[0] - 1):
        start = group_offsets[g]
        end = group_offsets[g + 1]
        m_g = end - start
        if m_g != 0:
            for tile_m, tile_n in td.tile([m_g, n]):
                acc = td.zeros([tile_m, tile_n], dtype=td.float32)
                for tile_k in td.tile(k):
                    acc = td.addmm(acc, a_packed[start + tile_m.index, tile_k], b[tile_k, tile_n])
                out[start + tile_m.index, tile_n] = acc.to(out.dtype)
    return out


def _grouped_inputs() -> tuple:
    rng = np.random.default_rng(3)
    offsets = np.cumsum([0, 37, 0, 70, 5]).astype(np.int32)  # an empty group, ragged ones
    a = rng.standard_normal((offsets[-1], 24)).astype(np.float32)
    return a, rng.standard_normal((24, 40)).astype(np.float32), offsets


@pytest.mark.parametrize("backend", BACKENDS)
def test_helion_grouped_gemm_over_loaded_row_counts(backend: str) -> None:
    a, b, offsets = _grouped_inputs()
    for config, out in under_configs(grouped_gemm_jagged, (a, b, offsets), backend):
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4,
                                   err_msg=str(config))


def test_an_unbounded_loop_is_tuned_and_priced_as_a_bounded_one() -> None:
    """Its blocks go up to 256, not to 2**31; the cost model prices it over the largest
    dimension (all 112 rows) rather than 2**31 of them; the spatial mapper refuses it."""
    a, b, offsets = _grouped_inputs()
    space = grouped_gemm_jagged.config_space(a, b, offsets, backend="triton")
    rows = space.params[0]
    assert rows.choices[-1] == 256 and "over a runtime size" in rows.doc
    bounded = td.Config(block_sizes=(64, 64, 32))
    assert space.estimate(bounded) < 100  # microseconds; 2**31 rows priced 1.3e9
    with pytest.raises(td.BackendError, match="runtime size with no static bound"):
        grouped_gemm_jagged.run(a, b, offsets, backend="spatial")
    pytest.importorskip("triton")
    (report,) = grouped_gemm_jagged.compile(a, b, offsets, arch="sm_90")  # ptxas takes it
    assert report.spill_bytes == 0


@td.tile_kernel
def persistent_softmax(x, programs: td.constexpr, block: td.constexpr):
    """Triton's fused-softmax tutorial: each program takes rows pid, pid + programs, ... in a
    `tl.range` that asks for `num_stages=3`."""
    n_rows, n_cols = x.shape
    out = td.empty_like(x)
    for pid in td.grid(programs):
        for row in td.range(pid, n_rows, programs, num_stages=3):
            cols = td.arange(0, block)
            v = td.load(x, [row, cols], mask=cols < n_cols, other=-float("inf"))
            e = td.exp(v - td.max(v, axis=0))
            td.store(out, [row, cols], e / td.sum(e, axis=0), mask=cols < n_cols)
    return out


def test_a_loops_tuning_keywords_reach_tl_range() -> None:
    """Triton pipelines the loads of a loop without a dot only when its `tl.range` asks: the
    tutorial's row loop keeps `num_stages=3`, and its loads compile to async copies (LDGSTS)."""
    x = np.random.default_rng(3).standard_normal((37, 100)).astype(np.float32)
    src = persistent_softmax.source(x, 4, 128, target="triton")
    assert re.search(r"for row in tl\.range\(\w+, 37, 4, num_stages=3\):", src)
    assert "row >= 0" not in src  # the counter lies in [pid, 37): no bounds check per access
    text = print_ir(persistent_softmax.traced(x, 4, 128).ir)  # the keywords: an attribute
    assert "tuning = [[\"num_stages\", 3]]" in text and print_ir(parse_ir(text)) == text
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(persistent_softmax.run(x, 4, 128, backend="triton-interpret"),
                               e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    pytest.importorskip("triton")
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    import sass_parity
    (report,) = persistent_softmax.compile(x, 4, 128, arch="sm_90")
    assert "LDGSTS" in sass_parity.disassemble(report.cubin)


@td.tile_kernel
def blockwise_row_sums(x, block: td.constexpr):
    """Liger's multi-block softmax walks a row in blocks: `td.range(0, n_cols, BLOCK)`."""
    out = td.empty((x.shape[0],), td.float32)
    for r in td.grid(x.shape[0]):
        acc = td.zeros((block,), td.float32)
        for i in td.range(0, x.shape[1], block):
            cols = i + td.arange(0, block)
            acc += td.load(x, [r, cols], mask=cols < x.shape[1])
        out[r] = td.sum(acc)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_td_range_with_a_step_over_ints_is_a_loop(backend: str) -> None:
    """Over ints with a step other than 1 it is a counted loop too, not unrolled (it unrolled
    125 times at 2000 columns in blocks of 16). With `num_stages=` (the softmax tutorial's
    row loop) it is a `tl.range` that Triton pipelines."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 203)).astype(np.float32)
    src = blockwise_row_sums.source(x, 16, target="triton")
    assert re.search(r"for i in range\(\w+, \w+, 16\):", src) and "while" not in src
    td.testing.assert_close(run_on(blockwise_row_sums, (x, 16), backend),
                            x.astype(np.float64).sum(1), np.float32)
    rows = rng.standard_normal((37, 100)).astype(np.float32)
    e = np.exp(rows - rows.max(1, keepdims=True))
    td.testing.assert_close(run_on(persistent_softmax, (rows, 4, 128), backend),
                            e / e.sum(1, keepdims=True), np.float32)


@td.tile_kernel
def band_sums(x, block: td.constexpr):
    """Counted loops in counted loops, over a shape: each pair of rows summed in blocks of
    columns, with the running total of the pairs before it."""
    m, n = x.shape
    out = td.empty((m // 2,), td.float32)
    for _ in td.grid(1):
        total = td.zeros((), td.float32)
        for r in td.range(0, m - 1, 2):
            acc = td.zeros((block,), td.float32)
            for c in td.range(0, n, block):
                cols = c + td.arange(0, block)
                for k in td.range(r, r + 2):  # bounds from the outer counter: constants too
                    acc += td.load(x, [k, cols], mask=cols < n)
            total += td.sum(acc)
            out[r // 2] = total
    return out


def test_spatial_unrolls_counted_loops_with_constant_bounds() -> None:
    """The spatial mapper plans every trip before the run: a counted loop with constant bounds
    is unrolled for it (lowering/passes/unroll_counted.py), nested ones too; the others, and
    one too long to unroll, are errors that say which."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 203)).astype(np.float32)
    for _, out in under_configs(blockwise_row_sums, (x, 16), "spatial", samples=1):
        td.testing.assert_close(out, x.astype(np.float64).sum(1), np.float32)
    y = rng.standard_normal((7, 45)).astype(np.float32)
    pairs = y[:6].astype(np.float64).reshape(3, 2, 45).sum((1, 2))
    for backend in ("numpy", "spatial"):
        td.testing.assert_close(band_sums.run(y, 16, backend=backend), np.cumsum(pairs),
                                np.float32)
    assert "while" not in print_ir(band_sums.traced(y, 16).for_backend("spatial"))
    wide = rng.standard_normal((2, 8200)).astype(np.float32)
    with pytest.raises(td.BackendError, match=r"this one's 4100 trips are more than it unrolls"):
        blockwise_row_sums.run(wide, 2, backend="spatial")
    with pytest.raises(td.BackendError, match=r"cannot map a `while` loop on a runtime value"):
        persistent_softmax.run(x, 4, 256, backend="spatial")
