"""Loops with a runtime stop, `for tk in td.tile(tq.end)`: each program covers the tiles of
`[0, stop)` for its own stop, and the lanes at or past the stop are out of range like lanes past
an extent (loads masked, reductions exact, stores dropped). Causal attention uses it to skip the
key tiles after the query tile, as Triton's fused-attention tutorial does."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tiledsl as td
from support import example, full_attention, kernel_of, under_configs
from tiledsl.runtime.config import Config
from tiledsl.errors import IRError, ShapeError, TraceError
from tiledsl.ir.parser import parse_ir
from tiledsl.ir.printer import canonical, print_ir
from tiledsl.ir.verify import verify

BACKENDS = ["numpy", "triton-interpret"]


@td.tile_kernel
def sums_before_end(x):
    """out[i] = sum(x[:end]), `end` the end of the tile holding i."""
    n, = x.shape
    out = td.empty((n,), dtype=td.float64)
    for t in td.tile(n):
        acc = td.zeros((), dtype=td.float64)
        for tk in td.tile(t.end):
            acc += td.sum(x[tk].astype(td.float64))
        out[t] = td.zeros((t,), dtype=td.float64) + acc
    return out


@td.tile_kernel
def stats_before_begin(x):
    """Per row tile: the max and the mean of x[:begin] (-inf and 0 for the first tile, whose
    loop runs no iterations), and a store inside the loop that only running programs make."""
    n, = x.shape
    top = td.empty((n,), dtype=td.float32)
    last = td.full((n,), -1.0, dtype=td.float32)
    for t in td.tile(n):
        m = td.full((), -float("inf"), dtype=td.float32)
        for tk in td.tile(t.begin):
            m = td.maximum(m, td.max(x[tk]))
            last[t] = td.zeros((t,), dtype=td.float32) + td.mean(x[tk])
        top[t] = td.zeros((t,), dtype=td.float32) + m
    return top, last


@td.tile_kernel
def window_sums(x):
    """Sums over a window that ends 40 past the tile, clipped at n: td.minimum bounds it."""
    n, = x.shape
    out = td.empty((n,), dtype=td.float32)
    for t in td.tile(n):
        acc = td.zeros((), dtype=td.float32)
        for tk in td.tile(td.minimum(t.end + 40, n)):
            acc += td.sum(x[tk])
        out[t] = td.zeros((t,), dtype=td.float32) + acc
    return out


def _ends(n: int, block: int) -> np.ndarray:
    i = np.arange(n)
    return np.minimum((i // block + 1) * block, n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_program_stops_at_its_own_end(backend: str) -> None:
    x = np.random.default_rng(0).standard_normal(203).astype(np.float32)
    prefix = np.concatenate([[0.0], np.cumsum(x.astype(np.float64))])
    for config, out in under_configs(sums_before_end, (x,), backend, samples=3):
        want = prefix[_ends(x.size, config.block_sizes[0])]
        np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12, err_msg=str(config))


@pytest.mark.parametrize("backend", BACKENDS)
def test_lanes_past_the_stop_are_out_of_range(backend: str) -> None:
    """The key tiles are larger than the row tiles: the stop cuts them in the middle, so max,
    mean and sum see only the lanes before it, and a store inside the loop is made only while
    the program's loop runs."""
    x = np.random.default_rng(1).standard_normal(150).astype(np.float32)
    x[::7] += 5.0  # maxima spread everywhere
    for blocks in ((16, 64), (32, 16), (64, 128)):
        config = Config(block_sizes=blocks)
        top, last = stats_before_begin.run(x, backend=backend, config=config)
        begin = np.arange(x.size) // blocks[0] * blocks[0]
        want_top = np.array([x[:b].max() if b else -np.inf for b in begin], dtype=np.float32)
        last_begin = (begin - 1) // blocks[1] * blocks[1]  # the last key tile before `begin`
        want_last = np.array([x[lb:b].mean() if b else -1.0 for lb, b in zip(last_begin, begin)],
                             dtype=np.float32)
        np.testing.assert_array_equal(top, want_top, err_msg=str(blocks))
        np.testing.assert_allclose(last, want_last, rtol=1e-5, atol=1e-6, err_msg=str(blocks))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_clipped_window(backend: str) -> None:
    x = np.random.default_rng(2).standard_normal(99).astype(np.float32)
    prefix = np.concatenate([[0.0], np.cumsum(x.astype(np.float64))])
    for config, out in under_configs(window_sums, (x,), backend):
        want = prefix[np.minimum(_ends(x.size, config.block_sizes[0]) + 40, x.size)]
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, err_msg=str(config))


