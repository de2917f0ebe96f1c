"""The `tiledsl` command: run and inspect the kernels of a Python file.

    tiledsl run examples/matmul.py          # random inputs, NumPy backend, checked against reference()
    tiledsl show examples/matmul.py --ir    # the tile IR after the lowering pipeline

A file is a module with one or more `@td.tile_kernel` functions; `make_inputs(rng)` and
`reference(*args)` (float64 NumPy) let `run` build inputs and check the results (see examples/);
per kernel K, `make_inputs_K`, `reference_K` and `baseline_K` (tiledsl/cli/file_hooks.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tiledsl.cli import configs as cli_configs, file_hooks
from tiledsl.runtime import registry, returns
from tiledsl.frontend import static_args
from tiledsl import testing
from tiledsl.runtime.config import Config
from tiledsl.errors import BackendError, TileDSLError
from tiledsl.runtime.kernel import TileKernel
from tiledsl.cli.inputs import (CLIError, call_user, file_argument, fmt_table, fresh,
                                input_options, inputs, load_file)
from tiledsl.cli.outputs import outputs
from tiledsl.progress import tracked


class _GPU:
    """The example's NumPy inputs moved to the GPU for `--backend triton`, and results back."""

    def __init__(self) -> None:
        try:
            import torch
        except ImportError:
            raise BackendError("backend 'triton' launches through torch: pip install torch") \
                from None
        if not torch.cuda.is_available():
            raise BackendError("backend 'triton' needs an NVIDIA GPU and driver, and none is "
                               "available; use --backend numpy or triton-interpret on the CPU")
        self.torch = torch

    def put(self, args: tuple) -> list:
        from tiledsl.interop.arrays import from_numpy
        like = self.torch.empty(0)
        return static_args.map_arrays(list(args), lambda a: from_numpy(a, like).cuda()
                                      if isinstance(a, np.ndarray) else a)

    def get(self, value: object, name: str) -> np.ndarray:
        from tiledsl.interop.arrays import to_numpy
        return to_numpy(value.cpu(), "", name)  # type: ignore[attr-defined]


def _run_once(k: TileKernel, args: tuple, backend: str, cfg: Config,
              gpu: _GPU | None) -> tuple[Any, float]:
    """One call of `k` on fresh copies of `args`: its outputs (what it returned, else the
    arguments it wrote) and the call's wall time in ms."""
    call_args = fresh(args)
    if gpu is None:
        start = time.perf_counter()
        out = k.run(*call_args, backend=backend, config=cfg)
        ms = (time.perf_counter() - start) * 1e3
    else:
        on_gpu = gpu.put(call_args)
        start = time.perf_counter()
        out = k.run(*on_gpu, backend=backend, config=cfg)
        gpu.torch.cuda.synchronize()
        ms = (time.perf_counter() - start) * 1e3  # the first call includes compiling
        if out is not None:
            out = returns.map_tensors(testing.as_tuple(out), lambda o: gpu.get(o, "output"))
        for a, g in zip(static_args.flatten_arrays(list(call_args)),
                        static_args.flatten_arrays(on_gpu)):
            if isinstance(a, np.ndarray):  # what the kernel wrote, back on the host
                a[...] = gpu.get(g, "argument")
    if out is None:  # the kernel wrote into its arguments: those are its outputs
        written = set(k.written_args(*args))
        names, flat = static_args.splice(list(k.signature.parameters), list(call_args))
        out = tuple(a for name, a in zip(names, flat) if name in written)
    return out, ms


def _compare(out: Any, ref: Any) -> tuple[str, bool]:
    """The largest relative error of the outputs against the reference's, and whether every
    output is within its dtype's tolerance."""
    outs, refs = testing.as_tuple(out), testing.as_tuple(ref)
    pairs = [(o, r) for o, r in zip(outs, refs) if o is not None or r is not None]
    errs = [testing.relative_error(o, r) if o is not None and r is not None else float("inf")
            for o, r in pairs]  # an optional output None on one side only: wrong
    tol = max((testing.tolerance(np.asarray(o).dtype) for o, _ in pairs if o is not None),
              default=0.0)
    ok = len(outs) == len(refs) and all(e <= tol for e in errs)
    return f"{max(errs, default=0.0):.1e}", ok


