"""Runs a dataflow config on the C++ event-driven simulator (`_tiledsl_sim`, built from csrc/)
and reports cycles, utilization, traffic and the roofline bound.

In static timing mode (Groq/LPX-like parts) the compiler fixes every step's start cycle: the
schedule is derived from an arbitrated run with whole-transfer packets, and the simulator then
verifies it (no link or DRAM channel booked twice, no data used before it arrives).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowering.backends.spatial.arch import Arch
from tiledsl.errors import ArgumentError, BackendError

MAX_STATIC_STEPS = 5_000_000  # steps a static-timing run schedules (loops unrolled), in all


def simulator_module() -> Any:
    try:
        import _tiledsl_sim
    except ImportError as e:
        raise BackendError("the spatial simulator extension is not built; reinstall with "
                           f"`pip install -e .` ({e})") from None
    return _tiledsl_sim


@dataclass
class SimReport:
    """What one simulation measured, with the roofline bound it cannot beat."""

    kernel: str
    arch: str
    timing: str
    cycles: float
    events: int
    macs: int  # useful multiply-accumulates
    peak_macs_per_cycle: float
    dram_bytes: int
    compulsory_dram_bytes: int
    busiest_link_bytes: int
    bound_cycles: float  # max(MACs / peak, DRAM bytes / DRAM BW, busiest link bytes / link BW),
    # summed over the phases of a kernel with several grids
    bound_kind: str  # which term of the roofline bound is largest
    sram_peak_bytes: dict[str, int]  # per PE
    agents: list[dict[str, Any]]
    links: list[dict[str, Any]]
    drams: list[dict[str, Any]]
    clock_ghz: float
    trace: list[tuple] = field(default_factory=list, repr=False)

    @property
    def mac_utilization(self) -> float:
        return self.macs / (self.cycles * self.peak_macs_per_cycle) if self.cycles else 0.0

    @property
    def bound_efficiency(self) -> float:
        """The roofline bound over the simulated cycles: how close the mapping is to ideal."""
        return self.bound_cycles / self.cycles if self.cycles else 1.0

    @property
    def microseconds(self) -> float:
        return self.cycles / (self.clock_ghz * 1e3)

    def summary(self) -> str:
        compute = [a for a in self.agents  # names: "compute_0_1", or "phase1.compute_0_1"
                   if a["name"].rsplit(".", 1)[-1].startswith("compute")]
        stall = sum(a["stall"] for a in compute)
        busy = sum(a["busy"] for a in compute)
        return "\n".join([
            f"kernel {self.kernel} on {self.arch} ({self.timing} timing)",
            f"  cycles            {self.cycles:,.0f} ({self.microseconds:,.1f} us)",
            f"  MAC utilization   {self.mac_utilization:.1%} ({self.macs:,} MACs)",
            f"  roofline bound    {self.bound_cycles:,.{0 if self.bound_cycles >= 10 else 2}f} "
            f"cycles ({self.bound_kind}); "
            f"mapping efficiency {self.bound_efficiency:.1%}",
            f"  DRAM traffic      {self.dram_bytes:,} B (compulsory {self.compulsory_dram_bytes:,} B)",
            f"  busiest link      {self.busiest_link_bytes:,} B",
            f"  compute busy/stall {busy:,.0f} / {stall:,.0f} cycles over all PEs",
            f"  SRAM peak per PE  {max(self.sram_peak_bytes.values(), default=0):,} B",
            f"  events            {self.events:,}",
        ])

    def chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write a Chrome/Perfetto trace (open in ui.perfetto.dev): one row per agent."""
        target = check_trace_path(path)
        names = [a["name"] for a in self.agents]
        events = [{"name": kind, "ph": "X", "pid": 0, "tid": agent, "ts": start / self.clock_ghz / 1e3,
                   "dur": (end - start) / self.clock_ghz / 1e3, "args": {"amount": amount}}
                  for agent, kind, start, end, amount in self.trace]
        events += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": i, "args": {"name": n}}
                   for i, n in enumerate(names)]
        try:
            target.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
        except OSError as e:
            raise BackendError(f"cannot write the trace to {path}: {e.strerror or e}") from None


