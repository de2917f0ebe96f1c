"""Bad input to the spatial backend: custom architectures at the edges of their types and
hand-edited dataflow configs get a TileDSLError naming what is wrong, never a raw Python or
simulator error, a wrong number or a hang."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support import example, kernel_of

import tiledsl as td
from lowering.backends.spatial import run_program
from lowering.backends.spatial.arch import Arch, DramChannel, preset

GENERIC = preset("generic-8x8")


def _matmul_args() -> tuple:
    return example("matmul").make_inputs(np.random.default_rng(0), {"m": 40, "k": 24, "n": 36})


def _custom(**changes: Any) -> Arch:
    return dataclasses.replace(GENERIC, name="custom", **changes)


# ------------------------------------------------------------------------------------------------
# Custom architectures


def test_numpy_numbers_in_an_architecture_work_like_python_ones() -> None:
    dram = tuple(dataclasses.replace(d, attach=(np.int64(d.attach[0]), np.int64(d.attach[1])),
                                     bytes_per_cycle=np.float32(d.bytes_per_cycle))
                 for d in GENERIC.dram)
    arch = _custom(rows=np.int32(8), packet_bytes=np.int64(2048), min_mma=(np.int64(8), 16, 16),
                   link_bytes_per_cycle=np.float64(32.0), dram=dram)
    assert Arch.from_json(arch.to_json()) == arch
    args = _matmul_args()
    k = kernel_of("matmul")
    out = k.run(*args, backend="spatial", arch=arch)
    td.testing.assert_close(out, example("matmul").reference(*args))
    assert k.simulate(*args, arch=arch).cycles == \
        k.simulate(*args, arch=_custom(packet_bytes=2048)).cycles


def test_a_packet_size_the_simulator_cannot_take_is_a_config_error() -> None:
    with pytest.raises(td.ConfigError, match="packet_bytes must be an integer of at least 1 "
                                             "and at most 2\\*\\*62"):
        _custom(packet_bytes=2**63)


@pytest.mark.parametrize("changes, field", [({"link_bytes_per_cycle": 10**400},
                                               "link_bytes_per_cycle"),
                                              ({"clock_ghz": -(10**400)}, "clock_ghz")])
def test_an_int_no_float_holds_is_a_config_error(changes: dict, field: str) -> None:
    with pytest.raises(td.ConfigError, match=f"{field} must be a number above 0"):
        _custom(**changes)


@pytest.mark.parametrize("changes", [
    {"transfer_overhead_cycles": 1e308},
    {"op_overhead_cycles": 1e308},
    {"dram": (DramChannel("d", (0, 0), 64.0, 1e308, 256),)},
])
def test_timings_that_overflow_are_an_error_not_inf_cycles(changes: dict) -> None:
    args = _matmul_args()
    with pytest.raises(td.BackendError, match="simulated time overflows"):
        kernel_of("matmul").simulate(*args, arch=_custom(**changes))


# ------------------------------------------------------------------------------------------------
# Hand-edited dataflow configs given to run_program


def _dataflow(timing: str = "dataflow") -> dict[str, Any]:
    arch = "lpu-like" if timing == "static" else "generic-8x8"
    return json.loads(kernel_of("matmul").source(
        *_matmul_args(), target="spatial", arch=arch,
        config=td.Config((16, 16, 8), fold="rows", buffer_depth=2, multicast=True)))


def _step(df: dict, key: str) -> dict:
    """The first step with `key` in any agent's program (loop bodies included)."""
    def find(steps: list[dict]) -> dict | None:
        for s in steps:
            if key in s:
                return s
            if "loop" in s and (found := find(s["body"])) is not None:
                return found
        return None
    return next(s for a in df["agents"] if (s := find(a["program"])) is not None)


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def edit(df: dict) -> None:
        *where, last = path.split("/")
        target: Any = df
        for p in where:
            target = target[int(p)] if p.isdigit() else target[p]
        target[last] = value
    return edit


def _delete(path: str) -> Callable[[dict], None]:
    def edit(df: dict) -> None:
        *where, last = path.split("/")
        target: Any = df
        for p in where:
            target = target[int(p)] if p.isdigit() else target[p]
        del target[last]
    return edit


def _dup_semaphore(df: dict) -> None:
    df["semaphores"].append(dict(df["semaphores"][0], init=0))


def _dup_route(df: dict) -> None:
    df["routes"].append(dict(df["routes"][0], hops=100))


def _acquire(field: str, value: Any) -> Callable[[dict], None]:
    return lambda df: _step(df, "acquire").__setitem__(field, value)


