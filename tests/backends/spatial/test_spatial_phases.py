"""Kernels with several top-level grids on the spatial backend: one dataflow config per grid
(a phase), run in order, each phase reading what the ones before it stored."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.spatial import dataflow_config, report, run_program
from lowering.backends.spatial.arch import PRESETS, preset
from lowering.backends.spatial.schema import validate


@td.tile_kernel
def chain(x):
    """Three grids, each reading the previous one's output: y = 2x, z = y + row max of y,
    w = z * y (a 1-D grid between two 2-D ones)."""
    m, n = x.shape
    y = td.full((m, n), -1.0e30, dtype=td.float32)
    for tm, tn in td.tile(m, n):
        y[tm, tn] = x[tm, tn] * 2.0
    rmax = td.full((m,), -1.0e30, dtype=td.float32)
    for tm in td.tile(m):
        best = td.full((tm,), -1.0e30, dtype=td.float32)
        for tn in td.tile(n):
            best = td.maximum(best, td.max(y[tm, tn], axis=1))
        rmax[tm] = best
    w = td.empty((m, n), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        w[tm, tn] = (y[tm, tn] + rmax[tm][:, None]) * y[tm, tn]
    return w, rmax


def chain_reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = 2.0 * x.astype(np.float64)
    rmax = y.max(axis=1)
    return (y + rmax[:, None]) * y, rmax


def sample(k: td.TileKernel, x: np.ndarray, arch: str, n: int = 3) -> list[td.Config]:
    space = k.config_space(x, backend="spatial", arch=arch)
    return [space.default(), *space.sample(n, seed=2)]


@pytest.mark.parametrize("arch", sorted(PRESETS))
def test_phases_run_in_order_and_match_numpy(arch: str) -> None:
    x = np.random.default_rng(0).standard_normal((45, 77)).astype(np.float32)
    want_w, want_max = chain_reference(x)
    for config in sample(chain, x, arch):
        w, rmax = chain.run(x, backend="spatial", arch=arch, config=config)
        td.testing.assert_close(w, want_w, np.float32)
        td.testing.assert_close(rmax, want_max, np.float32)


def test_a_kernel_with_several_grids_maps_to_a_sequence_of_phases() -> None:
    x = np.random.default_rng(1).standard_normal((45, 77)).astype(np.float32)
    config = chain.config_space(x, backend="spatial").sample(1, seed=3)[0]
    doc = json.loads(chain.source(x, target="spatial", config=config))
    validate(doc)
    assert [p["phase"] for p in doc["phases"]] == [0, 1, 2]
    assert [len(p["grid"]) for p in doc["phases"]] == [2, 1, 2]
    assert {p["ir_hash"] for p in doc["phases"]} == {doc["ir_hash"]}
    for p in doc["phases"]:
        validate(p)  # each phase is a dataflow config on its own
    del doc["phases"][1]["agents"]
    with pytest.raises(td.BackendError, match="at phases/1: 'agents' is a required property"):
        validate(doc)


def test_one_grid_still_maps_to_one_config() -> None:
    from support import example, kernel_of
    args = example("row_sum").make_inputs(np.random.default_rng(0), {"m": 21, "n": 45})
    doc = json.loads(kernel_of("row_sum").source(*args, target="spatial"))
    assert "phases" not in doc and doc["phase"] == 0 and "agents" in doc


@pytest.mark.parametrize("arch", ["generic-8x8", "lpu-like"])  # dataflow and static timing
def test_the_report_adds_up_the_phases(arch: str, tmp_path) -> None:
    x = np.random.default_rng(2).standard_normal((45, 77)).astype(np.float32)
    config = chain.config_space(x, backend="spatial", arch=arch).sample(1, seed=4)[0]
    whole = chain.simulate(x, arch=arch, config=config, trace=tmp_path / "t.json")
    fn = chain.traces.get(chain.arg_spec(chain.bind((x,), {}))).lowered
    a = preset(arch)
    alone = [report(fn, [(p, run_program(p, a))], a)
             for p in dataflow_config(fn, config, a)["phases"]]
    assert whole.cycles == pytest.approx(sum(r.cycles for r in alone))
    assert whole.bound_cycles == pytest.approx(sum(r.bound_cycles for r in alone))
    assert whole.cycles >= whole.bound_cycles > 0
    assert whole.dram_bytes == sum(r.dram_bytes for r in alone)
    assert whole.dram_bytes >= whole.compulsory_dram_bytes
    assert whole.macs == 0 and whole.events == sum(r.events for r in alone)
    assert max(whole.sram_peak_bytes.values()) == \
        max(max(r.sram_peak_bytes.values()) for r in alone)
    # Agents of every phase, named by phase; a later phase starts after the earlier ones end.
    names = [a["name"] for a in whole.agents]
    assert any(n.startswith("phase0.compute") for n in names)
    assert any(n.startswith("phase2.writer") for n in names)
    first_end = alone[0].cycles
    later = [ev for ev in whole.trace if names[ev[0]].startswith("phase1.")]
    assert later and min(ev[2] for ev in later) >= first_end
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert max(e["ts"] + e["dur"] for e in events if e["ph"] == "X") == \
        pytest.approx(whole.microseconds, rel=1e-6)
    assert "compute busy/stall" in whole.summary() and " 0 / 0 cycles" not in whole.summary()


def test_every_phase_must_fit() -> None:
    """A config whose last grid overflows a PE's SRAM is refused, naming that grid, while the
    same blocks in the first grids fit."""
    x = np.random.default_rng(3).standard_normal((300, 300)).astype(np.float32)
    space = chain.config_space(x, backend="spatial", arch="aie-like-4x8")
    small = space.default()
    big = small.replace(block_sizes=[*small.block_sizes[:-2], 256, 256])
    with pytest.raises(td.ConfigError, match="grid 3: each PE needs .* bytes of SRAM"):
        space.validate(big)


def test_the_estimate_ranks_phased_configs() -> None:
    """The analytic estimate (the sum of the phases') orders configs as the simulator does."""
    from scipy.stats import spearmanr
    x = np.random.default_rng(4).standard_normal((45, 77)).astype(np.float32)
    space = chain.config_space(x, backend="spatial")
    configs = space.sample(12, seed=5)
    estimated = [space.estimate(c) for c in configs]
    simulated = [chain.simulate(x, config=c).cycles for c in configs]
    assert spearmanr(estimated, simulated).statistic > 0.8
