"""The spatial simulator against published silicon GEMM measurements (issue 33).

    python benchmarks/spatial_validation.py [--arch wormhole-like,blackhole-like] [--max-gmacs N]
                                            [--fit] [--out FILE]

The measured figures are Tenstorrent's own matmul report (tt-metal
tech_reports/GEMM_FLOPS/GEMM_FLOPS.md at the commit `spatial_validation_data.json` names): its
all-DRAM rows for Wormhole n150 (8x8 Tensix grid, the `wormhole-like` preset) and Blackhole p150
(13x10 grid, `blackhole-like`), in BFLOAT16 at HiFi2 and HiFi4 and BFLOAT8_B at HiFi2 and LoFi.
Measured throughput is the device-based utilization the report gives times the grid's peak at
the row's math fidelity (device time, without the host's dispatch, which the simulator does
not model either). Each row is simulated on its preset with the row's math fidelity
(`Arch.math_fidelity`) and data format (BFLOAT8_B as a 1-byte float: tiledsl has no block
float; bfp8_b is 1088 bytes per 1024 elements):

* default: the config space's default config, against the report's "Out of Box" rows;
* tuned: a bounded tune, against the "Manually Tuned" rows (and, in its own columns, every row):
  uniform-fold configs with blocks of 64-512 rows/columns and 64-256 deep (double-buffered,
  multicast) ranked by the analytic estimate, the best `--top` (4) of them simulated, with the
  default, and the fastest kept.

The shapes of each (table, format, fidelity) group alternate between a training half and a
held-out half (by size). `--fit` fits the presets' fitted value (`feed_bytes_per_cycle`: the
matrix unit's operand feed) on the training half, tuned configs, by the least squared log
ratio over a grid of values, and prints it; the report gives the geometric mean ratio
(simulated / measured), its spread, the worst ratio and the rank correlation, on each half.

A row whose measured device time exceeds that of a row of its group with at least twice its
MACs is marked `slow_config` (in the table: `*`): its time is set by the configuration the
silicon's software chose, not by the work (Wormhole's out-of-box 512x1024x1024 takes longer
than 1024x1024x1024). Such rows stay in every statistic; the summary adds, for each half, the
statistics without them, so the effect of that choice on the error is visible.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import itertools
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
from scipy.stats import spearmanr

import tiledsl as td
from lowering.backends.spatial.arch import Arch, preset

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support import example  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

DATA = Path(__file__).with_name("spatial_validation_data.json")
FORMATS = {"BFLOAT16": ml_dtypes.bfloat16, "BFLOAT8_B": ml_dtypes.float8_e4m3fn}
SHORT = {"BFLOAT16": "bf16", "BFLOAT8_B": "f8e4m3"}
PASSES = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}
FEED_GRID = (0.0, 256.0, 320.0, 384.0, 512.0)  # `--fit`'s values (0: no limit)
KERNEL = example("matmul").matmul


def load_rows(archs: list[str], max_gmacs: float) -> list[dict[str, Any]]:
    """The measured rows of these presets, each marked train or held-out."""
    rows = [r for r in json.loads(DATA.read_text())["rows"]
            if r["arch"] in archs and r["m"] * r["k"] * r["n"] <= max_gmacs * 1e9]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["arch"], r["table"], r["dtype"], r["fidelity"]), []).append(r)
    for group in groups.values():
        group.sort(key=lambda r: (r["m"] * r["k"] * r["n"], r["m"], r["k"]))
        for i, r in enumerate(group):
            r["half"] = "train" if i % 2 == 0 else "held-out"
    return rows


def mark_slow_configs(rows: list[dict[str, Any]]) -> None:
    """Marks rows that take longer on the silicon than a row of their group (same preset,
    table, format, fidelity) with at least twice their MACs (`slow_config`: the slower row's
    time, the bigger one's shape)."""
    for r in rows:
        macs = r["m"] * r["k"] * r["n"]
        bigger = [b for b in rows if b["arch"] == r["arch"] and b["table"] == r["table"]
                  and b["dtype"] == r["dtype"] and b["fidelity"] == r["fidelity"]
                  and b["m"] * b["k"] * b["n"] >= 2 * macs and b["time_ns"] < r["time_ns"]]
        if bigger:
            b = min(bigger, key=lambda b: b["time_ns"])
            r["slow_config"] = (f"{r['time_ns'] / 1e3:.0f} us measured, more than "
                                f"{b['m']}x{b['k']}x{b['n']}'s {b['time_ns'] / 1e3:.0f} us "
                                f"for {b['m'] * b['k'] * b['n'] / macs:.0f}x the MACs")


def row_arch(r: dict[str, Any], feed: float | None = None) -> Arch:
    """The row's preset at its math fidelity (and, fitting, another operand feed)."""
    arch = preset(r["arch"])
    short = SHORT[r["dtype"]]
    arch = dataclasses.replace(arch, math_fidelity={**arch.math_fidelity,
                                                    short: PASSES[r["fidelity"]]})
    return arch if feed is None else dataclasses.replace(arch, feed_bytes_per_cycle=feed)


def measured_tflops(r: dict[str, Any]) -> float:
    """Device-based utilization times the grid's peak at the row's fidelity."""
    arch = preset(r["arch"])
    lofi = arch.macs_per_cycle["bf16"] * arch.pes * 2 * arch.clock_ghz * 1e9
    return r["device_util_pct"] / 100 * lofi / PASSES[r["fidelity"]] / 1e12


_memo: dict[tuple, tuple[float, str]] = {}


def simulate(r: dict[str, Any], arch: Arch, top: int) -> dict[str, tuple[float, str]]:
    """Simulated TFLOP/s and config: the default one, and the bounded tune's best."""
    key = (r["m"], r["k"], r["n"], r["dtype"], arch.to_json())
    if key in _memo:
        return _memo[key]
    dtype = FORMATS[r["dtype"]]
    a = np.ones((r["m"], r["k"]), dtype)  # the simulator needs only shapes and dtypes
    b = np.ones((r["k"], r["n"]), dtype)
    space = KERNEL.config_space(a, b, backend="spatial", arch=arch)
    flops = 2 * r["m"] * r["k"] * r["n"]

    def tflops(config: td.Config) -> float:
        cycles = KERNEL.simulate(a, b, arch=arch, config=config).cycles
        return flops / (cycles / (arch.clock_ghz * 1e9)) / 1e12

    default = space.default()
    candidates = [td.Config((bm, bn, bk), fold="rows", buffer_depth=2, multicast=True)
                  for bm, bn, bk in itertools.product((64, 128, 256, 512), (64, 128, 256, 512),
                                                      (64, 128, 256))]
    ranked = sorted((space.estimate(c), i, c) for i, c in enumerate(candidates) if c in space)
    results = {default: tflops(default)}
    for _, _, c in ranked[:top]:
        if c not in results:
            results[c] = tflops(c)
    best = max(results, key=results.get)
    _memo[key] = {"default": (results[default], str(default)),
                  "tuned": (results[best], str(best))}
    return _memo[key]


def stats(pairs: list[tuple[float, float]]) -> dict[str, float]:
    """Geometric mean of simulated / measured, its spread (geometric standard deviation), the
    worst ratio either way, and the rank correlation."""
    if not pairs:
        return {}
    logs = [math.log(s / m) for s, m in pairs]
    out = {"n": len(pairs), "geomean_ratio": math.exp(statistics.fmean(logs)),
           "geo_spread": math.exp(statistics.pstdev(logs)),
           "worst_ratio": math.exp(max(logs, key=abs)),
           "within_2x": sum(abs(x) <= math.log(2) for x in logs) / len(logs)}
    if len(pairs) > 2:
        out["rank_correlation"] = float(spearmanr(*zip(*pairs))[0])
    return out


def fit(rows: list[dict[str, Any]], top: int) -> dict[str, float]:
    """Per preset, the feed rate of FEED_GRID whose tuned simulations of the training rows have
    the least squared log ratio to the measurements."""
    best = {}
    for name in sorted({r["arch"] for r in rows}):
        train = [r for r in rows if r["arch"] == name and r["half"] == "train"]
        scores = {}
        for feed in FEED_GRID:
            logs = [math.log(simulate(r, row_arch(r, feed), top)["tuned"][0] / measured_tflops(r))
                    for r in train]
            scores[feed] = statistics.fmean(x * x for x in logs)
            print(f"  fit {name}: feed {feed:5.0f} B/cycle: rms log ratio "
                  f"{math.sqrt(scores[feed]):.3f} (geomean {math.exp(statistics.fmean(logs)):.3f})",
                  flush=True)
        best[name] = min(scores, key=scores.get)
        print(f"fit {name}: feed_bytes_per_cycle = {best[name]}")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="wormhole-like,blackhole-like")
    parser.add_argument("--max-gmacs", type=float, default=600.0,
                        help="skip shapes of more MACs (in 1e9); the default keeps 16384^3 and "
                             "10240x13312x13312 out (minutes each to simulate here)")
    parser.add_argument("--top", type=int, default=4, help="estimate-ranked configs simulated")
    parser.add_argument("--fit", action="store_true", help="fit feed_bytes_per_cycle first")
    parser.add_argument("--out", help=out_help("spatial_validation.json"))
    opts = parser.parse_args()
    out = out_path(opts.out, "spatial_validation.json")
    start = time.perf_counter()
    rows = load_rows(opts.arch.split(","), opts.max_gmacs)
    mark_slow_configs(rows)
    fitted = fit(rows, opts.top) if opts.fit else {}
    print(f"{'preset':15} {'table':9} {'format':9} {'fid':5} {'m x k x n':>19} {'half':8} "
          f"{'measured':>8} {'default':>8} {'tuned':>8} {'ratio':>6}  tuned config")
    for r in rows:
        sims = simulate(r, row_arch(r), opts.top)
        r["measured_tflops"] = measured_tflops(r)
        r["default_tflops"], r["default_config"] = sims["default"]
        r["tuned_tflops"], r["tuned_config"] = sims["tuned"]
        kind = "oob" if "Out of Box" in r["table"] else "tuned"
        r["paired"] = "default" if kind == "oob" else "tuned"
        print(f"{r['arch']:15} {kind:9} {r['dtype']:9} {r['fidelity']:5} "
              f"{r['m']:>5}x{r['k']:>5}x{r['n']:>5} {r['half']:8} {r['measured_tflops']:8.1f} "
              f"{r['default_tflops']:8.1f} {r['tuned_tflops']:8.1f} "
              f"{r['tuned_tflops'] / r['measured_tflops']:6.2f}{'*' if 'slow_config' in r else ' '}"
              f" {r['tuned_config']}", flush=True)
    summary: dict[str, Any] = {}
    print("\nsimulated / measured TFLOP/s (geomean, spread = geometric std, worst, share within "
          "2x, rank correlation)")
    print("  (*: slow_config, the silicon's own config sets its time; 'w/o *': without them)")
    for name in sorted({r["arch"] for r in rows}) + ["all"]:
        for half in ("train", "held-out", "train w/o *", "held-out w/o *"):
            sel = [r for r in rows if (name == "all" or r["arch"] == name)
                   and r["half"] == half.split()[0]
                   and not (half.endswith("*") and "slow_config" in r)]
            for what, pick in (("tuned, every row", lambda r: True),
                               ("default vs out-of-box", lambda r: r["paired"] == "default"),
                               ("tuned vs hand-tuned", lambda r: r["paired"] == "tuned")):
                col = "default_tflops" if what.startswith("default") else "tuned_tflops"
                s = stats([(r[col], r["measured_tflops"]) for r in sel if pick(r)])
                summary[f"{name} / {half} / {what}"] = s
                if s:
                    print(f"  {name:15} {half:14} {what:22} n={s['n']:2} geomean "
                          f"{s['geomean_ratio']:5.2f} spread {s['geo_spread']:5.2f} worst "
                          f"{s['worst_ratio']:5.2f} within 2x {s['within_2x']:4.0%} rho "
                          f"{s.get('rank_correlation', float('nan')):5.2f}")
    seconds = time.perf_counter() - start
    print(f"took {seconds:.0f} s")
    sources = {name: {k: v for k, v in preset(name).sources.items()
                      if k in ("math_fidelity", "feed_bytes_per_cycle", "clock_ghz")}
               for name in sorted({r["arch"] for r in rows})}
    out.write_text(json.dumps({
        "benchmark": "spatial_validation", "machine": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "measured": json.loads(DATA.read_text())["source"], "top": opts.top,
        "max_gmacs": opts.max_gmacs, "fitted": fitted, "preset_sources": sources,
        "seconds": seconds, "summary": summary, "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
