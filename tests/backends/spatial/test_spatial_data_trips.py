"""Loops whose trip count is read from the data on the spatial target (jagged rows): in dataflow
timing each program runs its own iterations once its bound has arrived; in static timing every
program is scheduled to the loop's bound and the iterations past its own are predicated."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.spatial.arch import preset
from lowering.backends.spatial.schema import validate
from support import example, kernel_of

DIMS = {"rows": 7, "m": 5, "max_len": 6}
CONFIG = td.Config(block_sizes=(2, 8, 4))  # rows, features, entries (jagged_sum)
CONFIGS = {"jagged_sum": CONFIG, "jagged_softmax": td.Config(block_sizes=(2, 8, 4, 4))}


def arch(timing: str):
    return dataclasses.replace(preset("generic-8x8"), timing=timing)


def copies(steps: list[dict], tensor: str) -> dict[bool, int]:
    """How many copies from `tensor` a program makes, loops unrolled, by whether predicated."""
    out = {False: 0, True: 0}
    for s in steps:
        if "loop" in s:
            for k, n in copies(s["body"], tensor).items():
                out[k] += s["loop"] * n
        elif "copy" in s and s["copy"]["src"].get("tensor") == tensor:
            out[bool(s["copy"].get("predicated"))] += 1
    return out


def test_jagged_rows_map_in_both_timings_and_match_numpy() -> None:
    """jagged_softmax's two passes over each row tile's entries (jagged_sum's one is alike)."""
    name = "jagged_softmax"
    kernel, config = kernel_of(name), CONFIGS[name]
    args = example(name).make_inputs(np.random.default_rng(3), DIMS)
    offsets = args[1]
    want = kernel.run(*args, backend="numpy", config=config)
    lengths = np.diff(offsets)
    block_b, block_m, block_k = config.block_sizes[:3]
    loops = 2 if name == "jagged_softmax" else 1  # passes over the entries per feature tile
    for timing in ("dataflow", "static"):
        got = kernel.run(*args, backend="spatial", arch=arch(timing), config=config)
        np.testing.assert_array_equal(got, want)
        assert kernel.simulate(*args, arch=arch(timing), config=config).cycles > 0
        doc = json.loads(kernel.source(*args, target="spatial", arch=arch(timing), config=config))
        validate(doc)
        for agent in (a for a in doc["agents"] if a["kind"] == "compute"):
            pe = "_".join(map(str, agent["pe"]))
            made = {False: 0, True: 0}
            for reader in (a for a in doc["agents"] if a["id"].startswith("reader")
                           and a["id"].endswith(f"_{pe}")):
                for k, n in copies(reader["program"], "x_data").items():
                    made[k] += n
            # each program's own iterations (to the longest row of its tile), or in static
            # timing all of them to the loop's bound (x_data's rows), the rest predicated
            passes = math.ceil(DIMS["m"] / block_m) * loops
            own = sum(math.ceil(lengths[g * block_b:(g + 1) * block_b].max() / block_k)
                      for (g,) in agent["programs"]) * passes
            bound = math.ceil(len(args[0]) / block_k) * len(agent["programs"]) * passes
            assert made[False] == own
            assert made[True] == (bound - made[False] if timing == "static" else 0)


def test_static_timing_pays_for_the_bound_on_skewed_rows() -> None:
    """Rows of one entry and one of 24, two programs per PE: dataflow programs run their own
    one or two iterations; static ones are all scheduled to the loop's bound (x_data's 151
    rows) and predicate the rest, so the PEs take several times longer."""
    lengths = np.ones(128, np.int64)
    lengths[37] = 24
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x = np.random.default_rng(5).standard_normal((offsets[-1], 8)).astype(np.float32)
    kernel, config = kernel_of("jagged_sum"), td.Config(block_sizes=(1, 8, 16), fold="linear")
    runs = {t: kernel.simulate(x, offsets, arch=arch(t), config=config)
            for t in ("dataflow", "static")}
    assert runs["static"].cycles > 2 * runs["dataflow"].cycles
    assert runs["static"].dram_bytes == runs["dataflow"].dram_bytes  # predicated: no data


@td.tile_kernel
def stop_at_what_it_writes(x, stops):
    """Each row tile bumps its stops, then sums its rows up to the largest: the stop is known
    only once the kernel has run."""
    n, m = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for tq in td.tile(n):
        stops[tq] = stops[tq] + 1
        acc = td.zeros((tq,), dtype=x.dtype)
        for tk in td.tile(m, stop=stops[tq].max()):
            acc = acc + td.sum(x[tq, tk], axis=1)
        out[tq] = acc
    return out


def test_a_stop_the_kernel_writes_is_refused_at_its_line() -> None:
    x = np.ones((6, 9), np.float32)
    stops = np.array([1, 2, 3, 4, 5, 6], np.int32)
    with pytest.raises(td.BackendError, match="its stop depends on a load of 'stops', a "
                       "tensor this kernel writes") as info:
        stop_at_what_it_writes.simulate(x, stops, arch=arch("dataflow"))
    assert "for tk in td.tile(m, stop=stops[tq].max()):" in str(info.value)


def test_a_persistent_loop_maps_each_tile_once_in_both_timings() -> None:
    """td.tile(m, n)[p::P]: each program computes every P-th output tile; the plan's MACs
    count every (m, n, k) product once, whatever tiles each program got."""
    dims = {"m": 37, "k": 20, "n": 29}  # 5 x 4 tiles of 8: fewer than the 16 programs
    args = example("persistent_matmul").make_inputs(np.random.default_rng(2), dims)
    kernel, config = kernel_of("persistent_matmul"), td.Config(block_sizes=(8, 8, 8))
    want = kernel.run(*args, backend="numpy", config=config)
    for timing in ("dataflow", "static"):
        got = kernel.run(*args, backend="spatial", arch=arch(timing), config=config)
        # not bit for bit: each PE's programs are one batched matmul, and OpenBLAS may sum a
        # batch of another size in another order (an AMD EPYC's kernels do: 1 ulp apart)
        td.testing.assert_close(got, want, np.float32)
        report = kernel.simulate(*args, arch=arch(timing), config=config)
        assert report.macs == dims["m"] * dims["k"] * dims["n"]


@td.tile_kernel
def double_unflagged(x, flags):
    """Rows whose flag is set are zeroed without reading x; the others doubled."""
    n, m = x.shape
    out = td.empty((n, m), dtype=x.dtype)
    for ti in td.tile(n, block_size=1):
        if flags[ti.begin] != 0:
            for tz in td.tile(m):
                out[ti, tz] = td.zeros((ti, tz), dtype=x.dtype)
        else:
            for tm in td.tile(m):
                out[ti, tm] = x[ti, tm] * 2
    return out


def test_an_if_on_loaded_data_takes_its_side_or_is_predicated() -> None:
    """Dataflow programs copy x only for their unflagged rows; static ones schedule both sides
    and predicate the one they do not take (same DRAM traffic, more cycles)."""
    x = np.random.default_rng(4).standard_normal((11, 20)).astype(np.float32)
    flags = np.array([1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0], np.int32)
    config = td.Config(block_sizes=(8, 8))
    want = double_unflagged.run(x, flags, backend="numpy", config=config)
    made, runs = {}, {}
    for timing in ("dataflow", "static"):
        got = double_unflagged.run(x, flags, backend="spatial", arch=arch(timing), config=config)
        np.testing.assert_array_equal(got, want)
        runs[timing] = double_unflagged.simulate(x, flags, arch=arch(timing), config=config)
        doc = json.loads(double_unflagged.source(x, flags, target="spatial", arch=arch(timing),
                                                 config=config))
        made[timing] = {False: 0, True: 0}
        for agent in doc["agents"]:
            for k, n in copies(agent["program"], "x").items():
                made[timing][k] += n
    tiles = math.ceil(20 / 8)
    assert made["dataflow"] == {False: 5 * tiles, True: 0}
    assert made["static"] == {False: 5 * tiles, True: 6 * tiles}
    assert runs["static"].dram_bytes == runs["dataflow"].dram_bytes
    assert runs["static"].cycles > runs["dataflow"].cycles