def _copy(field: str, value: Any) -> Callable[[dict], None]:
    return lambda df: _step(df, "copy")["copy"].__setitem__(field, value)


def _op(field: str, value: Any) -> Callable[[dict], None]:
    return lambda df: _step(df, "op")["op"].__setitem__(field, value)


def _renumber_links(df: dict) -> None:
    df["links"][0]["id"], df["links"][1]["id"] = df["links"][1]["id"], df["links"][0]["id"]


def _link(value: Any) -> Callable[[dict], None]:
    def edit(df: dict) -> None:
        next(r for r in df["routes"] if r["links"])["links"] = value
    return edit


def _drain(field: str, value: Any) -> Callable[[dict], None]:
    """Set `field` of the first copy that drains an SRAM buffer (a writer's)."""
    def edit(df: dict) -> None:
        writer = next(a for a in df["agents"] if a["id"].startswith("writer"))
        _step({"agents": [writer]}, "copy")["copy"][field] = value
    return edit


def _deep(df: dict) -> None:
    body: list[dict] = [{"op": {"program": [0, 0], "cycles": 1.0, "macs": 1, "ops": []}}]
    for _ in range(3000):
        body = [{"loop": 1, "body": body}]
    df["agents"][0]["program"] = body


@pytest.mark.parametrize("edit, message", [
    (_delete("semaphores"), "schema at <root>: 'semaphores' is a required property"),
    (_set("timing", "fast"), "schema at timing: 'fast' is not one of"),
    (_set("agents", 5), "schema at agents: 5 is not of type 'array'"),
    (_set("semaphores/0/init", "2"), "schema at semaphores/0/init: '2' is not of type 'integer'"),
    (_set("semaphores/0/init", 5), "semaphore 'ld0_0_0.empty': need 0 <= initial <= maximum"),
    (_set("semaphores/0/max", 2**64), "schema at semaphores/0/max: .* is greater than the maximum"),
    (_set("routes/0/hops", -5), "schema at routes/0/hops: -5 is less than the minimum of 0"),
    (_set("routes/0/src", {"dram": "nope"}),
     "route 'r0' starts or ends at DRAM channel 'nope', which generic-8x8 does not have"),
    (_set("routes/0/dst", []), "schema at routes/0/dst: .* should be non-empty"),
    (_set("bogus", 1), "schema at <root>: Additional properties are not allowed"),
    (_dup_semaphore, "semaphore id 'ld0_0_0.empty' is defined twice"),
    (_dup_route, "route id 'r0' is defined twice"),
    (_renumber_links, "link 0 has id 1: links must be numbered 0, 1, 2, ... in order"),
    (_link([10**6]), "route .* uses link 1000000; the config has"),
    (_acquire("acquire", "nope"),
     "agent 'compute_0_0' acquires semaphore 'nope', which is not defined"),
    (_acquire("n", 0), "schema at agents/0/program/1/body/0/n: 0 is less than the minimum of 1"),
    (_acquire("n", 5), "n=5 exceeds the maximum 2 of semaphore"),
    (_copy("route", "nope"), "agent 'reader0_0_0' copies over route 'nope', which is not defined"),
    (_copy("bytes", 1.5), "schema at agents/1/program/0/body/1/copy/bytes: 1.5 is not of type"),
    (_copy("bytes", 2**70), f"program/0/body/1/copy/bytes: {2**70} is greater than the maximum"),
    (_op("cycles", "1"), "schema at agents/0/program/0/op/cycles: '1' is not of type"),
    (_op("cycles", -1), "schema at agents/0/program/0/op/cycles: -1 is less than the minimum"),
    (_set("arch", "aie-like-4x8"),
     r"mapped for 'aie-like-4x8' \(dataflow timing\), not for 'generic-8x8' \(dataflow"),
    (_set("timing", "static"),
     r"mapped for 'generic-8x8' \(static timing\), not for 'generic-8x8' \(dataflow timing"),
    (_deep, "nested too deeply"),
    # references and numbers the architecture cannot hold (issue 29)
    (_copy("dst", {"buffers": ["nope"]}),
     "body/1/copy/dst: agent 'reader0_0_0' copies to buffer 'nope', which is not defined"),
    (_drain("src", {"buffer": "nope"}), "copies from buffer 'nope', which is not defined"),
    (_copy("src", {"tensor": "nope", "offset": 0, "sizes": [1], "strides": [1]}),
     "copies from tensor 'nope', which is not defined"),
    (_set("routes/0/dst", [{"pe": [100, 100]}]),
     r"routes/0/dst/0/pe: PE \[100, 100\] is outside generic-8x8's 8x8 grid"),
    (_set("links/0/from", [7, 7]), r"links/0/dir: PE \[7, 8\] is outside"),
    (_set("buffers/0/bytes", 2**62), "buffers/0: buffer 'ld0_0_0' .* past the 1048576 bytes"),
    (_copy("bytes", 513), "copy/bytes: the copy moves 513 bytes; buffer 'ld0_0_0' holds 512"),
    (_set("routes/0/hops", 2**62), f"routes/0/hops: route 'r0' has {2**62} hops over 0 links"),
    (_set("routes/0/channel", 2**40), "routes/0/channel: .* generic-8x8 has 8 channels per"),
    (_set("tensors/0/shape", [2**40, 2**40]), r"tensors/0/shape: .* more than the 2\*\*62"),
    (_op("cycles", 10**400), "program/0/op/cycles: .* is greater than the maximum"),
])
def test_a_broken_dataflow_config_is_a_backend_error(edit: Callable[[dict], None],
                                                     message: str) -> None:
    df = _dataflow()
    run_program(copy.deepcopy(df), GENERIC)  # the unedited config runs
    edit(df)
    with pytest.raises(td.BackendError, match=message):
        run_program(df, GENERIC)


