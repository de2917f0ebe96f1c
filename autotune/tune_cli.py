"""`tiledsl tune FILE[::KERNEL]`: tune a file's kernels, print a table against the baselines,
optionally write a convergence plot and a JSON report."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

from autotune.baselines import file_baselines
from autotune.finalists import FINALISTS, ROUNDS
from autotune.options import MAX_SEED, check_tune_options, require
from autotune.prune import PRUNE_FACTOR
from autotune.tuner import require_gpu, tune
from tiledsl.cli.outputs import check_output, outputs
from tiledsl.runtime import registry


def _default_backend() -> str:
    """The GPU when there is one, else the spatial simulator (which runs anywhere)."""
    try:
        import torch
        return "triton" if torch.cuda.is_available() else "spatial"
    except ImportError:
        return "spatial"


def write_json(option: str, path: str, data: Any, **dump: Any) -> None:
    """Write `data` as JSON to `path`, gzipped when it ends with .gz (as `tiledsl replay` reads
    it); a failed write is an error naming the option."""
    from tiledsl.cli.inputs import CLIError
    try:
        with (gzip.open(path, "wt") if Path(path).suffix == ".gz" else open(path, "w")) as f:
            json.dump(data, f, **dump)
    except OSError as e:
        raise CLIError(f"{option}: cannot write {path}: {e.strerror or e}") from None


def numpy_backend_baseline(k: Any, args: tuple) -> dict[str, Any]:
    """The kernel on the NumPy backend with that backend's default config: the CPU time beside
    the file's NumPy baseline. (It ran `k.run(*args)` before, which after a numpy tune is the
    tuned config, timed with copies of its arguments: a numpy tune's table showed it as a
    second, unexplained time of the tuned config, 40 ms against the default's 98.) Only a
    kernel that writes into its arguments gets fresh copies, inside the timed call."""
    from tiledsl.cli.inputs import fresh
    config = k.config_space(*args, backend="numpy").default()
    writes = bool(k.written_args(*args))
    return {"tiledsl numpy backend (default config)":
            lambda: k.run(*(fresh(args) if writes else args), backend="numpy", config=config)}


def cmd_tune(opts: argparse.Namespace) -> int:
    from tiledsl.cli.inputs import CLIError, example_args, load_file, parse_dims
    require(opts.trials is None or opts.trials >= 1, "--trials", "at least 1", opts.trials)
    require(opts.timeout is None or opts.timeout > 0, "--timeout", "above 0 seconds", opts.timeout)
    require(0 < opts.trial_timeout < float("inf"), "--trial-timeout", "above 0 seconds",
            opts.trial_timeout)
    require(opts.finalists >= 0, "--finalists", "at least 0 (0 keeps the search's fastest trial)",
            opts.finalists)
    require(0 <= opts.seed <= MAX_SEED, "--seed", "from 0 to 2**32 - 1", opts.seed)
    module, kernels = load_file(opts.file)
    backend = opts.backend or _default_backend()
    trials = opts.trials if opts.trials is not None else (12 if opts.quick else 40)
    prune = None if opts.no_prune else opts.prune
    for k in kernels:  # every option's problem before the first kernel is tuned
        check_tune_options(k.name, trials=trials, timeout=opts.timeout, strategy=opts.strategy,
                           prune=prune, finalists=opts.finalists, seed=opts.seed,
                           trial_timeout=opts.trial_timeout)
    if opts.json is not None:
        check_output("--json", opts.json)
    plots = outputs("--plot", opts.plot, kernels)
    t4s = outputs("--t4", opts.t4, kernels)
    reports = []
    for k in kernels:
        args = example_args(module, k, opts.seed, parse_dims(opts.dims), opts.dtype)
        if backend == "triton":
            require_gpu(k)  # before the CuPy baselines touch the device
        baselines = file_baselines(module, k, args, backend)
        if backend in ("spatial", "model"):  # (a numpy tune's rows are that backend already)
            baselines.update(numpy_backend_baseline(k, args))
        result = tune(k, list(args), backend=backend, arch=opts.arch, trials=trials,
                      timeout=opts.timeout, strategy=opts.strategy, storage=opts.storage,
                      study_name=opts.study, seed=opts.seed, check=not opts.no_check,
                      progress=False if opts.no_progress else None, baselines=baselines,
                      finalists=opts.finalists, prune=prune,
                      trial_timeout=opts.trial_timeout, isolate=not opts.no_isolate)
        print(result.table())
        if k.name in plots:
            try:
                result.plot(plots[k.name])
            except OSError as e:
                raise CLIError(f"--plot: cannot write {plots[k.name]}: {e.strerror or e}") \
                    from None
            print(f"  convergence plot: {plots[k.name]}")
        reports.append(result.to_json())
        if k.name in t4s:
            write_json("--t4", t4s[k.name], result.to_t4())
            print(f"  T4 export: {t4s[k.name]}")
    if opts.json is not None:
        write_json("--json", opts.json, reports if len(reports) > 1 else reports[0], indent=1,
                   default=float)
    return 0


def add(sub: Any) -> None:
    from tiledsl.cli.inputs import file_argument, input_options
    p = sub.add_parser("tune", help="autotune a file's kernels (resumable, shareable studies)",
                       description="Search each kernel's config space with the default strategy "
                                   "(or --strategy), check every candidate against NumPy, keep the "
                                   "best in the result cache (k(*args) uses it), and compare with "
                                   "the baselines. Studies live in --storage: an interrupted run "
                                   "resumes, and several workers can share one study.")
    file_argument(p)
    p.add_argument("--backend", choices=["spatial", "model", "numpy", "triton"],
                   help="what to measure: spatial (simulated, default without a GPU), model (GPU "
                        "cost model, no GPU needed), numpy (CPU wall time), triton (GPU)")
    p.add_argument("--arch", help="spatial preset (generic-8x8, aie-like-4x8, wormhole-like, lpu-like)")
    p.add_argument("--trials", type=int, help="evaluations per kernel (default 40; 12 with --quick)")
    p.add_argument("--timeout", type=float, help="stop after this many seconds (a trial in flight "
                                                 "is stopped)")
    p.add_argument("--trial-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="fail a candidate that takes longer than this to check and measure "
                        "(default 60)")
    p.add_argument("--no-isolate", action="store_true",
                   help="measure in this process, not in a worker: a crash ends the tune and a "
                        "hang outlives --timeout")
    p.add_argument("--strategy", help="search strategy (default: the one chosen by replay)")
    p.add_argument("--storage", help="Optuna storage URL: sqlite:///f.db, postgresql://..., "
                                     "journal:/path (default: ~/.cache/tiledsl/studies.db)")
    p.add_argument("--study", help="study name (default: derived from kernel, shapes, backend)")
    p.add_argument("--seed", type=int, default=0, help="seed for inputs and the search")
    input_options(p)
    p.add_argument("--quick", action="store_true", help="a short run (12 trials)")
    p.add_argument("--no-check", action="store_true", help="skip checking numbers against NumPy")
    p.add_argument("--finalists", type=int, default=FINALISTS,
                   help="timed backends (triton, numpy): re-time this many of the search's fastest "
                        f"configs and the default, interleaved over {ROUNDS} rounds, and keep the "
                        f"lowest median (default {FINALISTS}; 0 keeps the search's fastest trial)")
    p.add_argument("--prune", type=float, default=PRUNE_FACTOR, metavar="FACTOR",
                   help="GPU tunes: do not time a config the cost model predicts more than FACTOR "
                        f"times slower than one already measured (default {PRUNE_FACTOR:g})")
    p.add_argument("--no-prune", action="store_true", help="GPU tunes: time every config")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (by default one shows on a terminal, never in a log or "
                        "a pipe)")
    p.add_argument("--plot", help="write a convergence plot (PNG, or as the suffix says: .svg, "
                                  ".pdf) to this path; with several kernels, one per kernel "
                                  "(conv.png -> conv-KERNEL.png)")
    p.add_argument("--json", help="write the report as JSON to this path (gzipped if it ends "
                                  "with .gz)")
    p.add_argument("--t4", help="export the study's trials in the T4 format to this path "
                                "(gzipped if it ends with .gz); with several kernels, one per "
                                "kernel (study.json.gz -> study-KERNEL.json.gz)")
    p.set_defaults(func=cmd_tune)


registry.register_command("tune", add)