def test_the_ir_keeps_the_stop_and_round_trips() -> None:
    x = np.ones(203, dtype=np.float32)
    text = sums_before_end.source(x, target="ir")
    assert "{stop = true}" in text and "range<203x" in text
    fn = parse_ir(text)
    verify(fn)
    assert canonical(parse_ir(print_ir(fn))) == canonical(fn)


def test_triton_loops_to_the_stop() -> None:
    x = np.ones(203, dtype=np.float32)
    src = sums_before_end.source(x, target="triton", config=Config(block_sizes=(32, 64)))
    assert "stop_tk = begin_t + t_size" in src
    assert "in range(0, tl.cdiv(stop_tk, BLOCK_TK)):" in src
    assert "mask_tk_1 = offs_tk_1 < stop_tk" in src


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stop_the_block_divides_needs_no_mask(backend: str) -> None:
    """n = 256 with row tiles of 64: every stop is a multiple of 64, so key tiles of 32 are never
    cut (no mask in the Triton code), while key tiles of 128 are."""
    x = np.random.default_rng(4).standard_normal(256).astype(np.float32)
    prefix = np.concatenate([[0.0], np.cumsum(x.astype(np.float64))])
    for blocks, masked in (((64, 32), False), ((64, 64), False), ((64, 128), True)):
        config = Config(block_sizes=blocks)
        src = sums_before_end.source(x, target="triton", config=config)
        assert ("mask_tk_1 = offs_tk_1 < stop_tk" in src) == masked, (blocks, src)
        out = sums_before_end.run(x, backend=backend, config=config)
        np.testing.assert_allclose(out, prefix[_ends(x.size, blocks[0])], rtol=1e-12,
                                   atol=1e-12, err_msg=str(blocks))


def _kernel_error(kernel, *args) -> str:
    with pytest.raises((TraceError, ShapeError)) as e:
        kernel(*args)
    return str(e.value)


@td.tile_kernel
def stop_from_a_load(x, n_valid):
    n, = x.shape
    out = td.empty((n,), dtype=td.float32)
    for t in td.tile(n):
        acc = td.zeros((), dtype=td.float32)
        for tk in td.tile(n_valid[0]):
            acc += td.sum(x[tk])
        out[t] = td.zeros((t,), dtype=td.float32) + acc
    return out


@td.tile_kernel
def stop_past_the_tensor(x):
    n, = x.shape
    out = td.empty((n,), dtype=td.float32)
    for t in td.tile(n):
        acc = td.zeros((), dtype=td.float32)
        for tk in td.tile(t.end + 8):
            acc += td.sum(x[tk])
        out[t] = td.zeros((t,), dtype=td.float32) + acc
    return out


@td.tile_kernel
def never_runs(x):
    n, = x.shape
    out = td.empty((n,), dtype=td.float32)
    for t in td.tile(n, block_size=256):
        acc = td.zeros((), dtype=td.float32)
        for tk in td.tile(t.begin):
            acc += td.sum(x[tk])
        out[t] = td.zeros((t,), dtype=td.float32) + acc
    return out


def test_a_stop_with_no_bound_indexes_as_a_tile_shifted_by_0() -> None:
    """A loaded stop: its lanes past the tensor's edge read 0 (as `x[tk + 0]`'s)."""
    x = np.arange(50, dtype=np.float32)
    for n_valid, expected in ((7, x[:7].sum()), (80, x.sum()), (0, 0.0)):
        out = stop_from_a_load(x, np.array([n_valid], dtype=np.int32))
        np.testing.assert_array_equal(out, np.full(50, expected, np.float32))


