"""Loops with a runtime stop (`td.tile(tq.end)`, causal attention) on the spatial target: each
program runs its own trip count, copies stop at the stop, a multicast line feeds only the PEs
that run each iteration, and the estimate counts all of it."""

from __future__ import annotations

import inspect
import itertools
import json
import math

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.spatial.arch import PRESETS, preset
from lowering.backends.spatial.schema import validate
from support import example, full_attention, kernel_of

ARCHS = sorted(PRESETS)
RAGGED = {"batch": 3, "seq": 77, "d": 36}
MANY = {"batch": 4, "seq": 300, "d": 32}  # more programs than PEs at block 16
LINES = {"batch": 8, "seq": 128, "d": 32}  # an 8 x 8 grid at block 16: whole PE lines multicast


causal = kernel_of("attention")  # its key loop stops at the query tile's end
masked = full_attention  # the same over every key tile, masked by `where`


@td.tile_kernel
def late_sums(x):
    """out[tq] = the column sums of x's rows before 2 * tq.end - n: the first half of the
    programs stop at or below 0 and run no iterations."""
    n, m = x.shape
    out = td.empty((n, m), dtype=x.dtype)
    for tq in td.tile(n):
        acc = td.zeros((tq, m), dtype=x.dtype)
        for tk in td.tile(2 * tq.end - n):
            acc = acc + td.sum(x[tk, :], axis=0)[None, :]
        out[tq, :] = acc
    return out


@td.tile_kernel
def triangle_sums(x):
    """A stop from an enclosing sequential loop's tile (`tj.end`), not from the grid's."""
    n, m = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for ti in td.tile(n):
        acc = td.zeros((ti,), dtype=x.dtype)
        for tj in td.tile(m):
            for tk in td.tile(tj.end):
                acc = acc + td.sum(x[ti, tk], axis=1)
        out[ti] = acc
    return out


def inputs(dims: dict[str, int]) -> tuple:
    return example("attention").make_inputs(np.random.default_rng(7), dims)


def config(kernel: td.TileKernel, args: tuple, arch: str, **knobs: object) -> td.Config:
    space = kernel.config_space(*args, backend="spatial", arch=arch)
    return space.complete(td.Config(**knobs))  # type: ignore[arg-type]


def key_rows(seq: int, block_q: int) -> int:
    """The key rows one batch entry of causal attention reads: each query tile's stop."""
    return sum(min(seq, end) for end in range(block_q, seq + block_q, block_q))


@pytest.mark.parametrize("arch", ARCHS)
def test_causal_attention_matches_the_reference(arch: str) -> None:
    args = inputs(RAGGED)
    want = example("attention").reference(*args)
    space = causal.config_space(*args, backend="spatial", arch=arch)
    picked = [c for c in space.sample(40, seed=1) if min(c.block_sizes) >= 4][:3]
    for c in [space.default(), config(causal, args, arch, block_sizes=(16, 32)), *picked]:
        td.testing.assert_close(causal.run(*args, backend="spatial", arch=arch, config=c),
                                want, np.float32)
        validate(json.loads(causal.source(*args, target="spatial", arch=arch, config=c)))


@pytest.mark.parametrize("arch", ARCHS)
def test_stopping_at_the_diagonal_moves_less_and_finishes_sooner(arch: str) -> None:
    """Against the same kernel over every key tile: only the key tiles up to each query tile's
    end are read, the last of them cut at the stop (block 16 queries, 32 keys: the stops
    16, 48, ... fall inside key tiles). With fewer programs than PEs the last query tile, which
    reads every key, sets the time; with more, PEs run short programs too and finish sooner."""
    for dims, at_most in [(RAGGED, 1.0), (MANY, 0.9)]:
        args = inputs(dims)
        batch, seq, d = args[0].shape
        for blocks, fold in itertools.product([(16, 32), (32, 16)], ["linear", "rows"]):
            knobs = {"block_sizes": blocks, "fold": fold}
            short = causal.simulate(*args, arch=arch, config=config(causal, args, arch, **knobs))
            full = masked.simulate(*args, arch=arch, config=config(masked, args, arch, **knobs))
            qo = 2 * batch * seq * d * 4  # q in, out back (no grid here fills whole PE lines)
            assert short.dram_bytes == qo + 2 * batch * key_rows(seq, blocks[0]) * d * 4
            assert full.dram_bytes == qo + 2 * batch * math.ceil(seq / blocks[0]) * seq * d * 4
            assert short.cycles <= at_most * full.cycles
            assert short.cycles >= short.bound_cycles * (1 - 1e-9) > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_a_multicast_line_feeds_only_the_pes_that_run_each_iteration(arch: str) -> None:
    """Keys and values do not depend on the query tile, so a PE row shares them by multicast;
    its PEs stop at different key tiles, so each tile goes to those still running. The row
    reads each tile once, as the masked kernel does, but finishes sooner."""
    args = inputs(LINES)
    c = config(causal, args, arch, block_sizes=(16, 16), fold="rows", multicast=True)
    df = json.loads(causal.source(*args, target="spatial", arch=arch, config=c))
    validate(df)
    line = preset(arch).cols
    sizes = {len(r["dst"]) for r in df["routes"] if r["kind"] == "multicast"}
    assert df["multicast"] and line in sizes and len(sizes) >= 2  # whole lines and parts of them
    td.testing.assert_close(causal.run(*args, backend="spatial", arch=arch, config=c),
                            example("attention").reference(*args), np.float32)
    short = causal.simulate(*args, arch=arch, config=c)
    full = masked.simulate(*args, arch=arch, config=config(masked, args, arch, **c.to_dict()))
    unicast = causal.simulate(*args, arch=arch,
                              config=config(causal, args, arch, block_sizes=(16, 16),
                                            fold="rows", multicast=False))
    assert short.dram_bytes == full.dram_bytes < unicast.dram_bytes
    assert short.cycles < full.cycles