def cmd_run(opts: argparse.Namespace) -> int:
    module, kernels = load_file(opts.file)
    rows, notes, failed = [], [], False
    gpu = _GPU() if opts.backend == "triton" else None
    for k in kernels:
        args = inputs(module, k, opts)
        k.bind(args, {})  # the inputs fit the kernel's parameters before reference() runs
        found = file_hooks.hook(module, k, "reference")
        ref = call_user(f"{found[0]}(...)", module, found[1], *fresh(args)) if found else None
        if found is None:
            notes.append(f"{k.name}: not checked: {file_hooks.missing(module, k, 'reference')}")
        space = k.config_space(*args, backend=opts.backend)
        configs, note = cli_configs.with_samples(
            cli_configs.labelled(k, args, space, opts.backend, opts.config), space, opts.backend,
            opts.samples, opts.seed)
        notes += [f"{k.name}: {note}"] if note else []
        for label, cfg in tracked(configs, f"running {k.name}", "config", _show(opts)):
            out, ms = _run_once(k, args, opts.backend, cfg, gpu)
            err_text, status = "-", "unchecked"
            if ref is not None:
                err_text, ok = _compare(out, ref)
                status = "ok" if ok else "FAIL"
                failed |= not ok
            rows.append([k.name, label, _short(cfg), f"{ms:.2f}", err_text, status,
                         f"{found[0]}()" if found else "-"])
    print(fmt_table(rows, ["kernel", "config", "values", "first-call-ms", "rel.err", "status",
                            "checked against"]))
    for note in notes:
        print(f"  {note}")
    return 1 if failed else 0


def cmd_show(opts: argparse.Namespace) -> int:
    module, kernels = load_file(opts.file)
    for k in kernels:
        args = inputs(module, k, opts)
        if opts.space:
            space = k.config_space(*args, backend=opts.backend)
            count = len(space) if space.countable else f"up to {space.size_upper_bound}"
            print(f"# config space of {k.name} on backend {opts.backend} ({count} configs)")
            for p in space.params:
                print(f"{p.name}: {list(p.choices)} default {p.default}  # {p.doc}")
        elif opts.tuned:
            _show_tuned(k, args)
        else:
            print(k.source(*args, target="ir-traced" if opts.traced else "ir"), end="")
    return 0


def _show_tuned(k: TileKernel, args: tuple) -> None:
    """The result cache's tuned configs of `k`; `*` marks those used for these inputs."""
    entries = registry.service("tuner").tuned_entries(k, list(args))
    if not entries:
        print(f"# no tuned config of {k.name} in the result cache (`tiledsl tune FILE::{k.name}` "
              "makes one)")
        return
    print(f"# tuned configs of {k.name} in the result cache (* = used for the inputs "
          "make_inputs builds, with these --dims and --dtype)")
    rows = [["*" if e.current else "", e.backend, e.device, e.inputs, _short(e.config),
             f"{e.value:.4g} {e.unit}"] for e in entries]
    print(fmt_table(rows, ["", "backend", "device", "inputs", "config", "best"]))


def cmd_compile(opts: argparse.Namespace) -> int:
    """Compile each kernel for --arch with the tuned, default and sampled configs (and
    --config); report resources."""
    module, kernels = load_file(opts.file)
    out_dir = Path(opts.out) if opts.out is not None else None
    if out_dir is not None and (not opts.out.strip() or (out_dir.exists() and
                                                         not out_dir.is_dir())):
        raise CLIError(f"--out {opts.out!r}: not a directory")  # before any compile
    rows, notes = [], []
    for k in kernels:
        args = inputs(module, k, opts)
        space = k.config_space(*args, backend="triton", arch=opts.arch)
        configs, note = cli_configs.with_samples(
            cli_configs.labelled(k, args, space, "triton", opts.config), space, "triton",
            opts.samples, opts.seed)
        notes += [f"{k.name}: {note}"] if note else []
        for i, (label, cfg) in enumerate(tracked(configs, f"compiling {k.name}", "config",
                                                 _show(opts))):
            report = k.compile(*args, config=cfg, arch=opts.arch)
            for c in report:
                rows.append([k.name, label, _short(cfg), opts.arch,
                             f"{c.compile_seconds:.2f}", str(c.registers), str(c.spill_bytes),
                             str(c.shared_bytes), c.problem or "ok"])
                if out_dir is not None:
                    stem = out_dir / f"{k.name}_{i}_{c.kernel}"
                    out_dir.mkdir(parents=True, exist_ok=True)
                    stem.with_suffix(".ptx").write_text(c.ptx)
                    stem.with_suffix(".cubin").write_bytes(c.cubin)
    print(fmt_table(rows, ["kernel", "config", "knobs", "arch", "compile s", "regs", "spill B",
                            "smem B", "status"]))
    for note in notes:
        print(f"  {note}")
    return 0