def test_misused_stops_are_clear_errors() -> None:
    x = np.ones(50, dtype=np.float32)
    msg = _kernel_error(stop_past_the_tensor, x)
    assert "runtime stop that can reach 58, past dimension 0 of 'x', which has 50" in msg
    assert "td.minimum(stop, 50)" in msg
    msg = _kernel_error(never_runs, x)
    assert "at most 0" in msg and "never runs" in msg


def test_the_verifier_ties_the_stop_to_its_range() -> None:
    text = sums_before_end.source(np.ones(203, dtype=np.float32), target="ir")
    with pytest.raises(IRError, match="runtime stop needs the loop's stop operand"):
        verify(parse_ir(text.replace(",stop>", ">")))



@td.tile_kernel
def nested_stops(x):
    """A triangle of tiles: for each tile i before the program's end, the sum of x up to the
    end of i."""
    n, = x.shape
    out = td.empty((n,), dtype=td.float64)
    for t in td.tile(n):
        acc = td.zeros((), dtype=td.float64)
        for ti in td.tile(t.end):
            for tj in td.tile(ti.end):
                acc += td.sum(x[tj].astype(td.float64))
        out[t] = td.zeros((t,), dtype=td.float64) + acc
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stop_inside_a_loop_with_a_stop(backend: str) -> None:
    x = np.random.default_rng(3).standard_normal(90).astype(np.float32)
    prefix = np.concatenate([[0.0], np.cumsum(x.astype(np.float64))])
    for blocks in ((16, 32, 8), (64, 16, 32), (32, 32, 128)):
        out = nested_stops.run(x, backend=backend, config=Config(block_sizes=blocks))
        bt, bi = blocks[0], blocks[1]
        want = []
        for i in range(x.size):
            end = min((i // bt + 1) * bt, x.size)
            ends_i = [min(b + bi, end) for b in range(0, end, bi)]
            want.append(sum(prefix[e] for e in ends_i))
        np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12, err_msg=str(blocks))


def test_the_causal_loop_compiles_for_hopper_and_the_model_halves_it() -> None:
    """Causal attention at seq 2048: the tiles after the diagonal are not visited, so the
    cost model (which averages each program's trip count) predicts about half the time of the
    loop over every key tile."""
    pytest.importorskip("triton")
    from autotune import model
    args = tuple(np.zeros((32, 2048, 64), dtype=np.float16) for _ in range(3))
    config = Config(block_sizes=(128, 64), num_warps=8, num_stages=3)
    times = {}
    for name, kernel in (("causal", kernel_of("attention")), ("full", full_attention)):
        reports = kernel.compile(*args, config=config, arch="sm_90")
        assert all(r.spill_bytes == 0 for r in reports)
        times[name] = model.predict(kernel, list(args), config, model.from_reports(reports))
    assert times["causal"] < 0.65 * times["full"], times


@td.tile_kernel
def jagged_row_sums(x, lens, extra):
    """Row i sums x[i, :lens[i]] (a loaded length, clipped to [0, n]) and x[i, :extra] (a scalar
    argument): td.tile(n, stop=...) gives the bound n of a stop that tiles cannot bound."""
    m, n = x.shape
    out = td.empty((m,), dtype=td.float64)
    head = td.empty((m,), dtype=td.float64)
    for i in td.grid(m):
        acc = td.zeros((), dtype=td.float64)
        for tk in td.tile(n, stop=lens[i]):
            acc += td.sum(x[i, tk].astype(td.float64))
        out[i] = acc
        first = td.zeros((), dtype=td.float64)
        for tj in td.tile(n, stop=extra):
            first += td.sum(x[i, tj].astype(td.float64))
        head[i] = first
    return out, head


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loaded_length_stops_each_row(backend: str) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((9, 70)).astype(np.float32)
    lens = np.array([0, 1, 31, 32, 33, 69, 70, 500, -4], dtype=np.int32)  # past n: all of it
    prefix = np.concatenate([np.zeros((9, 1)), np.cumsum(x.astype(np.float64), axis=1)], axis=1)
    for config, (out, head) in under_configs(jagged_row_sums, (x, lens, 45), backend, samples=3):
        np.testing.assert_allclose(out, prefix[np.arange(9), np.clip(lens, 0, 70)], rtol=1e-12,
                                   atol=1e-12, err_msg=str(config))
        np.testing.assert_allclose(head, prefix[:, 45], rtol=1e-12, atol=1e-12)


def test_a_loaded_stop_is_clipped_in_triton_and_planned_from_the_data_by_the_spatial_mapper(
        ) -> None:
    rng = np.random.default_rng(3)
    x, lens = rng.random((9, 70), dtype=np.float32), rng.integers(0, 80, 9).astype(np.int32)
    src = jagged_row_sums.source(x, lens, 45, target="triton", config=Config(block_sizes=(32, 32)))
    assert "stop_tk = tl.minimum(" in src and ", 70)" in src and "mask_tk = offs_tk < stop_tk" in src
    np.testing.assert_array_equal(jagged_row_sums.run(x, lens, 45, backend="spatial"),
                                  jagged_row_sums.run(x, lens, 45, backend="numpy"))


@td.tile_kernel
def stop_on_the_grid(x):
    n, = x.shape
    out = td.empty((n,), dtype=td.float32)
    for t in td.tile(n, stop=10):
        out[t] = x[t]
    return out


def test_stop_keyword_misuse_is_a_clear_error() -> None:
    msg = _kernel_error(stop_on_the_grid, np.ones(50, dtype=np.float32))
    assert "grid's sizes must be known" in msg


@td.tile_kernel
def masked_scores(q, k):
    """Row sums of exp(q k^T) under three masks: keys up to the query (written both ways round)
    and keys from the query on, which no leading key tile satisfies."""
    n, d = q.shape
    lower = td.empty((n,), dtype=td.float32)
    mirrored = td.empty((n,), dtype=td.float32)
    upper = td.empty((n,), dtype=td.float32)
    for tq in td.tile(n):
        a = td.zeros((tq,), dtype=td.float32)
        b = td.zeros((tq,), dtype=td.float32)
        c = td.zeros((tq,), dtype=td.float32)
        for tk in td.tile(n):
            e = td.exp(q[tq, :] @ k[tk, :].T)
            a += td.sum(td.where(tq.index[:, None] >= tk.index[None, :], e, 0.0), axis=1)
            b += td.sum(td.where(tk.index[None, :] < tq.index[:, None], e, 0.0), axis=1)
            c += td.sum(td.where(tq.index[:, None] <= tk.index[None, :], e, 0.0), axis=1)
        lower[tq] = a
        mirrored[tq] = b
        upper[tq] = c
    return lower, mirrored, upper


def make_attention(seq: int, d: int = 20) -> tuple:
    return example("attention").make_inputs(np.random.default_rng(6),
                                            {"batch": 2, "seq": seq, "d": d})


def test_triton_splits_off_the_tiles_before_the_diagonal() -> None:
    """split.py: the key tiles that end before the query tile begins run in a loop of their own
    without the compare and the select (Triton's fused-attention tutorial's stage 1)."""
    args = make_attention(77, d=32)  # no padded head dimension: no masks at all in the prefix
    src = kernel_of("attention").source(*args, target="triton",
                                        config=Config(block_sizes=(32, 16)))
    assert "split_tk = tl.minimum(begin_tq // BLOCK_TK, stop_tk // BLOCK_TK)" in src
    after = src[src.index("for tk_iter in range(0, split_tk):"):].splitlines()[1:]
    prefix = "\n".join(itertools.takewhile(lambda line: line.startswith(" " * 8), after))
    assert "tl.where" not in prefix and ">=" not in prefix and "mask_tk" not in prefix
    # the diagonal tiles' trip count through the extent passed at runtime (loops.py
    # opaque_trips: with a literal one triton 3.9's ptxas serialized the dots' wgmma)
    assert "for tk_iter_1 in range(split_tk, tl.cdiv(tl.minimum(stop_tk, extent_tk), " \
        "BLOCK_TK)):" in src


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_loops_give_the_same_numbers(backend: str) -> None:
    """Ragged sequences, key blocks smaller and larger than the query blocks, the old
    full-range kernel, and the mask that must not split (keys from the query on)."""
    attention, reference = kernel_of("attention"), example("attention").reference
    args = make_attention(77)
    pairs = ((16, 32), (64, 16)) if backend == "triton-interpret" else \
        ((16, 32), (32, 16), (16, 16), (64, 16))  # the interpreter: ~0.5 s a run
    for blocks in pairs:
        for kernel in (attention, full_attention):
            out = kernel.run(*args, backend=backend, config=Config(block_sizes=blocks))
            td.testing.assert_close(out, reference(*args))
    rng = np.random.default_rng(7)
    q, k = (rng.standard_normal((75, 16)).astype(np.float32) * 0.3 for _ in range(2))
    e = np.exp(q.astype(np.float64) @ k.astype(np.float64).T)
    for blocks in ((16, 16), (32, 16), (16, 32)):
        got = masked_scores.run(q, k, backend=backend, config=Config(block_sizes=blocks))
        for g, w in zip(got, (np.tril(e).sum(1), np.tril(e, -1).sum(1), np.triu(e).sum(1))):
            np.testing.assert_allclose(g, w, rtol=2e-5, err_msg=str(blocks))


@td.tile_kernel
def window_before_end(x, window: int):
    """out[i] = sum(x[max(end - window, 0):end]) for `end` the end of i's tile: a loop with a
    runtime start and stop. Its lanes before the start are out of range, even inside the first
    key tile."""
    n, = x.shape
    out = td.empty((n,), dtype=td.float64)
    size = td.empty((n,), dtype=td.int32)
    for t in td.tile(n):
        acc = td.zeros((), dtype=td.float64)
        count = td.zeros((), dtype=td.int32)
        for tk in td.tile(t.end, start=t.end - window):
            acc += td.sum(x[tk].astype(td.float64))
            count += tk.size
        out[t] = td.zeros((t,), dtype=td.float64) + acc
        size[t] = td.zeros((t,), dtype=td.int32) + count
    return out, size


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_runtime_start_skips_what_comes_before_it(backend: str) -> None:
    x = np.random.default_rng(8).standard_normal(150).astype(np.float32)
    prefix = np.concatenate([[0.0], np.cumsum(x.astype(np.float64))])
    for window in (1, 7, 40, 1000, 0, -5):  # 0 and below: an empty loop (start >= stop)
        for blocks in ((16, 16), (32, 8), (16, 64)):
            out, size = window_before_end.run(x, window, backend=backend,
                                        config=Config(block_sizes=blocks))
            end = _ends(x.size, blocks[0])
            begin = np.clip(end - window, 0, end)
            np.testing.assert_allclose(out, prefix[end] - prefix[begin], rtol=1e-12, atol=1e-12,
                                       err_msg=f"{window} {blocks}")
            np.testing.assert_array_equal(size, end - begin, err_msg=f"{window} {blocks}")


@td.tile_kernel
def jagged_dense_add(x_data, x_offsets, y):
    """Helion's jagged_dense_add: row r adds its jagged entries to the first `nnz` columns of
    `y` in one loop (`stop=nnz`) and copies the rest in another (`start=nnz`); the two stores
    meet only in one program's row, on either side of its own `nnz`."""
    rows, n = y.shape
    out = td.empty((rows, n), dtype=y.dtype)
    for r in td.grid(rows):
        first = x_offsets[r]
        nnz = x_offsets[r + 1] - first
        for tk in td.tile(n, stop=nnz):
            out[r, tk] = y[r, tk] + x_data[first + tk.index]
        for tk in td.tile(n, start=nnz):
            out[r, tk] = y[r, tk]
    return out


@pytest.mark.parametrize("backend", [*BACKENDS, "spatial"])
def test_a_stop_loop_and_a_start_loop_split_each_row(backend: str) -> None:
    rng = np.random.default_rng(9)
    lengths = np.array([3, 0, 7, 5, 9])
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    x_data = rng.standard_normal(offsets[-1]).astype(np.float32)
    y = rng.standard_normal((5, 9)).astype(np.float32)
    expected = y.astype(np.float64)
    for i, (a, b) in enumerate(zip(offsets, offsets[1:])):
        expected[i, :b - a] += x_data[a:b]
    for config, out in under_configs(jagged_dense_add, (x_data, offsets, y), backend):
        np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6, err_msg=str(config))


