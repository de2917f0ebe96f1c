"""Atomics (`td.atomic_add/max/min/xchg/cas`) and registered knobs (`td.register_tunable`):
the NumPy backend's defined order, the generated Triton, the spatial read-modify-write, bad
input, and a knob the tuner searches."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import tiledsl as td
from support import example, gpu_backend, run_on

BACKENDS = ("numpy", "triton-interpret", "spatial", gpu_backend())


@td.tile_kernel
def column_stats(x):
    """Column sums, maxima and minima, combined across the row tiles by atomics (each store
    leaves out the grid's row dimension: the race check accepts an atomic there)."""
    m, n = x.shape
    total = td.zeros((n,), dtype=x.dtype)
    high = td.full((n,), float("-inf"), dtype=x.dtype)
    low = td.full((n,), float("inf"), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        v = x[tm, tn]
        td.atomic_add(total, [tn], td.sum(v, axis=0))
        td.atomic_max(high, [tn], td.max(v, axis=0))
        td.atomic_min(low, [tn], td.min(v, axis=0), sem="acq_rel")
    return total, high, low


@td.tile_kernel
def running(x, counter):
    """Old values: each lane gets the counter as it was just before its own addition."""
    n = x.shape[0]
    before = td.empty((n,), dtype=td.int32)
    for t in td.tile(n):
        before[t] = td.atomic_add(counter, [t.index * 0], x[t])
    return before


@td.tile_kernel
def exchange(x, base, slots, flags):
    """A masked add, an exchange and a compare-and-swap whose old values the kernel uses."""
    m, n = x.shape
    added = td.empty((m, n), dtype=x.dtype)
    wins = td.zeros((n,), dtype=td.int32)
    for tm, tn in td.tile(m, n):
        v = x[tm, tn]
        old = td.atomic_add(base, [tm, tn], v, mask=v > 0)
        added[tm, tn] = td.where(v > 0, old, 0.0)
        slots[tm, tn] = td.atomic_xchg(slots, [tm, tn], v)  # the old values, back in place
        first = td.atomic_cas(flags, [tn], 0, 1)  # one program per column sees 0
        td.atomic_add(wins, [tn], td.where(first == 0, 1, 0))
    return added, wins


@td.tile_kernel
def column_bits(x):
    """Bitwise atomics: every element of a column ORs, ANDs and XORs into its column's word,
    lanes of one tile meeting at one element (an index tile of column numbers)."""
    m, n = x.shape
    some = td.zeros((n,), dtype=x.dtype)
    every = td.full((n,), td.iinfo(x.dtype).max if x.dtype.is_int_unsigned() else -1, x.dtype)
    parity = td.zeros((n,), dtype=x.dtype)
    for tm, tn in td.tile(m, n):
        v = x[tm, tn]
        cols = tn.index[None, :] + 0 * tm.index[:, None]
        td.atomic_or(some, [cols], v)
        td.atomic_and(every, [cols], v)
        td.atomic_xor(parity, [cols], v)
    return some, every, parity


def _configs(kernel: td.TileKernel, args: tuple, backend: str, n: int = 2) -> list[td.Config]:
    space = kernel.config_space(*args, backend=backend.removesuffix("-gpu"))
    return [space.default(), *space.sample(n, seed=3)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_column_stats_on_every_backend(backend: str) -> None:
    x = np.random.default_rng(0).standard_normal((67, 13)).astype(np.float32)
    for config in _configs(column_stats, (x,), backend):
        total, high, low = run_on(column_stats, (x,), backend, config=config)
        # float atomics add in the schedule's order: equal within rounding
        td.testing.assert_close(total, x.astype(np.float64).sum(0), np.float32)
        assert (high == x.max(0)).all() and (low == x.min(0)).all(), config


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_bitwise_atomics(backend: str, dtype: type) -> None:
    """On signed and unsigned words (radix sort's flags are uint32)."""
    x = np.random.default_rng(5).integers(0, 1 << 20, (45, 11)).astype(dtype)
    x[0] |= np.array(1 << 31).astype(dtype)  # the sign bit of an int32
    for config in _configs(column_bits, (x,), backend):
        some, every, parity = run_on(column_bits, (x,), backend, config=config)
        assert (some == np.bitwise_or.reduce(x, axis=0)).all(), config
        assert (every == np.bitwise_and.reduce(x, axis=0)).all(), config
        assert (parity == np.bitwise_xor.reduce(x, axis=0)).all(), config
    with pytest.raises(td.DTypeError, match="bitwise atomics take integer tensors"):
        column_bits(x.astype(np.float32))


def test_numpy_defines_the_order_of_old_values() -> None:
    """Programs in grid order, lanes in C order: the old values are the exclusive prefix sums."""
    x = np.random.default_rng(1).integers(-5, 9, 101).astype(np.int32)
    for config in _configs(running, (x, np.zeros(1, np.int32)), "numpy"):
        counter = np.full(1, 7, np.int32)
        before = running.run(x, counter, config=config)
        assert (before == 7 + np.r_[0, np.cumsum(x)[:-1]]).all() and counter[0] == 7 + x.sum()
    counter = np.full(1, 7, np.int32)  # Triton's interpreter runs programs in order too
    before = running.run(x, counter, backend="triton-interpret")
    assert sorted(before) == sorted(7 + np.r_[0, np.cumsum(x)[:-1]]) and counter[0] == 7 + x.sum()


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_masked_add_exchange_and_cas_return_old_values(backend: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((37, 11)).astype(np.float32)
    for config in _configs(exchange, (x, x, x, np.zeros(11, np.int32)), backend, 1):
        base, slots = rng.standard_normal((2, 37, 11)).astype(np.float32)
        base0, slots0, flags = base.copy(), slots.copy(), np.zeros(11, np.int32)
        added, wins = exchange.run(x, base, slots, flags, backend=backend, config=config)
        assert np.allclose(base, base0 + np.where(x > 0, x, 0)), config  # masked lanes kept
        assert (added == np.where(x > 0, base0, 0)).all()
        assert (slots == slots0).all()  # the exchange's old values were stored back
        assert (flags == 1).all() and (wins == 1).all()


def test_triton_source_and_an_sm90_compile() -> None:
    x = np.random.default_rng(3).standard_normal((67, 13)).astype(np.float32)
    src = column_stats.source(x, target="triton")
    assert 'tl.atomic_add(out_ptr + offs_tn, sum_0, mask=mask_tn, sem="relaxed")' in src
    assert 'sem="acq_rel"' in src and "tl.atomic_max(" in src
    cas = exchange.source(x, x, x, np.zeros(13, np.int32), target="triton")
    assert "tl.atomic_cas(" in cas and "tl.atomic_xchg(" in cas
    ptx = column_stats.source(x, target="ptx", arch="sm_90")
    assert "atom.global" in ptx or "red.global" in ptx


def test_spatial_prices_a_read_modify_write_and_refuses_used_old_values() -> None:
    import json
    x = np.random.default_rng(4).standard_normal((67, 13)).astype(np.float32)
    df = json.loads(column_stats.source(x, target="spatial"))
    copies = [s["copy"] for a in df["agents"] for s in a["program"] if "copy" in s]
    assert {c.get("rmw") for c in copies} >= {"add", "max", "min"}
    with pytest.raises(td.BackendError, match=r"atomic_add.*old values[\s\S]*before\[t\] = "):
        running.run(np.ones(5, np.int32), np.zeros(1, np.int32), backend="spatial")


@td.tile_kernel
def half_histogram(x, bins, out):
    """16-bit float adds at gathered bins (Triton's atomic add on float16 and bfloat16)."""
    for t in td.tile(x.shape[0]):
        td.atomic_add(out, [bins[t]], x[t])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_atomic_add_on_16_bit_floats(backend: str, dtype: str) -> None:
    import ml_dtypes
    np_dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(8)
    x = rng.uniform(0.5, 1.5, 45).astype(np_dtype)
    bins = rng.integers(0, 5, 45).astype(np.int32)
    out = np.full(5, 2.0, np_dtype)
    if dtype == "bfloat16" and backend == "triton-interpret":
        with pytest.raises(td.BackendError, match="interpreter has no bfloat16 atomic add"):
            half_histogram.run(x, bins, out, backend=backend)
        return
    run_on(half_histogram, (x, bins, out), backend)
    want = 2.0 + np.bincount(bins, x.astype(np.float64), 5)  # ~9 adds a bin, each rounded
    td.testing.assert_close(out, want, np_dtype, factor=4.0)


def test_bad_atomics_name_the_line() -> None:
    @td.tile_kernel
    def half(x):
        out = td.zeros((4,), dtype=td.float16)
        for t in td.tile(x.shape[0]):
            td.atomic_max(out, [t], x[t])
        return out

    @td.tile_kernel
    def bad_sem(x):
        for t in td.tile(x.shape[0]):
            td.atomic_add(x, [t], 1.0, sem="seq_cst")

    @td.tile_kernel
    def store_then_add(x):
        for t in td.tile(x.shape[0]):
            x[t] = x[t] * 2.0
            td.atomic_add(x, [t + 1], 1.0)

    @td.tile_kernel
    def wider_than_the_index(x):
        total = td.zeros((1,), dtype=td.float32)
        for t in td.tile(x.shape[0]):
            td.atomic_add(total, [0], x[t])
        return total

    x = np.ones(4, np.float16)
    with pytest.raises(td.ShapeError, match=r"cannot write a tile of shape \(t,\)[\s\S]*"
                                            r"reduce the lanes"):
        wider_than_the_index(np.ones(4, np.float32))
    with pytest.raises(td.DTypeError, match=r"float16 tensor.*td.atomic_add only, as "
                                            r"Triton's[\s\S]*td.atomic_max\(out, \[t\]"):
        half(x)
    with pytest.raises(td.TraceError, match="sem='seq_cst' is not one of"):
        bad_sem(np.ones(4, np.float32))
    with pytest.raises(td.TraceError, match="this atomic to 'x' may write elements that the "
                                            "store at line"):
        store_then_add(np.ones(4, np.float32))


# ---- td.register_tunable ---------------------------------------------------------------------

@functools.cache
def split_k_inputs(m: int, k: int, n: int) -> tuple:
    return example("matmul_split_k").make_inputs(np.random.default_rng(0), {"m": m, "k": k, "n": n})


def test_a_registered_knob_is_in_every_space_and_retraces_per_value() -> None:
    k = example("matmul_split_k").matmul_split_k
    args = split_k_inputs(19, 131, 21)
    for backend in (None, "numpy", "triton", "spatial"):
        split = next(p for p in k.config_space(*args, backend=backend).params
                     if p.name == "split_k")
        assert split.choices == (1, 2, 4, 8, 16, 32)  # spatial: the estimate's pick (131 deep)
        assert split.default == 1 if backend != "spatial" else split.default > 1
    space = k.config_space(*args, backend="triton")
    src = k.source(*args, target="triton", config=space.default().replace(split_k=8))
    assert "of outer_k" in src and "# 1 tiles" not in src  # 8 parts of k: programs along it
    assert "1 of outer_k" in k.source(*args, target="triton", config=space.default())
    with pytest.raises(td.ConfigError, match="split_k = 3 is not one of"):
        k.run(*args, config=k.config_space(*args).default().replace(split_k=3))


@td.tile_kernel
def times_parts(x, top: td.constexpr):
    parts = td.register_tunable("parts", td.PowerOfTwo(1, top))  # bounded by a compile-time int
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * parts
    return out


def test_a_knob_bounded_by_a_compile_time_int() -> None:
    x = np.arange(5, dtype=np.float32)
    space = times_parts.config_space(x, 4)
    assert next(p for p in space.params if p.name == "parts").choices == (1, 2, 4)
    out = times_parts.run(x, 4, config=space.default().replace(parts=4))
    np.testing.assert_array_equal(out, x * 4)


def test_the_cost_of_a_knob_depends_on_the_shape() -> None:
    """On the spatial simulator a long k wants many parts, a short one few."""
    k = example("matmul_split_k").matmul_split_k
    best = {}
    for dims in ((16, 2048, 16), (256, 32, 256)):
        args = split_k_inputs(*dims)
        space = k.config_space(*args, backend="spatial")
        base = space.complete(td.Config(block_sizes=(16, 16, 32)))  # the same tiles for both
        cycles = {s: k.simulate(*args, config=base.replace(split_k=s)).cycles
                  for s in (1, 4, 16)}
        best[dims] = min(cycles, key=cycles.get)
    assert best[(16, 2048, 16)] == 16 and best[(256, 32, 256)] < 16


def test_the_tuner_searches_a_registered_knob(tmp_path) -> None:
    from autotune.tuner import tune
    k = example("matmul_split_k").matmul_split_k
    args = split_k_inputs(8, 263, 8)
    r = tune(k, list(args), backend="numpy", trials=6, strategy="random", check=True,
             storage=f"sqlite:///{tmp_path}/s.db")
    assert len({t.config.get("split_k") for t in r.trials}) > 1
    assert r.best is not None and r.best.get("split_k") in (1, 2, 4, 8, 16, 32)
    td.testing.assert_close(k(*args), example("matmul_split_k").reference(*args), np.float32)


def test_programs_add_into_a_0d_output() -> None:
    """FlagGems' vdot: every program adds its partial sum into a 0-d tensor (NumPy's atomic
    rule crashed on a tensor with no index); torchao's float8 amax: `tl.atomic_max(ptr, v)`
    into a tensor's first element."""
    triton = pytest.importorskip("triton")
    torch = pytest.importorskip("torch")
    from triton_kernels_0d import amax_kernel, sum_kernel

    @td.tile_kernel
    def total(x):
        out = torch.zeros([], dtype=torch.float32, device=x.device)
        sum_kernel[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), BLOCK=32)
        return out

    @td.tile_kernel
    def amax(x):
        out = torch.zeros(1, dtype=torch.float32, device=x.device)
        amax_kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), tl.float32, BLOCK_SIZE=16)
        return out

    tl = triton.language
    x = np.random.default_rng(7).standard_normal(37).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        got = total.run(x, backend=backend)
        assert got.shape == ()
        np.testing.assert_array_equal(amax.run(x, backend=backend), [np.abs(x).max()])
        td.testing.assert_close(got, x.astype(np.float64).sum(), np.float32)