def cmd_export(opts: argparse.Namespace) -> int:
    """Write an ahead-of-time package per kernel, compiled for the inputs make_inputs builds."""
    from tiledsl.interop.export import export

    module, kernels = load_file(opts.file)
    out = Path(opts.out)
    rows = []
    for k in kernels:
        args = inputs(module, k, opts)
        config = None if not opts.config else cli_configs.given_config(
            opts.config, k.config_space(*args, backend="triton", arch=opts.arch))
        path = export(k, out if len(kernels) == 1 else out / k.name, *args, arch=opts.arch,
                      config=config)
        manifest = json.loads((path / "manifest.json").read_text())
        source = {"given": "--config"}.get(manifest["config_source"], manifest["config_source"])
        rows.append([k.name, opts.arch, _short(Config.from_dict(manifest["config"])), source,
                     str(len(manifest["launches"])), str(path)])
    print(fmt_table(rows, ["kernel", "arch", "config", "from", "launches", "package"]))
    return 0


def cmd_simulate(opts: argparse.Namespace) -> int:
    """Map each kernel onto a spatial architecture preset and time it on the simulator, with
    --config, else the tuned config, else the default."""
    module, kernels = load_file(opts.file)
    traces = outputs("--trace", opts.trace, kernels)  # checked before any kernel is simulated
    for k in kernels:
        args = inputs(module, k, opts)
        space = k.config_space(*args, backend="spatial", arch=opts.arch)
        label, config = cli_configs.chosen(k, args, space, "spatial", opts.config, opts.arch)
        report = k.simulate(*args, arch=opts.arch, config=config, trace=traces.get(k.name))
        print(report.summary())
        print(f"  config            {label}: {_short(config)}")
        if k.name in traces:
            print(f"  trace             {traces[k.name]}")
    return 0


def _short(cfg: Config) -> str:
    knobs = "".join(f" {k}={v}" for k, v in cfg.knobs)
    warps = f" w{cfg.num_warps}" if cfg.num_warps else ""
    stages = f" s{cfg.num_stages}" if cfg.num_stages else ""
    return f"{cfg.block_sizes}{warps}{stages}{knobs}"


