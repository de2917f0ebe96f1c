"""`tiledsl bench FILE[::KERNEL]`: time a file's kernels, with the default config, the tuned
one from the result cache and any given with --config, against the file's baseline, with the
code the tuner times candidates with (wall clock on the CPU; CUDA events with a cold L2 on a
GPU). Prints a table; writes JSON on request."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from autotune.baselines import file_baselines
from autotune.options import require
from autotune import spread
from autotune.spread import Spread, number
from autotune.timing import cuda_times_ms, wall_times_ms
from autotune.tune_cli import write_json
from autotune.tuner import require_gpu
from tiledsl.cli.outputs import check_output
from tiledsl.runtime import registry
from tiledsl.runtime.config import Config
from tiledsl.runtime.kernel import TileKernel
from tiledsl.progress import progress_bar


def _configs(k: TileKernel, args: tuple, backend: str, given: str | None) -> dict[str, Config]:
    """label -> config: the default, the tuned one (if the cache has it) and --config."""
    from tiledsl.cli import configs as cli_configs
    space = k.config_space(*args, backend=backend)
    out = {"default": space.default()}
    tuned = cli_configs.tuned_config(k, args, backend, space)
    if tuned is not None:
        out["tuned"] = tuned
    if given:
        out["--config"] = cli_configs.given_config(given, space)
    return out


def _time(k: TileKernel, args: tuple, backend: str, config: Config, repeats: int) -> Spread:
    """The kernel's median time and range; each call gets fresh values in the arrays the kernel
    may write (copied outside the timed region). On a GPU, the tuner's runner times it."""
    if backend == "triton":
        from autotune.runners import TritonRunner
        runner = TritonRunner(k, list(args))
        runner.repeats = repeats
        return Spread.of(runner.times(config))
    return Spread.of(wall_times_ms(lambda *call: k.run(*call, backend=backend, config=config),
                                   repeats, setup=lambda: tuple(
                                       a.copy() if isinstance(a, np.ndarray) else a
                                       for a in args)))


def cmd_bench(opts: argparse.Namespace) -> int:
    from tiledsl.cli.inputs import example_args, fmt_table, load_file, parse_dims
    require(opts.repeats >= 1, "--repeats", "at least 1", opts.repeats)
    require(opts.seed >= 0, "--seed", "at least 0", opts.seed)
    if opts.json is not None:
        check_output("--json", opts.json)
    module, kernels = load_file(opts.file)
    times = cuda_times_ms if opts.backend == "triton" else wall_times_ms
    unit = "GPU ms" if opts.backend == "triton" else "CPU ms"
    rows, report, noisy = [], [], False
    bar = progress_bar(None, "benchmarking", "row", False if opts.no_progress else None)
    try:
        for k in kernels:
            if opts.backend == "triton":
                require_gpu(k, "benchmarking", "use --backend numpy or spatial")
            args = example_args(module, k, opts.seed, parse_dims(opts.dims), opts.dtype)
            measured: list[tuple[str, str, Spread]] = []
            for label, config in _configs(k, args, opts.backend, opts.config).items():
                bar.set_postfix_str(f"{k.name} ({label})")
                measured.append((f"tiledsl {opts.backend} ({label})", str(config),
                                 _time(k, args, opts.backend, config, opts.repeats)))
                bar.update(1)
            baselines = []
            for name, fn in file_baselines(module, k, args, opts.backend).items():
                bar.set_postfix_str(f"{k.name} ({name})")
                baselines.append((name, "", Spread.of(times(fn, repeats=opts.repeats))))
                bar.update(1)
            base = baselines[0][2] if baselines else None
            shapes = " ".join("x".join(map(str, a.shape)) + f":{a.dtype}" for a in args
                              if isinstance(a, np.ndarray))
            for name, config, t in measured + baselines:
                within = base is not None and t is not base and t.overlaps(base)
                unreliable = base is not None and t is not base and not within and (
                    spread.noisy(t) or spread.noisy(base))
                noisy |= within or unreliable
                ratio = "-" if base is None else f"{t.median / base.median:.2f}" + \
                    (" (within noise)" if within else " (unreliable)" if unreliable else "")
                rows.append([k.name, name, config, number(t.median), t.range_text, unit, ratio])
                report.append({"kernel": k.name, "what": name, "config": config,
                               "ms": t.median, "min_ms": t.low, "max_ms": t.high,
                               "unit": unit, "over_baseline": t.median / base.median
                               if base is not None else None, "within_noise": within,
                               "unreliable": unreliable,
                               "inputs": shapes})
    finally:
        bar.close()
    print(fmt_table(rows, ["kernel", "what", "config", "median", "range (min-max)", "unit",
                            "x baseline"]))
    print(f"(medians and ranges of {opts.repeats} timed calls each" + (
        "; 'within noise': the row's range overlaps the baseline's, so their ratio says "
        f"nothing; 'unreliable': a range spans {spread.NOISY:g}x or more (a busy machine?))"
        if noisy else ")"))
    if opts.json is not None:
        write_json("--json", opts.json,
                   {"backend": opts.backend, "repeats": opts.repeats, "rows": report}, indent=1)
    return 0


def add(sub: Any) -> None:
    from tiledsl.cli.inputs import file_argument, input_options
    p = sub.add_parser("bench", help="time a file's kernels against their baselines",
                       description="Time each kernel of FILE with its default config, the tuned "
                                   "config from the result cache and --config, and the file's "
                                   "baseline(xp, *args) (NumPy on the CPU, CuPy on a GPU), with "
                                   "the tuner's timing code: the median of --repeats.")
    file_argument(p)
    p.add_argument("--backend", choices=["numpy", "triton"], default="numpy",
                   help="numpy (CPU wall clock, the default) or triton (a GPU, CUDA events)")
    p.add_argument("--config", help="also time this config, as JSON: "
                                    "'{\"block_sizes\": [64, 64, 32]}'")
    p.add_argument("--repeats", type=int, default=20,
                   help="timed calls per row, at least 1 (median; default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed for the inputs")
    input_options(p)
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (by default one shows on a terminal, never in a log or "
                        "a pipe)")
    p.add_argument("--json", help="write the rows as JSON to this path (gzipped if it ends with "
                                  ".gz)")
    p.set_defaults(func=cmd_bench)


registry.register_command("bench", add)
