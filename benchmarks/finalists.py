"""Do tunes on a noisy timer pick the right config, and the same one run after run? With and
without re-timing the finalists interleaved (autotune/finalists.py).

    python benchmarks/finalists.py [--backend numpy|triton] [--kernels matmul,softmax]
                                   [--runs 20] [--trials 20] [--rounds 21] [--out FILE]
                                   [--dims m=2048,k=2048,n=2048] [--dtype f16] [--timeout S]

Each kernel is tuned `--runs` times from the same seed with `finalists=0` (the search's fastest
trial wins, as in Triton's @autotune and most tuners) and with the default (5 finalists and
the default config re-timed over 5 rounds). Then every config any run picked is timed again,
interleaved over `--rounds` rounds, and its median counts as its true time. Per mode: the
regret of a pick (its true time over the fastest pick's, minus 1: median, mean and worst over
the runs), how many distinct configs won, and the tune's wall time. The numpy backend times the
CPU (this machine is shared and noisy); `--backend triton` times the GPU. `--dims` and `--dtype`
pick the problem (default: the example file's). With `--timeout`, each kernel gets its share of
the seconds and stops starting runs when the next would not fit (its row says how many ran).
Writes finalists_<backend>.json where `--out` says (else benchmarks/outputs.py's scratch
directory), after each kernel.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
import numpy as np  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)
from support import example  # noqa: E402

from autotune import finalists as finals  # noqa: E402
from autotune.runners import RUNNERS  # noqa: E402
from autotune.tuner import tune  # noqa: E402
from tiledsl.cli.inputs import example_args, parse_dims  # noqa: E402

MODES = {"search's fastest trial": 0, "finalists re-timed": finals.FINALISTS}


RETIME_RESERVE_S = 30.0  # kept for the final re-timing of each kernel's picks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["numpy", "triton"], default="numpy")
    ap.add_argument("--kernels", default="matmul,softmax,rms_norm")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=21, help="rounds of the final re-timing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dims", default="", help="problem sizes, e.g. m=2048,k=2048,n=2048")
    ap.add_argument("--dtype", help="input dtype (f16, bf16, f32, f64; default: the file's)")
    ap.add_argument("--timeout", type=float, help="seconds for the whole benchmark")
    ap.add_argument("--out", help=out_help("finalists_BACKEND.json"))
    opts = ap.parse_args()
    start = time.monotonic()
    scratch = tempfile.mkdtemp(prefix="tiledsl-finalists-")  # studies; kept out of the cache
    out = out_path(opts.out, f"finalists_{opts.backend}.json")
    device = platform.processor() or platform.machine()
    if opts.backend == "triton":
        import torch
        device = torch.cuda.get_device_name()
    rows: list[dict] = []

    def save() -> None:
        out.write_text(json.dumps({
            "benchmark": "finalists", "backend": opts.backend, "runs": opts.runs,
            "trials": opts.trials, "rounds": opts.rounds, "finalist_rounds": finals.ROUNDS,
            "dims": opts.dims or None, "dtype": opts.dtype, "rows": rows, "device": device,
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
            indent=1))
    print(f"{opts.runs} tunes of {opts.trials} trials per kernel and mode on {opts.backend}; "
          f"true times: every pick re-timed interleaved over {opts.rounds} rounds")
    print(f"  {'kernel':10} {'mode':24} {'regret median':>14} {'mean':>6} {'max':>6} "
          f"{'distinct winners':>17} {'tune s (median)':>16}")
    names = opts.kernels.split(",")
    for i, name in enumerate(names):
        # this kernel's share of what is left
        deadline = None if opts.timeout is None else \
            time.monotonic() + (opts.timeout - (time.monotonic() - start)) / (len(names) - i)
        module = example(name)
        kernel = getattr(module, name)
        args = list(example_args(module, kernel, opts.seed, parse_dims(opts.dims), opts.dtype))
        picks: dict[str, list] = {mode: [] for mode in MODES}
        seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
        longest = 0.0
        for run in range(opts.runs):
            if deadline is not None and run > 0 and \
                    time.monotonic() + longest + RETIME_RESERVE_S > deadline:
                print(f"  {name}: out of time after {run} runs of each mode")
                break
            began = time.monotonic()
            for mode, count in MODES.items():
                r = tune(kernel, args, backend=opts.backend, trials=opts.trials, seed=opts.seed,
                         storage=f"sqlite:///{scratch}/studies.db",
                         study_name=f"{name}-{mode}-{run}", finalists=count, use_cache=False)
                if r.best is None:  # nothing to compare: say why, keep what was measured
                    why = sorted({t.status for t in r.trials})[:5]
                    rows.append({"kernel": name, "mode": mode, "error": "no valid config",
                                 "statuses": why})
                    save()
                    raise SystemExit(f"{name}: no valid config in a tune ({mode}): {why}")
                picks[mode].append(r.best)
                seconds[mode].append(r.seconds)
            longest = max(longest, time.monotonic() - began)
        distinct = list(dict.fromkeys(c for ps in picks.values() for c in ps))
        runner = RUNNERS[opts.backend](kernel, args)
        timed = finals.retime([finals.Finalist({"i": i}, 0.0) for i in range(len(distinct))],
                              lambda p: runner.time(distinct[p["i"]]), opts.rounds)
        true = {c: f.value for c, f in zip(distinct, timed)}
        fastest = min((v for v in true.values() if v is not None), default=None)
        for mode in MODES:
            regrets = [true[c] / fastest - 1 for c in picks[mode]  # type: ignore[operator]
                       if true[c] is not None and fastest is not None]
            row = {"kernel": name, "mode": mode, "finalists": MODES[mode],
                   "runs_done": len(picks[mode]),
                   "picks_not_retimed": sum(true[c] is None for c in picks[mode]),
                   "regret_median": statistics.median(regrets) if regrets else None,
                   "regret_mean": statistics.mean(regrets) if regrets else None,
                   "regret_max": max(regrets) if regrets else None,
                   "distinct_winners": len(set(picks[mode])),
                   "tune_seconds_median": statistics.median(seconds[mode])
                   if seconds[mode] else None,
                   "picks": [c.to_dict() for c in picks[mode]]}
            rows.append(row)
            if regrets:
                print(f"  {name:10} {mode:24} {row['regret_median']:>14.1%} "
                      f"{row['regret_mean']:>6.1%} {row['regret_max']:>6.1%} "
                      f"{row['distinct_winners']:>17} "
                      f"{row['tune_seconds_median']:>16.2f}")
            else:
                print(f"  {name:10} {mode:24} (no pick was timed)")
        save()
    save()
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
