"""The spatial dataflow backend: the mapper emits a dataflow config for a parameterized PE
array; `run` executes its compute steps on the data and `simulate` times it on the C++
event-driven simulator (csrc/)."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from lowering.backends.spatial import space as spatial_space
from lowering.backends.spatial.arch import Arch, preset
from lowering.backends.spatial.engine import Program, SimReport, check_trace_path
from lowering.backends.spatial.functional import execute
from lowering.backends.spatial.mapper import Mapping
from tiledsl import registry
from tiledsl.config import Config, ConfigSpace
from tiledsl.errors import BackendError
from tiledsl.ir.core import Function
from tiledsl.ir.types import TensorType, TileType

DEFAULT_ARCH = "generic-8x8"


def dataflow_config(fn: Function, config: Config, arch: str | Arch | None = None) -> dict[str, Any]:
    return Mapping(fn, config, preset(arch or DEFAULT_ARCH)).build()


def _dot_dtype(fn: Function) -> str:
    from tiledsl.ir.core import walk
    for op in walk(fn.body):
        if op.name == "dot":
            t = op.operands[0].type
            assert isinstance(t, TileType)
            return t.dtype.short
    return "f32"


def report(fn: Function, dataflow: dict[str, Any], arch: Arch, raw: dict[str, Any]) -> SimReport:
    """The simulator's raw numbers with the roofline bound and traffic minimums added."""
    macs = sum(step["op"]["macs"] for a in dataflow["agents"] for step in _flat(a["program"])
               if "op" in step)
    dtype = _dot_dtype(fn)
    peak = arch.peak_macs(dtype)
    dram_bytes = int(sum(d["bytes"] for d in raw["drams"]))
    link_bytes = int(max((link["bytes"] for link in raw["links"]), default=0))
    compulsory = 0
    for t in dataflow["tensors"]:
        size = int(np.prod(t["shape"])) * _bits(t["dtype"]) // 8
        compulsory += size * {"input": 1, "output": 1, "inout": 2}.get(t["role"], 0)
    terms = {"compute": macs / peak if peak else 0.0,
             "dram": dram_bytes / arch.dram_bytes_per_cycle,
             "noc": link_bytes / arch.link_bytes_per_cycle}
    kind = max(terms, key=lambda k: terms[k])
    sram: dict[str, int] = {}
    for b in dataflow["buffers"]:
        key = f"{b['pe'][0]},{b['pe'][1]}"
        sram[key] = sram.get(key, 0) + b["bytes"] * b["depth"]
    return SimReport(fn.name, arch.name, dataflow["timing"], float(raw["cycles"]), int(raw["events"]),
                     int(macs), peak, dram_bytes, compulsory, link_bytes, terms[kind], kind, sram,
                     raw["agents"], raw["links"], raw["drams"], arch.clock_ghz,
                     list(raw.get("trace", [])))


def _flat(steps: list[dict]) -> list[dict]:
    """Steps with loops expanded (only to count: bodies repeat `loop` times)."""
    out: list[dict] = []
    for s in steps:
        if "loop" in s:
            out.extend(_flat(s["body"]) * int(s["loop"]))
        else:
            out.append(s)
    return out


def _bits(short: str) -> int:
    from tiledsl import dtypes
    return dtypes.BY_SHORT[short].bits


class SpatialBackend:
    name = "spatial"

    def extend_space(self, space: ConfigSpace, fn: Function, arch: str | Arch | None = None,
                     **_: Any) -> ConfigSpace:
        return spatial_space.extend(space, fn, preset(arch or DEFAULT_ARCH))

    def run(self, fn: Function, args: list[Any], config: Config, arch: str | Arch | None = None,
            **_: Any) -> list[Any]:
        for v, a in zip(fn.args, args):
            if isinstance(v.type, TensorType) and not isinstance(a, np.ndarray):
                raise BackendError(f"backend 'spatial' runs on NumPy arrays; argument '{v.hint}' "
                                   f"is a {type(a).__module__}.{type(a).__qualname__}")
        return execute(fn, config, dataflow_config(fn, config, arch), args)

    def simulate(self, fn: Function, config: Config, arch: str | Arch | None = None,
                 trace: bool = False, trace_path: str | os.PathLike[str] | None = None
                 ) -> SimReport:
        """Time `fn`; `trace` keeps the simulator's events in the report, and `trace_path`
        (checked before simulating) also writes them there as a Chrome/Perfetto trace."""
        if trace_path is not None:
            check_trace_path(trace_path)
        a = preset(arch or DEFAULT_ARCH)
        dataflow = dataflow_config(fn, config, a)
        result = report(fn, dataflow, a, run_program(dataflow, a, trace or trace_path is not None))
        if trace_path is not None:
            result.chrome_trace(trace_path)
        return result


def run_program(dataflow: dict[str, Any], arch: Arch, trace: bool = False) -> dict[str, Any]:
    """Simulate a dataflow config; the simulator's deadlocks and schedule violations become
    BackendErrors that keep its message (which agents wait on what, which link is booked twice)."""
    import _tiledsl_sim as sim
    try:
        return Program(dataflow, arch).run(trace=trace)
    except sim.DeadlockError as e:
        raise BackendError(f"the dataflow config deadlocks on {arch.name}: {e}") from None
    except sim.ScheduleError as e:
        raise BackendError(f"the static schedule is invalid on {arch.name}: {e}") from None


registry.register_backend(SpatialBackend())


@registry.register_target("spatial", backend="spatial")
def spatial_source(fn: Function, config: Config, args: list[Any], arch: Any = None) -> str:
    """The dataflow config as JSON."""
    return json.dumps(dataflow_config(fn, config, arch), indent=1)
