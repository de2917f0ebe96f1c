"""Loops with a runtime start (`td.tile(tq.end, start=tq.begin - window + 1)`, sliding-window
attention) on the spatial target: each program runs only the key tiles that meet its window,
the first cut at the start and the last at the stop; a multicast line covers, per key tile, the
PEs that run it; the estimate counts all of it."""

from __future__ import annotations

import inspect
import itertools
import json
import math
from typing import Any

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.spatial import scalar_args
from lowering.backends.spatial.arch import PRESETS, preset
from lowering.backends.spatial.estimate import _classes, estimate_cycles, program_work
from lowering.backends.spatial.mapper import Mapping
from lowering.backends.spatial.schema import validate
from tiledsl.runtime import registry
from support import kernel_of

ARCHS = sorted(PRESETS)
RAGGED = (2, 77, 16)
MANY = (2, 300, 32)  # more programs than PEs at block 16
LINES = (8, 128, 32)  # an 8 x 8 grid at block 16: whole PE lines multicast


@td.tile_kernel
def window_attention(q, k, v, window: int):
    """examples/window_attention.py with the window as a scalar argument: bounds read from an
    argument are planned with its value."""
    batch, seq, d = q.shape
    scale = 1.0 / math.sqrt(d)
    out = td.empty((batch, seq, d), dtype=q.dtype)
    for bh, tq in td.tile(batch, seq, block_size=(1, None)):
        b = bh.begin
        qt = q[b, tq, :]
        m_i = td.full((tq,), -float("inf"), dtype=td.float32)
        l_i = td.zeros((tq,), dtype=td.float32)
        acc = td.zeros((tq, d), dtype=td.float32)
        for tk in td.tile(tq.end, start=tq.begin - window + 1):
            s = (qt @ k[b, tk, :].T) * scale
            dist = tq.index[:, None] - tk.index[None, :]
            s = td.where((dist >= 0) & (dist < window), s, -float("inf"))
            m_new = td.maximum(m_i, td.max(s, axis=1))
            m_safe = td.where(m_new == -float("inf"), 0.0, m_new)  # rows with no key yet
            alpha = td.exp(m_i - m_safe)
            p = td.exp(s - m_safe[:, None])
            l_i = l_i * alpha + td.sum(p, axis=1)
            acc = acc * alpha[:, None] + p.astype(v.dtype) @ v[b, tk, :]
            m_i = m_new
        out[b, tq, :] = acc / l_i[:, None]
    return out


@td.tile_kernel
def band_sums(x):
    """A start from an enclosing sequential loop's tile (`tj.begin`), not from the grid's."""
    n, m = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for ti in td.tile(n):
        acc = td.zeros((ti,), dtype=x.dtype)
        for tj in td.tile(m):
            for tk in td.tile(m, start=tj.begin):
                acc = acc + td.sum(x[ti, tk], axis=1)
        out[ti] = acc
    return out


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, window: int) -> np.ndarray:
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    seq, d = q.shape[1], q.shape[2]
    s = q @ np.swapaxes(k, 1, 2) / math.sqrt(d)
    i = np.arange(seq)
    dist = i[:, None] - i[None, :]
    s = np.where((dist >= 0) & (dist < window), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


def inputs(shape: tuple[int, int, int], window: int) -> list[Any]:
    rng = np.random.default_rng(11)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(3)] + [window]


def config(kernel: td.TileKernel, args: list[Any], arch: str, **knobs: object) -> td.Config:
    space = kernel.config_space(*args, backend="spatial", arch=arch)
    return space.complete(td.Config(**knobs))  # type: ignore[arg-type]


def simulate(kernel: td.TileKernel, args: list[Any], arch: str, c: td.Config) -> Any:
    """Simulate with the scalar arguments given (the window bounds the key loop)."""
    return registry.backend("spatial").simulate(  # type: ignore[attr-defined]
        kernel.traced(*args).lowered, c, arch=arch, args=args)


def mapping(kernel: td.TileKernel, args: list[Any], arch: str, c: td.Config) -> Mapping:
    fn = kernel.traced(*args).lowered
    return Mapping(fn, c, preset(arch), scalars=scalar_args(fn, args))


def windows(seq: int, block_q: int, window: int) -> list[tuple[int, int]]:
    """Each query tile's key lanes [lower, limit), as the NumPy backend bounds them."""
    out = []
    for begin in range(0, seq, block_q):
        limit = min(seq, begin + block_q)
        out.append((min(max(begin - window + 1, 0), limit), limit))
    return out


