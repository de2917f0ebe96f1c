"""The analytic H100 cost model (autotune/model.py): what it must rank right, on given resource
usage (no compile), and on what `k.compile` reports."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import tiledsl as td
from autotune.model import Resources, predict, predict_us
from support import example, kernel_of

M = K = N = 4096


def gemm() -> tuple[td.TileKernel, list[np.ndarray]]:
    a, b = example("matmul").make_inputs(np.random.default_rng(0), {"m": M, "k": K, "n": N},
                                         np.float16)
    return kernel_of("matmul"), [a, b]


def config(bm: int, bn: int, bk: int, warps: int = 8, stages: int = 3,
           group_m: int = 8) -> td.Config:
    return td.Config((bm, bn, bk), warps, stages, group_m=group_m, tma=False, persistent=False)


def us(c: td.Config, registers: int = 128, shared: int = 64 * 1024, spill: int = 0) -> float:
    k, args = gemm()
    return predict(k, args, c, [Resources(c.num_warps or 4, registers, shared, spill)])


def test_a_compute_bound_gemm_sits_on_the_tensor_core_roofline() -> None:
    """The tensor cores' time, plus each K trip's fixed cost (waits and issue: TRIP_CYCLES per
    trip per wave, fitted on an H200), stretched by the partial last wave, plus the launch."""
    from lowering.backends.triton.cost import H100, TRIP_CYCLES
    flops_us = 2.0 * M * N * K / 989e12 * 1e6  # an H100's dense fp16 peak
    programs, per_sm = (M // 128) * (N // 256), 2  # 2 by registers: 128 x 256 threads each
    waves = programs / (132 * per_sm)
    trips_us = math.ceil(waves) * (K // 64) * TRIP_CYCLES / (H100["clock_ghz"] * 1e3)
    expected = (flops_us + trips_us) * math.ceil(waves) / waves + 3.0
    assert us(config(128, 256, 64)) == pytest.approx(expected, rel=1e-6)


def test_short_k_blocks_pay_their_trips_and_tma_pays_less_per_trip() -> None:
    """On an H200, BLOCK_K=16 ran 1.5x slower than 64 at 8192^3 (128x128 tiles) where the
    roofline alone priced them alike; TMA and a persistent grid ran 1-2% faster."""
    assert us(config(128, 128, 16, warps=4)) > 1.2 * us(config(128, 128, 64, warps=4))
    plain = config(128, 256, 64)
    assert us(plain.replace(tma=True, persistent=True)) < us(plain.replace(tma=True)) < \
        us(plain)


def test_small_tiles_re_read_their_operands_and_are_memory_bound() -> None:
    assert us(config(32, 32, 32, warps=4)) > 4 * us(config(128, 256, 64))


def test_spills_registers_and_shared_memory_cost_time() -> None:
    c = config(128, 128, 64, warps=4)
    base = us(c, registers=128, shared=64 * 1024)
    assert us(c, spill=512) > base
    # 2 programs per SM by registers, 3 by shared memory, then 1: latency no longer hidden.
    assert us(c, registers=255, shared=200 * 1024) > base


def test_spills_in_the_k_loop_cost_more_than_any_sane_config() -> None:
    """A 512 x 128 tile at 8 warps compiles to 255 registers and 512 bytes of spills per
    thread on sm_90: its accumulator goes to local memory and back on each of the 64 trips of
    the K loop, so it must price far above the 64 x 64 default (it was priced best once)."""
    spilling = us(config(512, 128, 64, stages=2), registers=255, shared=160 * 1024, spill=512)
    default = us(config(64, 64, 64, warps=4), registers=72, shared=96 * 1024)
    assert spilling > 4 * default


def test_one_stage_with_one_program_per_sm_does_not_overlap_loads_and_math() -> None:
    big = dict(registers=200, shared=120 * 1024)  # one 256-thread program per SM
    assert us(config(128, 256, 64, stages=1), **big) > 1.2 * us(config(128, 256, 64, stages=3),
                                                                **big)
    small = dict(registers=64, shared=40 * 1024)  # several programs per SM overlap each other
    assert us(config(128, 256, 64, stages=1), **small) == us(config(128, 256, 64, stages=3),
                                                             **small)


def test_a_partial_last_wave_costs_a_whole_wave() -> None:
    """133 programs, one per SM, take two waves on 132 SMs; 132 take one."""
    def lowered(tiles_m: int, tiles_n: int) -> object:
        a, b = example("matmul").make_inputs(np.random.default_rng(0),
                                             {"m": 128 * tiles_m, "k": 1024, "n": 256 * tiles_n},
                                             np.float16)
        return kernel_of("matmul").traced(a, b).lowered
    one_per_sm = [Resources(8, 255, 200 * 1024, 0)]
    c = config(128, 256, 64)
    t132 = predict_us(lowered(6, 22), c, one_per_sm)  # type: ignore[arg-type]
    t133 = predict_us(lowered(7, 19), c, one_per_sm)  # type: ignore[arg-type]
    launch = 3.0
    assert t133 - launch > 1.8 * (t132 - launch)


def test_a_wave_of_tiny_programs_is_not_at_the_roofline() -> None:
    """A million-element vector add in programs of one element (2 warps, 32 per SM: 249
    waves, the last partial) takes at least a DRAM round trip per wave; in 512 programs of 2048,
    one wave."""
    x = np.ones(1 << 20, np.float32)
    fn = kernel_of("vector_add").traced(x, x).lowered
    tiny = predict_us(fn, td.Config((1,), 2, 1), [Resources(2, 16, 0, 0)])  # type: ignore[arg-type]
    wide = predict_us(fn, td.Config((2048,), 4, 3), [Resources(4, 32, 0, 0)])  # type: ignore[arg-type]
    assert tiny == pytest.approx(249 * 1.0 + 3.0) and tiny > 10 * wide


def test_the_model_runner_checks_its_numbers_in_the_isolated_process() -> None:
    """Checking a config on Triton's interpreter can take minutes (a program per element): it
    runs where the trial is measured, in the child that trial_timeout guards."""
    from autotune.runners import RUNNERS, from_file
    from support import EXAMPLES_DIR

    assert RUNNERS["model"].self_checking and RUNNERS["triton"].self_checking
    assert not RUNNERS["spatial"].self_checking and not RUNNERS["numpy"].self_checking
    x = np.ones(100, np.float32)
    unchecked = from_file(str(EXAMPLES_DIR / "vector_add.py"), "vector_add", [x, x], "model",
                          check=False)
    assert not unchecked.self_checking


def test_the_model_prices_what_k_compile_reports() -> None:
    pytest.importorskip("triton")
    from autotune.model import compiled_resources
    k, args = gemm()
    fast, slow = config(128, 256, 64), config(32, 32, 32, warps=4)
    p_fast = predict(k, args, fast, compiled_resources(k, args, fast))
    p_slow = predict(k, args, slow, compiled_resources(k, args, slow))
    assert 0 < p_fast < p_slow


def test_the_triton_space_ranks_configs_before_compiling() -> None:
    """The space's estimate is the model on resources guessed from the IR; the guesses are
    close to what the compiler reports, and the ranking is the compiled one's."""
    pytest.importorskip("triton")
    from autotune.model import compiled_resources
    from lowering.backends.triton.cost import estimated_resources
    k, args = gemm()
    space = k.config_space(*args, backend="triton")
    assert space.estimate is not None
    fn = k.traced(*args).lowered
    configs = [config(128, 256, 64), config(64, 64, 64, warps=4), config(32, 32, 32, warps=4)]
    # registers within 20%, except 64x64x64 at 4 warps without TMA: 82 estimated against 64
    # compiled since loops hoist their pointer tiles (86 before the pointer term replaced part of
    # the MMA base; registers.py says why no address term fits it and attention both)
    slack = {config(64, 64, 64, warps=4): 0.3}
    for c in configs:
        (guess,), (real,) = estimated_resources(fn, c), compiled_resources(k, args, c)
        assert abs(guess.registers - real.registers) <= slack.get(c, 0.2) * real.registers, \
            (c, guess, real)
        assert abs(guess.shared_bytes - real.shared_bytes) <= 0.25 * real.shared_bytes + 1024, \
            (c, guess, real)
        assert guess.num_warps == real.num_warps and guess.spill_bytes == real.spill_bytes == 0
    estimates = [space.estimate(c) for c in configs]
    assert estimates == sorted(estimates)


