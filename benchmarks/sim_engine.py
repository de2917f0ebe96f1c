"""Throughput of the C++ simulator core (_tiledsl_sim) in events per second.

    python benchmarks/sim_engine.py [--iterations N] [--repeats R] [--out FILE]

A synthetic spatial workload: 64 compute cores fed by 16 DMA engines. Each DMA engine streams
tiles to its 4 cores through double-buffered empty/full semaphore pairs; its packets cross a
shared row link, the core's own link and one of 4 DRAM channels, so packets of different
engines interleave on shared resources. Prints a table and writes JSON (date, machine, events,
seconds, events/s). The target of the issue: >= 5 million events/s on the 2-core CI machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import time
from pathlib import Path

import _tiledsl_sim as sim
from outputs import out_help, out_path  # benchmarks/outputs.py

ROOT = Path(__file__).resolve().parent.parent
ACQ, REL, COMP, XFER, LOOP = sim.ACQUIRE, sim.RELEASE, sim.COMPUTE, sim.TRANSFER, sim.LOOP


def build(iterations: int, cores: int = 64, dmas: int = 16, tile_bytes: int = 8192,
          depth: int = 2) -> sim.Simulator:
    s = sim.Simulator()
    per_dma = cores // dmas
    rows = [s.add_link(f"row{i}", 64.0) for i in range(dmas // 2)]       # 2 DMA engines per row
    drams = [s.add_dram(f"ch{i}", 96.0) for i in range(4)]              # 4 DMA engines per channel
    for d in range(dmas):
        body = []
        for k in range(per_dma):
            c = d * per_dma + k
            empty = s.add_semaphore(f"c{c}.empty", depth, depth)
            full = s.add_semaphore(f"c{c}.full", 0, depth)
            own = s.add_link(f"c{c}.in", 32.0)
            core = s.add_agent(f"core{c}")
            # compute time varies per core so that the agents drift apart
            s.set_program(core, [(LOOP, iterations, 3), (ACQ, full, 1),
                                 (COMP, 200.0 + 7 * (c % 9), 64 * 64 * 64), (REL, empty, 1)])
            body += [(ACQ, empty, 1),
                     (XFER, tile_bytes, 12.0, 20.0 + (c % 5), [rows[d // 2], own], [drams[d % 4]]),
                     (REL, full, 1)]
        s.set_program(s.add_agent(f"dma{d}"), [(LOOP, iterations, len(body))] + body)
    return s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20000, help="tiles per core")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help=out_help("sim_engine.json"))
    opts = parser.parse_args()
    out = out_path(opts.out, "sim_engine.json")

    rows = []
    for label, trace in (("dataflow", False), ("dataflow + trace", True)):
        iterations = opts.iterations if not trace else max(1, opts.iterations // 4)
        s = build(iterations)
        seconds = []
        report = None
        for _ in range(opts.repeats):
            start = time.perf_counter()
            report = s.run(trace=trace)
            seconds.append(time.perf_counter() - start)
        assert report is not None
        med = statistics.median(seconds)
        rows.append({
            "case": f"{label}: 64 cores + 16 DMA, {iterations} tiles/core",
            "trace": trace,
            "events": report["events"],
            "seconds": med,
            "events_per_s": report["events"] / med,
            "simulated_cycles": report["cycles"],
            "trace_records": len(report.get("trace", [])),
        })

    print(f"{'case':<50} {'events':>12} {'seconds':>9} {'Mevents/s':>10}")
    for r in rows:
        print(f"{r['case']:<50} {r['events']:>12,} {r['seconds']:>9.3f} {r['events_per_s'] / 1e6:>10.2f}")

    result = {
        "benchmark": "sim_engine",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpus": os.cpu_count()},
        "versions": {"python": platform.python_version()},
        "repeats": opts.repeats,
        "target_events_per_s": 5e6,
        "results": rows,
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