@pytest.mark.parametrize("arch", ARCHS)
def test_programs_whose_stop_is_not_positive_run_no_iterations(arch: str) -> None:
    x = np.random.default_rng(3).standard_normal((45, 20)).astype(np.float32)
    space = late_sums.config_space(x, backend="spatial", arch=arch)
    for c in [space.complete(td.Config(block_sizes=(8, 4))), space.default(),
              *space.sample(3, seed=1)]:
        want = late_sums.run(x, backend="numpy", config=td.Config(block_sizes=c.block_sizes))
        np.testing.assert_array_equal(late_sums.run(x, backend="spatial", arch=arch, config=c),
                                      want)
    c = space.complete(td.Config(block_sizes=(8, 4)))
    stops = [2 * min(45, end) - 45 for end in range(8, 53, 8)]  # -29, -13, 3, 19, 35, 45
    rows = sum(min(45, max(0, s)) for s in stops)
    assert late_sums.simulate(x, arch=arch, config=c).dram_bytes == (rows + 45) * 20 * 4


def test_a_stop_from_an_enclosing_loop_is_a_clear_error() -> None:
    x = np.random.default_rng(4).standard_normal((20, 30)).astype(np.float32)
    assert triangle_sums.run(x, backend="numpy").shape == (20,)  # NumPy runs it
    lines, start = inspect.getsourcelines(triangle_sums.fn)
    line = start + next(i for i, s in enumerate(lines) if "td.tile(tj.end)" in s)
    with pytest.raises(td.BackendError, match=r"(?s)in kernel 'triangle_sums'.*stop depends on "
                       r"the tile of an enclosing sequential loop.*td\.tile\(tj\.end\)") as e:
        triangle_sums.run(x, backend="spatial")
    assert e.value.loc is not None and e.value.loc.line == line


def test_the_estimate_counts_every_programs_traffic_and_trips_exactly() -> None:
    """Program by program, the estimate's loads and stores add up to the DRAM bytes the
    simulator moved, and programs of one class (ragged edges and stops) do the same work."""
    from lowering.backends.spatial.estimate import _classes, program_work
    from lowering.backends.spatial.mapper import Mapping

    args = inputs(RAGGED)
    c = config(causal, args, "generic-8x8", block_sizes=(16, 32), fold="linear")
    m = Mapping(causal.traced(*args).lowered, c, preset("generic-8x8"))
    programs = list(itertools.product(*(range(n) for n in m.counts)))
    coords = tuple(np.array(x) for x in zip(*programs))
    classes, reps = _classes(m, coords, m.stops.limits(coords))
    total = 0
    for g, cls in zip(programs, classes.tolist()):
        work = program_work(m, g, 256)
        total += sum(s.bytes for s in work.loads.values()) + work.stores.bytes
        assert work == program_work(m, reps[cls], 256)
    assert len(reps) == 2 * m.counts[1]  # (last batch entry or not) x each query tile's stop
    assert total == causal.simulate(*args, arch="generic-8x8", config=c).dram_bytes


def test_the_estimate_follows_a_latency_bound_pipeline() -> None:
    """Causal attention at the example's sizes on wormhole-like, where a transfer's fixed cost
    (293 + 400 cycles) dwarfs its bytes: every config there waits on its first transfers (which
    the PEs sharing a DRAM channel make at once), on key and value tiles of several packets
    that share it in step, and on the compute of the steps after the last arrival. An estimate
    without those (readers alone; only the first and the last step of the pipeline) ranked
    16x64 ahead of the fastest, 32x32 (by 11%), and was up to 38% off."""
    args = inputs(example("attention").DIMS)
    space = causal.config_space(*args, backend="spatial", arch="wormhole-like")
    configs = [space.complete(td.Config(block_sizes=b, fold="linear"))
               for b in [(32, 32), (16, 64), (16, 32), (32, 64)]]
    cycles = [causal.simulate(*args, arch="wormhole-like", config=c).cycles for c in configs]
    estimates = [space.estimate(c) for c in configs]
    assert cycles == sorted(cycles)  # the configs are listed fastest first
    assert estimates == sorted(estimates)
    for e, c in zip(estimates, cycles):
        assert abs(e / c - 1) < 0.05


@pytest.mark.parametrize("arch", ARCHS)
def test_the_estimate_ranks_causal_configs_as_the_simulator_does(arch: str) -> None:
    """Sampled configs as in test_spatial.py, on a ragged grid and on one whose rows multicast
    (at block 16). Ignoring the stops (every program running every key tile) ranks them at
    0.65 to 0.87 and 0.77 to 0.84."""
    from scipy.stats import spearmanr

    for dims in [RAGGED, LINES]:
        args = inputs(dims)
        space = causal.config_space(*args, backend="spatial", arch=arch)
        picked = [c for c in space.sample(60, seed=3) if min(c.block_sizes) >= 4][:25]
        cycles = [causal.simulate(*args, arch=arch, config=c).cycles for c in picked]
        estimates = [space.estimate(c) for c in picked]
        assert spearmanr(estimates, cycles)[0] >= 0.9
        assert cycles[estimates.index(min(estimates))] <= 1.1 * min(cycles)