def test_the_register_estimate_counts_the_tiles_live_at_once() -> None:
    """Causal attention holds its accumulator, the scores, their probabilities and the row
    state at once: the estimate from the largest tile alone said 72 registers at 8 warps and
    104 at 4 where ptxas allocates about 128 and 240 (it chose 4 warps' configs that spill);
    TMA loads need no pointer tiles (193 at 4 warps)."""
    pytest.importorskip("triton")
    from autotune.model import compiled_resources
    from lowering.backends.triton.cost import estimated_resources
    mod = example("attention")
    args = mod.make_inputs(np.random.default_rng(0), {"batch": 2, "seq": 512, "d": 64},
                           np.float16)
    fn = mod.attention.traced(*args).for_backend("triton")
    # within 15% of what triton 3.9 allocates (the fit's version); 20% where 3.6 allocates
    # otherwise: at 8 warps 123 against 3.9's 128 (143 estimated), with TMA at 4 warps 216
    # against 191 (199 estimated)
    for warps, tma, slack in ((8, False, 0.2), (4, False, 0.15), (4, True, 0.2)):
        c = td.Config((128, 64), warps, 3, group_m=1, tma=tma)
        (guess,), (real,) = estimated_resources(fn, c), compiled_resources(mod.attention, args, c)
        assert abs(guess.registers - real.registers) <= slack * real.registers, (c, guess, real)


