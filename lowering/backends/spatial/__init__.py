"""The spatial dataflow backend: the mapper emits a dataflow config for a parameterized PE
array (one per top-level grid: phases that run in order); `run` executes its compute steps on
the data and `simulate` times it on the C++ event-driven simulator (csrc/)."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from lowering.backends.numpy import check_written
from lowering.backends.numpy.room import check_allocations
from lowering.backends.spatial import schema
from lowering.backends.spatial import space as spatial_space
from lowering.backends.spatial.arch import Arch, preset
from lowering.backends.spatial.defaults import estimated_default
from lowering.backends.spatial.engine import (Program, SimReport, check_trace_path,
                                              simulator_module)
from lowering.backends.spatial.functional import execute
from lowering.backends.spatial.mapper import SCHEMA_VERSION, Mapping, grids
from lowering.pipeline import lower_for_spatial
from tiledsl.runtime import registry
from tiledsl.runtime.config import Config, ConfigSpace
from tiledsl.errors import BackendError
from tiledsl.ir.core import Function, Value
from tiledsl.ir.printer import ir_hash
from tiledsl.ir.types import TensorType, TileType

DEFAULT_ARCH = "generic-8x8"


def scalar_args(fn: Function, args: list[Any] | None) -> dict[Value, Any] | None:
    """The kernel's scalar argument values by IR value (None without the arguments): a
    `td.tile(stop, start=s)` loop's bounds may depend on them (`trips.py`)."""
    if args is None:
        return None
    return {v: a for v, a in zip(fn.args, args) if isinstance(v.type, TileType)}


def dataflow_config(fn: Function, config: Config, arch: str | Arch | None = None,
                    args: list[Any] | None = None) -> dict[str, Any]:
    """The kernel's dataflow config: one grid maps to one config; several grids map to a
    sequence of them (phases) that run one after another, as TT-Metalium enqueues programs and
    MLIR-AIE runtime sequences do. `args` (the kernel's arguments) gives loop bounds that
    depend on scalar arguments or loaded data their values."""
    a = preset(DEFAULT_ARCH if arch is None else arch)
    count = len(grids(fn))
    scalars = scalar_args(fn, args)
    if count == 1:
        return Mapping(fn, config, a, scalars=scalars, args=args).build()
    return {"version": SCHEMA_VERSION, "kernel": fn.name, "ir_hash": ir_hash(fn),
            "config": config.to_dict(), "arch": a.name, "timing": a.timing,
            "phases": [Mapping(fn, config, a, phase=i, scalars=scalars, args=args).build()
                       for i in range(count)]}


def phases(dataflow: dict[str, Any]) -> list[dict[str, Any]]:
    """The configs of a dataflow config's phases, in the order they run."""
    return dataflow["phases"] if "phases" in dataflow else [dataflow]


def _dot_dtype(fn: Function) -> str:
    from tiledsl.ir.core import walk
    for op in walk(fn.body):
        if op.name == "dot":
            t = op.operands[0].type
            assert isinstance(t, TileType)
            return t.dtype.short
    return "f32"


def report(fn: Function, runs: list[tuple[dict[str, Any], dict[str, Any]]], arch: Arch
           ) -> SimReport:
    """The simulator's raw numbers for each phase's (dataflow config, result), added up as
    phases run one after another, with the roofline bound and traffic minimums added. A phase
    cannot beat its own roofline bound, so the kernel's bound is the sum of its phases'."""
    dtype = _dot_dtype(fn)
    peak = arch.peak_macs(dtype)
    several = len(runs) > 1
    macs, cycles, events, dram_bytes = 0, 0.0, 0, 0
    totals = {"compute": 0.0, "dram": 0.0, "noc": 0.0}
    bound = 0.0
    agents: list[dict[str, Any]] = []
    trace: list[tuple] = []
    links: dict[str, dict[str, Any]] = {}
    drams: dict[str, dict[str, Any]] = {}
    sram: dict[str, int] = {}
    for i, (dataflow, raw) in enumerate(runs):
        prefix = f"phase{i}." if several else ""
        phase_macs = sum(_macs(a["program"]) for a in dataflow["agents"])
        phase_dram = int(sum(d["bytes"] for d in raw["drams"]))
        terms = {"compute": phase_macs / peak if peak else 0.0,
                 "dram": phase_dram / arch.dram_bytes_per_cycle,
                 "noc": max((link["bytes"] for link in raw["links"]), default=0)
                 / arch.link_bytes_per_cycle}
        bound += max(terms.values())
        for k, v in terms.items():
            totals[k] += v
        trace += [(a + len(agents), kind, start + cycles, end + cycles, amount)
                  for a, kind, start, end, amount in raw.get("trace", [])]
        agents += [{**a, "name": prefix + a["name"], "finish": a["finish"] + cycles}
                   for a in raw["agents"]]
        for link in raw["links"]:  # the same physical link in every phase: "linkN:[r, c]D"
            name = link["name"].split(":", 1)[-1] if several else link["name"]
            merged = links.setdefault(name, {**link, "name": name, "bytes": 0, "busy": 0.0})
            merged["bytes"] += link["bytes"]
            merged["busy"] += link["busy"]
        for d in raw["drams"]:
            merged = drams.setdefault(d["name"], {**d, "bytes": 0, "busy": 0.0})
            merged["bytes"] += d["bytes"]
            merged["busy"] += d["busy"]
        used: dict[str, int] = {}
        for b in dataflow["buffers"]:
            key = f"{b['pe'][0]},{b['pe'][1]}"
            used[key] = used.get(key, 0) + b["bytes"] * b["depth"]
        for key, n in used.items():  # phases reuse the SRAM: a PE's peak is its largest phase's
            sram[key] = max(sram.get(key, 0), n)
        macs += phase_macs
        dram_bytes += phase_dram
        cycles += float(raw["cycles"])
        events += int(raw["events"])
    compulsory = 0
    for t in runs[0][0]["tensors"] if runs else []:
        size = int(np.prod(t["shape"])) * _bits(t["dtype"]) // 8
        compulsory += size * {"input": 1, "output": 1, "inout": 2}.get(t["role"], 0)
    kind = max(totals, key=lambda k: totals[k])
    return SimReport(fn.name, arch.name, arch.timing, cycles, events, int(macs), peak,
                     dram_bytes, compulsory,
                     int(max((link["bytes"] for link in links.values()), default=0)),
                     bound, kind, sram, agents, list(links.values()),
                     list(drams.values()), arch.clock_ghz, trace)