def test_triton_starts_at_the_first_tile_that_meets_the_start() -> None:
    x = np.ones(150, dtype=np.float32)
    src = window_before_end.source(x, 7, target="triton", config=Config(block_sizes=(16, 8)))
    assert "first_tk = start_tk // BLOCK_TK" in src
    assert "in range(first_tk, tl.where(start_tk < stop_tk, tl.cdiv(stop_tk, BLOCK_TK), " \
           "first_tk)):" in src
    assert "mask_tk_1 = (offs_tk_1 >= start_tk) & (offs_tk_1 < stop_tk)" in src


@td.tile_kernel
def lower_triangle_sum(x, y):
    """sum over j <= i of x[i] * y[j], with the triangle masked inside two nested loops: the
    inner loop splits at the outer loop's tile, not the grid's."""
    n, = x.shape
    out = td.empty((1,), dtype=td.float32)
    for g in td.tile(1):
        acc = td.zeros((), dtype=td.float32)
        for ti in td.tile(n):
            for tj in td.tile(n):
                prod = x[ti][:, None] * y[tj][None, :]
                keep = ti.index[:, None] >= tj.index[None, :]
                acc += td.sum(td.where(keep, prod, 0.0))
        out[g] = td.zeros((g,), dtype=td.float32) + acc
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_split_inside_a_nested_loop(backend: str) -> None:
    rng = np.random.default_rng(9)
    x, y = (rng.standard_normal(53).astype(np.float32) for _ in range(2))
    want = np.tril(x.astype(np.float64)[:, None] * y.astype(np.float64)[None, :]).sum()
    src = lower_triangle_sum.source(x, y, target="triton", config=Config(block_sizes=(1, 16, 8)))
    assert "split_tj = tl.minimum(begin_ti // BLOCK_TJ, 53 // BLOCK_TJ)" in src
    for blocks in ((1, 16, 8), (1, 8, 16), (1, 32, 32)):
        out = lower_triangle_sum.run(x, y, backend=backend, config=Config(block_sizes=blocks))
        np.testing.assert_allclose(out[0], want, rtol=1e-4, err_msg=str(blocks))