def key_bytes(shape: tuple[int, int, int], block_q: int, window: int) -> int:
    """DRAM bytes of q in, out back, and k and v: each program reads its window's key rows."""
    batch, seq, d = shape
    rows = sum(limit - lower for lower, limit in windows(seq, block_q, window))
    return 2 * batch * seq * d * 4 + 2 * batch * rows * d * 4


def line_bytes(shape: tuple[int, int, int], block_q: int, block_k: int, window: int,
               line: int) -> int:
    """The same when the query tiles of a PE line share k and v by multicast: each key tile
    goes once to the line's PEs that run it, covering from their lowest start to their
    furthest stop."""
    batch, seq, d = shape
    spans = windows(seq, block_q, window)
    rows = 0
    for head in range(0, len(spans), line):
        members = spans[head:head + line]
        for j in range(math.ceil(seq / block_k)):
            lo, hi = j * block_k, (j + 1) * block_k
            runs = [(a, b) for a, b in members if a < b and a < hi and b > lo]
            if runs:
                rows += max(0, min(hi, max(b for _, b in runs)) - max(lo, min(a for a, _ in runs)))
    return 2 * batch * seq * d * 4 + 2 * batch * rows * d * 4


@pytest.mark.parametrize("arch", ARCHS)
def test_sliding_window_attention_matches_the_reference(arch: str) -> None:
    """Windows of 1 key (each row sees itself), 5, 20 and more than the sequence; block configs
    whose windows start inside, at, and before key tiles; a ragged sequence and head size."""
    for window in (1, 5, 20, 100):
        args = inputs(RAGGED, window)
        want = reference(*args)
        space = window_attention.config_space(*args, backend="spatial", arch=arch)
        picked = [c for c in space.sample(20, seed=window) if min(c.block_sizes) >= 4][:2]
        blocks = [config(window_attention, args, arch, block_sizes=b)
                  for b in [(16, 16), (32, 16), (16, 32), (64, 64), (8, 4)]]
        for c in [*blocks, *picked]:
            got = window_attention.run(*args, backend="spatial", arch=arch, config=c)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        validate(json.loads(window_attention.source(*args, target="spatial", arch=arch,
                                                    config=blocks[1])))