def check_trace_path(path: Any) -> Path:
    """Where a Chrome trace goes, checked before simulating: a path (str or os.PathLike) in a
    writable directory that exists, and not a directory itself."""
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise ArgumentError(f"trace must be a file path (str or os.PathLike) or None, got "
                            f"{type(path).__name__} {path!r}")
    p = Path(path)
    if p.is_dir():
        raise ArgumentError(f"trace {path}: is a directory, not a file")
    if not p.parent.is_dir():
        raise ArgumentError(f"trace {path}: no such directory {str(p.parent)!r}")
    if not os.access(p.parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ArgumentError(f"trace {path}: not writable")
    return p


class Program:
    """A dataflow config translated into simulator resources and per-agent instructions."""

    def __init__(self, config: dict[str, Any], arch: Arch) -> None:
        self.config = config
        self.arch = arch
        self.sems = {s["id"]: i for i, s in enumerate(config["semaphores"])}
        self.routes = {r["id"]: r for r in config["routes"]}
        self.drams = {d.name: i for i, d in enumerate(arch.dram)}

    def transfer(self, copy: dict[str, Any], sim: Any) -> tuple:
        route = self.routes[copy["route"]]
        arch = self.arch
        ends = [route["src"]] + list(route["dst"])
        drams = [self.drams[e["dram"]] for e in ends if "dram" in e]
        latency = route["hops"] * arch.hop_latency_cycles
        for d in drams:
            channel = arch.dram[d]
            latency += channel.latency_cycles
            if copy["bytes"] < channel.min_burst_bytes:  # short bursts waste DRAM time
                latency += (channel.min_burst_bytes - copy["bytes"]) / channel.bytes_per_cycle
            if "rmw" in copy:  # an atomic: the channel first reads the elements it updates
                latency += channel.latency_cycles + \
                    max(copy["bytes"], channel.min_burst_bytes) / channel.bytes_per_cycle
        overhead = arch.transfer_overhead_cycles + \
            (arch.dma_switch_cycles if copy.get("switch") else 0.0) + \
            (arch.link_share_cycles if route.get("shared") else 0.0)  # (a shared DMA's next
        # stream; a NoC virtual channel that streams share)
        out = (sim.TRANSFER, int(copy["bytes"]), float(overhead), float(latency),
               list(route["links"]), drams)
        if copy.get("predicated"):  # its slot's time, no data on the links or DRAM channels
            return (sim.TRANSFER, 0, float(overhead) + copy["bytes"] / self.bottleneck(out),
                    float(latency), [], [])
        return out

    def instructions(self, steps: list[dict[str, Any]], sim: Any) -> list[tuple]:
        out: list[tuple] = []
        for step in steps:
            if "acquire" in step:
                out.append((sim.ACQUIRE, self.sems[step["acquire"]], int(step.get("n", 1))))
            elif "release" in step:
                out.append((sim.RELEASE, self.sems[step["release"]], int(step.get("n", 1))))
            elif "op" in step:
                out.append((sim.COMPUTE, float(step["op"]["cycles"]), int(step["op"]["macs"])))
            elif "copy" in step:
                out.append(self.transfer(step["copy"], sim))
            elif "loop" in step:
                body = self.instructions(step["body"], sim)
                out.append((sim.LOOP, int(step["loop"]), len(body)))
                out.extend(body)
            else:
                raise BackendError(f"unknown dataflow step {sorted(step)}")
        return out

    def bottleneck(self, transfer: tuple) -> float:
        """The slowest bandwidth on a transfer's resources (bytes/cycle)."""
        _, _, _, _, links, drams = transfer
        rates = [self.arch.link_bytes_per_cycle] * bool(links) + \
            [self.arch.dram[d].bytes_per_cycle for d in drams]
        return min(rates) if rates else float("inf")

    def simulator(self, programs: list[list[tuple]]) -> Any:
        sim = simulator_module()
        s = sim.Simulator()
        for link in self.config["links"]:
            s.add_link(f"link{link['id']}:{link['from']}{link['dir']}", self.arch.link_bytes_per_cycle)
        for d in self.arch.dram:
            s.add_dram(d.name, d.bytes_per_cycle)
        for sem in self.config["semaphores"]:
            s.add_semaphore(sem["id"], int(sem["init"]), int(sem["max"]))
        for agent, program in zip(self.config["agents"], programs):
            s.set_program(s.add_agent(agent["id"]), program)
        return s

    def run(self, trace: bool = False) -> dict[str, Any]:
        sim = simulator_module()
        programs = [self.instructions(a["program"], sim) for a in self.config["agents"]]
        if self.config["timing"] != "static":
            return self.simulator(programs).run(packet_bytes=self.arch.packet_bytes, trace=trace)
        # Static: schedule with whole-transfer packets, then verify that schedule.
        self.check_static_size(programs, sim)
        whole = max([1] + [ins[1] for p in programs for ins in _unroll(p, sim)
                           if ins[0] == sim.TRANSFER])  # (packet_bytes >= 1)
        arbitrated = self.simulator(programs).run(packet_bytes=whole, trace=True)
        scheduled = _schedule(programs, arbitrated["trace"], sim, self.bottleneck)
        self.config["static_schedule"] = [
            {"agent": self.config["agents"][a]["id"], "step": i, "start": ins[-1]}
            for a, prog in enumerate(scheduled) for i, ins in enumerate(prog)]
        return self.simulator(scheduled).run(packet_bytes=whole, static=True, trace=trace)


    def check_static_size(self, programs: list[list[tuple]], sim: Any) -> None:
        """Static timing schedules every step, loops unrolled, in Python (about 0.5 KB and 25 us
        a step): refuse, before unrolling, a program with more than MAX_STATIC_STEPS steps, as
        the dataflow mode stops at `max_events`."""
        steps = [_unrolled_length(p, sim) for p in programs]
        if sum(steps) > MAX_STATIC_STEPS:
            most = max(range(len(steps)), key=steps.__getitem__)
            raise BackendError(
                f"the static schedule of this dataflow config would have {sum(steps):,} steps "
                f"with its loops unrolled (agent {self.config['agents'][most]['id']!r} alone "
                f"{steps[most]:,}), more than the {MAX_STATIC_STEPS:,} that static timing "
                f"schedules one by one on {self.arch.name}; map larger tiles (a config with "
                "larger block sizes) or simulate on a dataflow-timing architecture")


def _unrolled_length(program: list[tuple], sim: Any) -> int:
    """How many steps `_unroll(program)` would have, without unrolling it."""
    total, i = 0, 0
    while i < len(program):
        ins = program[i]
        if ins[0] == sim.LOOP:
            total += ins[1] * _unrolled_length(program[i + 1:i + 1 + ins[2]], sim)
            i += 1 + ins[2]
        else:
            total += 1
            i += 1
    return total


def _unroll(program: list[tuple], sim: Any) -> list[tuple]:
    """The program with its loops expanded (LOOP's body length counts flat entries)."""
    out: list[tuple] = []
    i = 0
    while i < len(program):
        ins = program[i]
        if ins[0] == sim.LOOP:
            body = program[i + 1:i + 1 + ins[2]]
            out.extend(_unroll(body, sim) * ins[1])
            i += 1 + len(body)
        else:
            out.append(ins)
            i += 1
    return out


def _schedule(programs: list[list[tuple]], trace: list[tuple], sim: Any,
              bottleneck: Any) -> list[list[tuple]]:
    """Start cycles for every step, read off an arbitrated run's trace. An ACQUIRE that blocked
    has a stall record naming it (by its index among the agent's executed steps) and starts when
    the stall ends; one that did not block starts when the agent got to it. A transfer that
    waited for a busy link or channel starts (statically) when its data actually moved."""
    stalls: dict[tuple[int, int], float] = {}
    timed_events: dict[int, list[tuple]] = {}
    for ev in trace:
        if ev[1] == "stall":
            stalls[ev[0], int(ev[4])] = ev[3]
        else:
            timed_events.setdefault(ev[0], []).append(ev)
    out = []
    for a, program in enumerate(programs):
        events = sorted(timed_events.get(a, []), key=lambda e: (e[2], e[3]))
        k, t, timed = 0, 0.0, []
        for i, ins in enumerate(_unroll(program, sim)):
            if ins[0] == sim.ACQUIRE:
                t = stalls.get((a, i), t)
                timed.append((*ins, t))
            elif ins[0] == sim.RELEASE:
                timed.append((*ins, t))
            else:
                start, end = events[k][2], events[k][3]
                k += 1
                if ins[0] == sim.TRANSFER and ins[1] > 0:
                    _, nbytes, overhead, latency, _, _ = ins
                    start = max(start, end - latency - nbytes / bottleneck(ins) - overhead)
                timed.append((*ins, start))
                t = end
        out.append(timed)
    return out
