"""Every example on every spatial preset, and the 4096^3 bf16 GEMM targets of issue 4.

    python benchmarks/spatial.py [--quick] [--out FILE]

Part 1: each example (default config, the example's default sizes) on each preset: simulated
cycles, MAC utilization, the roofline bound over the cycles (mapping efficiency) and which term
bounds it. Part 2: a 4096^3 bf16 GEMM on the 8x8 presets with the default config (target: each
simulation under 10 s of wall time), then the wormhole-like preset tuned over block sizes and
buffer depth (target: >= 85% MAC utilization; Tenstorrent reports ~93% hand-tuned on silicon).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

import tiledsl as td
from lowering.backends.spatial.arch import PRESETS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support import EXAMPLE_NAMES, example  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)


def examples_table() -> list[dict[str, Any]]:
    rows = []
    print(f"{'example':16} {'preset':14} {'cycles':>12} {'MAC util':>8} {'bound eff':>9} {'bound':>7}")
    for name in EXAMPLE_NAMES:
        mod = example(name)
        kernel = getattr(mod, name)
        args = mod.make_inputs(np.random.default_rng(0))
        for arch in sorted(PRESETS):
            r = kernel.simulate(*args, arch=arch)
            rows.append({"example": name, "arch": arch, "timing": r.timing, "cycles": r.cycles,
                         "mac_utilization": r.mac_utilization, "bound_cycles": r.bound_cycles,
                         "bound_efficiency": r.bound_efficiency, "bound": r.bound_kind,
                         "dram_bytes": r.dram_bytes, "compulsory_dram_bytes": r.compulsory_dram_bytes})
            print(f"{name:16} {arch:14} {r.cycles:12,.0f} {r.mac_utilization:8.1%} "
                  f"{r.bound_efficiency:9.1%} {r.bound_kind:>7}")
    return rows


def gemm(quick: bool) -> dict[str, Any]:
    kernel = example("matmul").matmul
    a = np.ones((4096, 4096), ml_dtypes.bfloat16)  # the simulator only needs shapes and dtypes
    out: dict[str, Any] = {"default": [], "tuned": []}
    print("\n4096^3 bf16 GEMM, default config")
    for arch in ("generic-8x8", "wormhole-like", "lpu-like"):
        start = time.perf_counter()
        r = kernel.simulate(a, a, arch=arch)
        wall = time.perf_counter() - start
        out["default"].append({"arch": arch, "config": kernel.config_space(
            a, a, backend="spatial", arch=arch).default().to_dict(), "cycles": r.cycles,
            "mac_utilization": r.mac_utilization, "bound_efficiency": r.bound_efficiency,
            "wall_seconds": wall, "events": r.events})
        print(f"  {arch:14} {r.cycles:12,.0f} cycles  util {r.mac_utilization:6.1%}  "
              f"simulated in {wall:.2f} s ({r.events:,} events)")
    print("\n4096^3 bf16 GEMM on wormhole-like, tuned over blocks and buffer depth")
    space = kernel.config_space(a, a, backend="spatial", arch="wormhole-like")
    sizes = [256] if quick else [128, 256, 512]
    ks = [128, 256] if quick else [64, 128, 256]
    best = None
    for bm, bn, bk, depth in itertools.product(sizes, sizes, ks, (2, 3, 4)):
        config = td.Config((bm, bn, bk), fold="rows", buffer_depth=depth, multicast=True)
        if config not in space:
            continue
        r = kernel.simulate(a, a, arch="wormhole-like", config=config)
        out["tuned"].append({"config": config.to_dict(), "cycles": r.cycles,
                             "mac_utilization": r.mac_utilization,
                             "bound_efficiency": r.bound_efficiency})
        if best is None or r.cycles < best[0].cycles:
            best = (r, config)
    assert best is not None
    r, config = best
    out["best"] = {"config": config.to_dict(), "cycles": r.cycles,
                   "mac_utilization": r.mac_utilization, "bound_efficiency": r.bound_efficiency,
                   "tflops": 2 * 4096**3 / (r.cycles / (r.clock_ghz * 1e9)) / 1e12}
    print(f"  best {config}: {r.cycles:,.0f} cycles, MAC utilization {r.mac_utilization:.1%}, "
          f"mapping efficiency {r.bound_efficiency:.1%}, {out['best']['tflops']:.0f} TFLOP/s "
          f"(of {out['tuned'].__len__()} configs tried)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller tuning sweep")
    parser.add_argument("--out", help=out_help("spatial.json"))
    opts = parser.parse_args()
    out = out_path(opts.out, "spatial.json")
    report = {"benchmark": "spatial", "machine": platform.platform(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "examples": examples_table(), "gemm_4096": gemm(opts.quick)}
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