def _count(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {n}")
    return n


def config_option(p: Any, what: str) -> None:
    p.add_argument("--config", help=f"{what}, as JSON: '{{\"block_sizes\": [64, 64, 32]}}'")


def _common(p: argparse.ArgumentParser, samples: int | None) -> None:
    file_argument(p)
    p.add_argument("--seed", type=int, default=0, help="seed for inputs and config sampling")
    input_options(p)
    if samples is not None:
        p.add_argument("--samples", type=_count, default=samples,
                       help=f"sampled configs besides the tuned and default ones (default "
                            f"{samples}); the table says which is which")
        p.add_argument("--no-progress", action="store_true",
                       help="no progress bar (by default one shows on a terminal, never in a "
                            "log or a pipe)")


def _show(opts: argparse.Namespace) -> bool | None:
    """A progress bar: on a terminal (None), or never with --no-progress (tiledsl/progress.py)."""
    return False if getattr(opts, "no_progress", False) else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tiledsl", description=__doc__,
                                     epilog=file_hooks.HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a file's kernels on random inputs and check them",
                         description="Trace and run each kernel of FILE on make_inputs(rng), "
                                     "with --config, the tuned config from the result cache (for "
                                     "these inputs and backend), the default config and sampled "
                                     "configs, and compare with the kernel's reference in "
                                     "float64 (the table names it). first-call-ms is the wall "
                                     "time of that one call, tracing and compiling included; "
                                     "`tiledsl bench` times kernels.")
    _common(run, samples=3)
    run.add_argument("--backend", default="numpy", help="backend to run on (default: numpy)")
    config_option(run, "also run this config")
    run.set_defaults(func=cmd_run)

    show = sub.add_parser("show", help="print a kernel's IR or config space",
                          description="Print what the kernels of FILE become for the inputs "
                                      "make_inputs(rng) builds.")
    _common(show, samples=None)
    what = show.add_mutually_exclusive_group()
    what.add_argument("--ir", action="store_true", help="the tile IR after the pipeline (default)")
    what.add_argument("--traced", action="store_true", help="the tile IR as traced, before passes")
    what.add_argument("--space", action="store_true", help="the config space")
    what.add_argument("--tuned", action="store_true",
                      help="the result cache's tuned configs of the kernels, for any inputs, "
                           "backend and device; * marks those used for these inputs")
    show.add_argument("--backend", default="numpy", help="backend whose config space to show")
    show.set_defaults(func=cmd_show)

    comp = sub.add_parser("compile", help="compile kernels to PTX/cubin (no GPU needed)",
                          description="Generate Triton code for each kernel of FILE, compile it "
                                      "ahead of time for --arch and report registers, spills and "
                                      "shared memory per config: --config, the tuned one from "
                                      "the result cache, the default and --samples others.")
    _common(comp, samples=0)
    comp.add_argument("--arch", default="sm_90", help="target GPU architecture (sm_80, sm_90)")
    config_option(comp, "also compile this config")
    comp.add_argument("--out", help="write each config's .ptx and .cubin to this directory")
    comp.set_defaults(func=cmd_compile)

    expo = sub.add_parser("export", help="write an ahead-of-time package (cubins + manifest)",
                          description="Compile each kernel of FILE for the inputs make_inputs(rng) "
                                      "builds (their shapes, dtypes and strides) and --arch, and "
                                      "write a package that tiledsl.load() runs with CuPy alone, "
                                      "without Triton. The config is --config, else the tuned one "
                                      "from the result cache, else the default. With several "
                                      "kernels, each goes to OUT/KERNEL.")
    _common(expo, samples=None)
    expo.add_argument("--arch", default="sm_90", help="target GPU architecture (sm_80, sm_90)")
    expo.add_argument("--out", required=True, help="the package directory to write")
    config_option(expo, "the config to export")
    expo.set_defaults(func=cmd_export)

    simu = sub.add_parser("simulate", help="time kernels on a spatial dataflow accelerator",
                          description="Map each kernel of FILE onto a spatial architecture "
                                      "preset and run the dataflow config on the event-driven "
                                      "simulator: cycles, MAC utilization, roofline bound, "
                                      "traffic. The config is --config, else the tuned one from "
                                      "the result cache (for these inputs and --arch), else the "
                                      "default; the report names it.")
    _common(simu, samples=None)
    simu.add_argument("--arch", default="generic-8x8",
                      help="preset: generic-8x8, aie-like-4x8, wormhole-like, lpu-like")
    config_option(simu, "the config to simulate")
    simu.add_argument("--trace", help="write a Chrome/Perfetto trace JSON to this path (with "
                                      "several kernels, one per kernel: tr.json -> "
                                      "tr-KERNEL.json)")
    simu.set_defaults(func=cmd_simulate)

    for add in registry.commands().values():  # e.g. `tune` and `replay` from autotune
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    try:
        return int(opts.func(opts))
    except CLIError as e:
        print(f"tiledsl: {e}", file=sys.stderr)
        return 2
    except TileDSLError as e:
        print(f"tiledsl: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except MemoryError as e:
        print(f"tiledsl: out of memory: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tiledsl: interrupted (a tune with --storage resumes where it stopped)",
              file=sys.stderr)
        return 130