@td.tile_kernel
def jagged_copy(x, offsets):
    """Row block b copies rows offsets[b]:offsets[b + 1] of x (jagged rows)."""
    n, d = x.shape
    out = td.zeros((n, d), dtype=x.dtype)
    for b in td.grid(offsets.shape[0] - 1):
        for t in td.tile(n, start=offsets[b], stop=offsets[b + 1]):
            for tn in td.tile(d):
                out[t, tn] = x[t, tn] * 2
    return out


@td.tile_kernel
def copy_to_end(x):
    """Each row tile copies x[:end] (programs write the same values): a store whose programs
    stop at different places but all run the loop's first iteration."""
    n, = x.shape
    out = td.zeros((n,), dtype=x.dtype)
    for tb in td.tile(n):
        for t in td.tile(tb.end):
            out[t] = x[t] + 1
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_under_a_stop_when_one_block_covers_the_range(backend: str) -> None:
    """Every program runs the same iterations, so all are active, but their stops (and starts)
    differ: the store must still mask each program's own lanes (NumPy once broadcast one
    program's value over all of them and crashed)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((85, 5)).astype(np.float32)
    offsets = np.array([0, 7, 8, 48, 61, 64, 85], dtype=np.int64)
    for blocks in ((128, 8), (64, 4)):
        out = jagged_copy.run(x, offsets, backend=backend, config=Config(block_sizes=blocks))
        np.testing.assert_array_equal(out, x * 2, err_msg=str(blocks))
    y = rng.standard_normal(150).astype(np.float32)
    out = copy_to_end.run(y, backend=backend, config=Config(block_sizes=(32, 64)))
    np.testing.assert_array_equal(out, y + 1)