def _macs(steps: list[dict]) -> int:
    """The MACs of a program's compute steps, loop bodies counted `loop` times (not unrolled:
    a loop may repeat 2**62 times)."""
    return sum(int(s["loop"]) * _macs(s["body"]) if "loop" in s else
               int(s["op"]["macs"]) if "op" in s else 0 for s in steps)


def _bits(short: str) -> int:
    from tiledsl import dtypes
    return dtypes.BY_SHORT[short].bits


class SpatialBackend:
    name = "spatial"

    def extend_space(self, space: ConfigSpace, fn: Function, arch: str | Arch | None = None,
                     pick_default: bool = True, **_: Any) -> ConfigSpace:
        check_allocations(fn)  # before the mapper places every tile of a huge output
        return spatial_space.extend(space, fn, preset(DEFAULT_ARCH if arch is None else arch),
                                    pick_default)

    def lower(self, fn: Function) -> Function:
        """The backend's own passes (lowering.pipeline.SPATIAL: counted loops with constant
        bounds unrolled) on a copy of `fn`."""
        return lower_for_spatial(fn)

    def pick_default(self, space: ConfigSpace) -> ConfigSpace:
        """The default of a space whose td.register_tunable knobs change the trace: the
        estimate's best over every knob value (`defaults.py`)."""
        return estimated_default(space)

    def run(self, fn: Function, args: list[Any], config: Config, arch: str | Arch | None = None,
            **_: Any) -> list[Any]:
        for v, a in zip(fn.args, args):
            if isinstance(v.type, TensorType) and not isinstance(a, np.ndarray):
                raise BackendError(f"backend 'spatial' runs on NumPy arrays; argument '{v.hint}' "
                                   f"is a {type(a).__module__}.{type(a).__qualname__}")
        outputs = execute(fn, config, phases(dataflow_config(fn, config, arch, args)), args)
        return check_written(fn, config, outputs)  # as the NumPy backend checks

    def simulate(self, fn: Function, config: Config, arch: str | Arch | None = None,
                 trace: bool = False, trace_path: str | os.PathLike[str] | None = None,
                 args: list[Any] | None = None) -> SimReport:
        """Time `fn`; `trace` keeps the simulator's events in the report, and `trace_path`
        (checked before simulating) also writes them there as a Chrome/Perfetto trace. `args`
        (the kernel's arguments) is needed where loop bounds depend on scalar arguments."""
        if trace_path is not None:
            check_trace_path(trace_path)
        a = preset(DEFAULT_ARCH if arch is None else arch)
        keep = trace or trace_path is not None
        result = report(fn, [(p, run_program(p, a, keep, check=False))
                             for p in phases(dataflow_config(fn, config, a, args))], a)
        if trace_path is not None:
            result.chrome_trace(trace_path)
        return result


def run_program(dataflow: dict[str, Any], arch: Arch, trace: bool = False,
                check: bool = True) -> dict[str, Any]:
    """Simulate one phase's dataflow config (`phases` lists a kernel's). With `check` (for a
    config from elsewhere: a file, an edited one) it is first checked against its schema, its
    own references and `arch`'s bounds (`schema.check`), and a broken one is a BackendError
    naming the field (`simulate` skips that: the mapper's configs conform). A static-timing
    config of more than `engine.MAX_STATIC_STEPS` steps, loops unrolled, is refused before
    it is unrolled, checked or not. The simulator's errors (a deadlock, an invalid
    static schedule, a semaphore overflow, time that overflows) become BackendErrors that keep
    its message (which agents wait on what, which link is booked twice)."""
    if check:
        schema.check(dataflow, arch)
    sim = simulator_module()
    try:
        return Program(dataflow, arch).run(trace=trace)
    except sim.DeadlockError as e:
        raise BackendError(f"the dataflow config deadlocks on {arch.name}: {e}") from None
    except sim.ScheduleError as e:
        raise BackendError(f"the static schedule is invalid on {arch.name}: {e}") from None
    except ValueError as e:  # a field the simulator rejects (set_program, add_semaphore)
        raise BackendError(f"the dataflow config is invalid on {arch.name}: {e}") from None
    except RuntimeError as e:  # a semaphore overflow, max_events or max_trace, overflows
        raise BackendError(f"the simulation of the dataflow config fails on {arch.name}: "
                           f"{e}") from None


registry.register_backend(SpatialBackend())


@registry.register_target("spatial", backend="spatial")
def spatial_source(fn: Function, config: Config, args: list[Any], arch: Any = None) -> str:
    """The dataflow config as JSON."""
    return json.dumps(dataflow_config(fn, config, arch, args), indent=1)
