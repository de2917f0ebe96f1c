"""`tiledsl tune FILE[::KERNEL]`: tune a file's kernels, print a table against the baselines,
optionally write a convergence plot and a JSON report."""

from __future__ import annotations

import argparse
import json
from typing import Any

from autotune.baselines import file_baselines
from autotune.finalists import FINALISTS, ROUNDS
from autotune.prune import PRUNE_FACTOR
from autotune.tuner import require_gpu, tune
from tiledsl import registry


def input_options(p: Any) -> None:
    """--dims and --dtype: the problem the inputs are made for (`make_inputs(rng, dims, dtype)`)."""
    p.add_argument("--dims", default="", help="problem sizes, e.g. m=4096,k=4096,n=4096 (default: "
                                              "the file's DIMS)")
    from tiledsl.cli import DTYPES
    p.add_argument("--dtype", choices=sorted(DTYPES), help="input dtype (default: the file's)")


def _default_backend() -> str:
    """The GPU when there is one, else the spatial simulator (which runs anywhere)."""
    try:
        import torch
        return "triton" if torch.cuda.is_available() else "spatial"
    except ImportError:
        return "spatial"


def cmd_tune(opts: argparse.Namespace) -> int:
    from tiledsl.cli import _fresh, example_args, load_file, parse_dims
    module, kernels = load_file(opts.file)
    backend = opts.backend or _default_backend()
    trials = opts.trials if opts.trials is not None else (12 if opts.quick else 40)
    reports = []
    for k in kernels:
        args = example_args(module, k, opts.seed, parse_dims(opts.dims), opts.dtype)
        if backend == "triton":
            require_gpu(k)  # before the CuPy baselines touch the device
        baselines = file_baselines(module, k, args, backend)
        if backend != "triton":
            baselines["tiledsl numpy backend"] = lambda: k.run(*_fresh(args))
        result = tune(k, list(args), backend=backend, arch=opts.arch, trials=trials,
                      timeout=opts.timeout, strategy=opts.strategy, storage=opts.storage,
                      study_name=opts.study, seed=opts.seed, check=not opts.no_check,
                      progress=not opts.no_progress, baselines=baselines,
                      finalists=opts.finalists, prune=None if opts.no_prune else opts.prune)
        print(result.table())
        if opts.plot:
            path = opts.plot if len(kernels) == 1 else opts.plot.replace(".png", f"_{k.name}.png")
            result.plot(path)
            print(f"  convergence plot: {path}")
        reports.append(result.to_json())
        if opts.t4:
            path = opts.t4 if len(kernels) == 1 else opts.t4.replace(".json", f"_{k.name}.json")
            with open(path, "w") as f:
                json.dump(result.to_t4(), f)
            print(f"  T4 export: {path}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(reports if len(reports) > 1 else reports[0], f, indent=1, default=float)
    return 0


def add(sub: Any) -> None:
    p = sub.add_parser("tune", help="autotune a file's kernels (resumable, shareable studies)",
                       description="Search each kernel's config space with the default strategy "
                                   "(or --strategy), check every candidate against NumPy, keep the "
                                   "best in the result cache (k(*args) uses it), and compare with "
                                   "the baselines. Studies live in --storage: an interrupted run "
                                   "resumes, and several workers can share one study.")
    p.add_argument("file", help="a Python file with @td.tile_kernel functions (FILE[::KERNEL])")
    p.add_argument("--backend", choices=["spatial", "model", "numpy", "triton"],
                   help="what to measure: spatial (simulated, default without a GPU), model (GPU "
                        "cost model, no GPU needed), numpy (CPU wall time), triton (GPU)")
    p.add_argument("--arch", help="spatial preset (generic-8x8, aie-like-4x8, wormhole-like, lpu-like)")
    p.add_argument("--trials", type=int, help="evaluations per kernel (default 40; 12 with --quick)")
    p.add_argument("--timeout", type=float, help="stop after this many seconds")
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
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--plot", help="write a convergence plot (PNG) to this path")
    p.add_argument("--json", help="write the report as JSON to this path")
    p.add_argument("--t4", help="export the study's trials in the T4 format to this path")
    p.set_defaults(func=cmd_tune)


registry.register_command("tune", add)