def test_two_stages_expose_each_trips_loads() -> None:
    """On the H200, 128x256x64 at 2 stages took 0.263 ms where 3 took 0.189 (4096^3 fp16): the
    model priced them alike and its favourite of a 40-trial tune, at 2 stages, measured 1.65x
    the fastest."""
    assert us(config(128, 256, 64, stages=2)) > 1.2 * us(config(128, 256, 64, stages=3))


def test_a_registered_knob_is_priced_with_its_own_trace() -> None:
    """split_k's value changes the program grid: with a long k and a small output, 16 parts fill
    the SMs that 1 part leaves idle (the model prices each value's trace, not the default's)."""
    mod = example("matmul_split_k")
    args = list(mod.make_inputs(np.random.default_rng(0), {"m": 128, "k": 65536, "n": 128},
                                np.float16))
    space = mod.matmul_split_k.config_space(*args, backend="triton")
    base = space.default().replace(block_sizes=(64, 64, 64), num_warps=4)
    res = [Resources(4, 128, 48 * 1024, 0)]
    one, sixteen = (predict(mod.matmul_split_k, args, base.replace(split_k=s), res)
                    for s in (1, 16))
    assert sixteen < one / 4


def test_the_estimate_prices_tma_persistence_and_warpgroups_apart() -> None:
    """Issue 30: with estimated resources the model priced TMA on and off, persistent on and
    off (GEMM at 4096^3) and attention's 4 and 8 warps (128x64 tiles, TMA) alike, so defaults
    and pruning could not prefer what the SASS shows is leaner."""
    from lowering.backends.triton.cost import estimate_us
    k, args = gemm()
    fn, plain = k.traced(*args).lowered, config(128, 256, 64)
    tma, both = plain.replace(tma=True), plain.replace(tma=True, persistent=True)
    assert estimate_us(fn, both) < estimate_us(fn, tma) < estimate_us(fn, plain)
    mod = example("attention")
    qkv = mod.make_inputs(np.random.default_rng(0), {"batch": 4, "seq": 4096, "d": 64},
                          np.float16)
    fn = mod.attention.traced(*qkv).for_backend("triton")
    four, eight = (td.Config((128, 64), w, 3, group_m=1, tma=True) for w in (4, 8))
    assert estimate_us(fn, four) < estimate_us(fn, eight)


WHOLE_ROWS = ("softmax", "layer_norm", "rms_norm")  # kernels whose tiles span all n columns


def test_the_register_estimate_is_within_15_percent_of_the_compiled_counts() -> None:
    """Against the registers ptxas allocated (benchmarks/register_estimate.py's committed
    tables, sm_90): the terms of registers.py were fitted on the seed-0 table (27 of 41 configs
    were more than 15% off before them, 9 before the pointer, streaming and norm terms) and
    checked on the held-out seed-1 table (18 of 41 off before those terms; 7 and 8 off before
    the arg-reduction and scan shuffle stages and the per-row reduction partials, 4 and 4
    before the chained dots' layouts and the window's pointer loads, 2 and 1 before the
    warp-local scans, overlapped trips and per-grid terms, none after)."""
    results = Path(__file__).parents[2] / "benchmarks" / "results"
    for table, share in (("register_estimate_sm_90.json", 1.0),
                         ("register_estimate_sm_90_heldout.json", 1.0)):
        errors = _register_errors(json.loads((results / table).read_text()))
        assert sum(e <= 0.15 for e in errors) >= share * len(errors), (table, sorted(errors))


def _register_errors(table: dict) -> list[float]:
    from lowering.backends.triton.cost import estimated_resources
    rows = [r for r in table["rows"] if "compiled" in r and r["spill_bytes"] == 0 and
            r["compiled"] < 255]
    errors = []
    for name in sorted({r["kernel"] for r in rows}):
        mod = example(name)
        # the benchmark's shapes, less the dimensions tiles cut (they do not change a tile)
        sizes = {d: v if d == "d" or (d == "n" and name in WHOLE_ROWS) else min(v, 256)
                 for d, v in table["sizes"][name].items()}
        args = mod.make_inputs(np.random.default_rng(0), sizes, np.dtype(table["dtypes"][name]))
        fn = getattr(mod, name).traced(*args).for_backend("triton")
        errors += [abs(estimated_resources(fn, td.Config.from_dict(r["config"]))[0].registers -
                       r["compiled"]) / r["compiled"] for r in rows if r["kernel"] == name]
    return errors