@pytest.mark.parametrize("arch", ARCHS)
def test_only_the_window_is_read_and_it_finishes_sooner(arch: str) -> None:
    """Each program reads the key rows from its start to its stop, no more (the first key
    tile cut at the start: block 32 windows of 64 start one row into a tile), and, against
    causal attention (every key tile up to the query tile's end), reads less and finishes
    sooner for a small window."""
    for (bq, bk), fold, window in itertools.product([(32, 32), (16, 32), (32, 16)],
                                                   ["linear", "rows"], [1, 5, 64]):
        args = inputs(MANY, window)
        knobs = {"block_sizes": (bq, bk), "fold": fold}
        c = config(window_attention, args, arch, **knobs)
        short = simulate(window_attention, args, arch, c)
        assert short.dram_bytes == key_bytes(MANY, bq, window)
        assert short.cycles >= short.bound_cycles * (1 - 1e-9) > 0
        if window == 64:
            causal, qkv = kernel_of("attention"), args[:3]  # every key tile to tq.end
            full = causal.simulate(*qkv, arch=arch, config=config(causal, qkv, arch, **knobs))
            assert short.dram_bytes < 0.6 * full.dram_bytes
            assert short.cycles < full.cycles
    args = inputs(MANY, 64)
    c = config(window_attention, args, arch, block_sizes=(32, 32))
    np.testing.assert_allclose(window_attention.run(*args, backend="spatial", arch=arch,
                                                    config=c), reference(*args), atol=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_multicast_line_covers_the_pes_that_run_each_key_tile(arch: str) -> None:
    """k and v do not depend on the query tile, so a PE row shares them; its PEs run different
    key tiles (each its own window), so each tile goes to those that run it, from the lowest of
    their starts to the furthest of their stops."""
    sizes: set[int] = set()
    for window in (5, 20):
        args = inputs(LINES, window)
        c = config(window_attention, args, arch, block_sizes=(16, 16), fold="rows",
                   multicast=True)
        df = json.loads(window_attention.source(*args, target="spatial", arch=arch, config=c))
        validate(df)
        assert df["multicast"]
        line = {len(r["dst"]) for r in df["routes"] if r["kind"] == "multicast"}
        assert max(line) < preset(arch).cols  # parts of lines: the PEs that run each key tile
        sizes |= line
        np.testing.assert_allclose(window_attention.run(*args, backend="spatial", arch=arch,
                                                        config=c), reference(*args), atol=1e-4)
        shared = simulate(window_attention, args, arch, c)
        unicast = simulate(window_attention, args, arch,
                           config(window_attention, args, arch, block_sizes=(16, 16),
                                  fold="rows", multicast=False))
        assert shared.dram_bytes == line_bytes(LINES, 16, 16, window, preset(arch).cols)
        assert unicast.dram_bytes == key_bytes(LINES, 16, window)
        assert shared.dram_bytes < unicast.dram_bytes
    assert len(sizes) >= 2  # a wider window, longer parts


def test_a_start_from_an_enclosing_loop_is_a_clear_error() -> None:
    x = np.random.default_rng(4).standard_normal((20, 30)).astype(np.float32)
    assert band_sums.run(x, backend="numpy").shape == (20,)  # NumPy runs it
    lines, first = inspect.getsourcelines(band_sums.fn)
    line = first + next(i for i, s in enumerate(lines) if "start=tj.begin" in s)
    with pytest.raises(td.BackendError, match=r"(?s)in kernel 'band_sums'.*start depends on "
                       r"the tile of an enclosing sequential loop.*start=tj\.begin") as e:
        band_sums.run(x, backend="spatial")
    assert e.value.loc is not None and e.value.loc.line == line


def test_a_plan_without_the_window_argument_names_it() -> None:
    """The start depends on the scalar argument `window`: the kernel's run, simulate and
    source plan with the arguments' values; the config space, built per argument types, prices
    it without them (trips.py guesses the data-bound trips); and a plan made without the values
    says which one it lacks."""
    args = inputs(RAGGED, 5)
    space = window_attention.config_space(*args, backend="spatial", arch="generic-8x8")
    c = space.default()
    assert space.estimate is not None and space.estimate(c) > 0
    assert window_attention.simulate(*args, arch="generic-8x8", config=c).dram_bytes == \
        simulate(window_attention, args, "generic-8x8", c).dram_bytes
    with pytest.raises(td.BackendError, match=r"start depends on the kernel argument 'window'"):
        registry.backend("spatial").simulate(  # type: ignore[attr-defined]
            window_attention.traced(*args).lowered, c, arch="generic-8x8")


def test_the_estimate_counts_every_programs_traffic_and_iterations_exactly() -> None:
    """Program by program, the estimate's loads and stores add up to the DRAM bytes the
    simulator moved, and programs of one class (ragged edges, starts and stops) do the same
    work."""
    args = inputs(RAGGED, 20)
    c = config(window_attention, args, "generic-8x8", block_sizes=(16, 8), fold="linear")
    m = mapping(window_attention, args, "generic-8x8", c)
    programs = list(itertools.product(*(range(n) for n in m.counts)))
    coords = tuple(np.array(x) for x in zip(*programs))
    classes, reps = _classes(m, coords, m.stops.limits(coords))
    total = 0
    for g, cls in zip(programs, classes.tolist()):
        work = program_work(m, g, 256)
        total += sum(s.bytes for s in work.loads.values()) + work.stores.bytes
        assert work == program_work(m, reps[cls], 256)
    assert len(reps) == 2 * m.counts[1]  # (last batch entry or not) x each query tile's window
    assert total == simulate(window_attention, args, "generic-8x8", c).dram_bytes == \
        key_bytes(RAGGED, 16, 20)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_estimate_ranks_sliding_window_configs_as_the_simulator_does(arch: str) -> None:
    """Sampled configs on a ragged grid and on one whose rows multicast (at block 16): rank
    correlation 0.92 to 1.0; the config it ranks best is within 20% of the fastest."""
    from scipy.stats import spearmanr

    for shape in [RAGGED, LINES]:
        args = inputs(shape, 20)
        space = window_attention.config_space(*args, backend="spatial", arch=arch)
        picked = [c for c in space.sample(60, seed=3) if min(c.block_sizes) >= 4][:25]
        cycles = [simulate(window_attention, args, arch, c).cycles for c in picked]
        estimates = [estimate_cycles(mapping(window_attention, args, arch, c)) for c in picked]
        assert spearmanr(estimates, cycles)[0] >= 0.85
        assert cycles[estimates.index(min(estimates))] <= 1.2 * min(cycles)