def test_a_release_over_the_maximum_is_a_backend_error() -> None:
    df = _dataflow()
    next(s for s in df["semaphores"] if s["id"].endswith(".empty"))["init"] = 1
    _step(df, "release")["n"] = 2
    with pytest.raises(td.BackendError, match="fails on generic-8x8: semaphore .* overflow"):
        run_program(df, GENERIC)


def test_a_config_of_several_phases_is_run_phase_by_phase() -> None:
    df = _dataflow()
    seq = {k: df[k] for k in ("version", "kernel", "ir_hash", "config", "arch", "timing")}
    seq["phases"] = [df]
    with pytest.raises(td.BackendError, match="has 1 phase: run each of phases"):
        run_program(seq, GENERIC)
    with pytest.raises(td.BackendError, match="must be a dict"):
        run_program([df], GENERIC)  # type: ignore[arg-type]


def test_a_static_config_whose_copies_move_no_bytes_runs() -> None:
    df = _dataflow("static")

    def zero(steps: list[dict]) -> None:
        for s in steps:
            if "copy" in s:
                s["copy"]["bytes"] = 0
            elif "loop" in s:
                zero(s["body"])
    for a in df["agents"]:
        zero(a["program"])
    assert run_program(df, preset("lpu-like"))["cycles"] > 0


def test_a_static_program_too_long_to_unroll_is_refused_before_unrolling() -> None:
    df = _dataflow("static")
    _step(df, "loop")["loop"] = 10**12  # unrolled step by step, it would fill any memory
    with pytest.raises(td.BackendError, match=r"would have [0-9,]+ steps with its loops "
                                              r"unrolled \(agent 'compute_0_0' alone"):
        run_program(df, preset("lpu-like"))


def _unrolled(steps: list[dict], times: int) -> list[dict]:
    """`steps` with its outer loops running `times` times as often, unrolled."""
    out: list[dict] = []
    for s in steps:
        out += _unrolled(s["body"], 1) * (s["loop"] * times) if "loop" in s else [s]
    return out


def test_a_long_program_is_checked_in_one_pass() -> None:
    """An 80,000-step config: the schema is compiled once, not interpreted per step (jsonschema
    took 6-30 s for what the simulator does in 0.1-0.4 s); a broken step is still named."""
    from time import perf_counter

    from lowering.backends.spatial import schema

    df = _dataflow()
    for a in df["agents"]:
        a["program"] = _unrolled(a["program"], 250)
    steps = sum(len(a["program"]) for a in df["agents"])
    start = perf_counter()
    schema.check(df, GENERIC)
    checked = perf_counter()
    assert run_program(df, GENERIC, check=False)["cycles"] > 0
    print(f"{steps:,} steps: checked in {checked - start:.2f} s, "
          f"simulated in {perf_counter() - checked:.2f} s")
    i = max(range(len(df["agents"])), key=lambda i: len(df["agents"][i]["program"]))
    program = df["agents"][i]["program"]
    program[-1] = next(dict(s, n=0) for s in program if "acquire" in s)
    with pytest.raises(td.BackendError, match=f"at agents/{i}/program/{len(program) - 1}/n: 0 "
                                              "is less than the minimum of 1"):
        schema.check(df, GENERIC)
