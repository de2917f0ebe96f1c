"""The `tiledsl` command: run and inspect the kernels of a Python file.

    tiledsl run examples/matmul.py          # random inputs, NumPy backend, checked against reference()
    tiledsl show examples/matmul.py --ir    # the tile IR after the lowering pipeline

A file is a module with one or more `@td.tile_kernel` functions; `make_inputs(rng)` and
`reference(*args)` (float64 NumPy) let `run` build inputs and check the results (see examples/).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

import numpy as np

from tiledsl import registry, static_args, testing
from tiledsl.config import Config, ConfigSpace
from tiledsl.errors import BackendError, TileDSLError
from tiledsl.kernel import TileKernel
from tiledsl.outputs import outputs
from tiledsl.progress import tracked


class CLIError(Exception):
    """A problem with the command line or the file it names (exit status 2)."""


def load_file(path: str) -> tuple[ModuleType, list[TileKernel]]:
    """Import a kernel file; returns the module and its kernels, optionally `FILE::KERNEL`."""
    file, _, only = path.partition("::")
    p = Path(file)
    if not p.is_file():
        raise CLIError(f"no such file: {file}")
    spec = importlib.util.spec_from_file_location(f"tiledsl_user_{p.stem}", p)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except TileDSLError:
        raise
    except SyntaxError as e:
        raise CLIError(f"cannot load {file}: SyntaxError at line {e.lineno}: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 - the user's own file failed to import
        raise CLIError(f"cannot load {file}: {_user_error(e, p)}") from None
    kernels = [v for v in vars(module).values() if isinstance(v, TileKernel)]
    if only:
        kernels = [k for k in kernels if k.name == only]
        if not kernels:
            raise CLIError(f"{file} has no tile kernel named {only!r}")
    if not kernels:
        raise CLIError(f"{file} defines no @td.tile_kernel function")
    return module, kernels


def _user_error(e: BaseException, file: Path) -> str:
    """An exception raised by the user's file, with the line of that file it came from."""
    here = [f for f in traceback.extract_tb(e.__traceback__)
            if Path(f.filename).resolve() == file.resolve()]
    where = f" (line {here[-1].lineno}: {here[-1].line})" if here else ""
    return f"{type(e).__name__}: {e}{where}"


def _call_user(what: str, module: ModuleType, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a function of the user's file; its failure is a CLIError naming it."""
    try:
        return fn(*args, **kwargs)
    except TileDSLError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's own code failed
        raise CLIError(f"{module.__file__}: {what} failed: "
                       f"{_user_error(e, Path(str(module.__file__)))}") from None


DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}


def parse_dims(text: str) -> dict[str, int]:
    """`m=4096,k=4096` -> {"m": 4096, "k": 4096}."""
    dims = {}
    for item in filter(None, text.split(",")):
        name, eq, value = item.partition("=")
        if not eq or not value.strip().isdigit() or int(value) < 1:
            raise CLIError(f"--dims takes name=size pairs such as m=4096,k=1024; got {item!r}")
        dims[name.strip()] = int(value)
    return dims


def example_args(module: ModuleType, kernel: TileKernel, seed: int,
                 dims: dict[str, int] | None = None, dtype: str | None = None) -> tuple:
    """The kernel's inputs from the file's `make_inputs(rng)`; `dims` (merged over the file's
    `DIMS`) and `dtype` (f16, bf16, f32, f64) go to `make_inputs(rng, dims, dtype)`."""
    if seed < 0:
        raise CLIError(f"--seed must be at least 0, got {seed}")
    make = getattr(module, f"make_inputs_{kernel.name}", None) or getattr(module, "make_inputs", None)
    if make is None:
        raise CLIError(f"{module.__file__} has no make_inputs(rng) to build inputs for "
                       f"'{kernel.name}'")
    kwargs: dict = {}
    if dims:
        known = getattr(module, "DIMS", None)
        unknown = sorted(set(dims) - set(known)) if isinstance(known, dict) else []
        if unknown:
            raise CLIError(f"--dims: {module.__file__} names its dimensions {sorted(known)}, "
                           f"not {unknown}")
        kwargs["dims"] = {**known, **dims} if isinstance(known, dict) else dims
    if dtype:
        if dtype not in DTYPES:
            raise CLIError(f"--dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        from tiledsl import dtypes
        kwargs["dtype"] = getattr(dtypes, DTYPES[dtype]).np
    params = inspect.signature(make).parameters
    if set(kwargs) - set(params) and not any(q.kind is q.VAR_KEYWORD for q in params.values()):
        raise CLIError(f"{module.__file__}: make_inputs does not take {sorted(kwargs)} "
                       "(--dims and --dtype need make_inputs(rng, dims, dtype))")
    args = _call_user("make_inputs(rng)", module, make, np.random.default_rng(seed), **kwargs)
    if not isinstance(args, (tuple, list)):
        raise CLIError(f"{module.__file__}: make_inputs(rng) must return a tuple of the "
                       f"arguments of '{kernel.name}', got a {type(args).__name__}")
    return tuple(args)


def _fresh(args: tuple) -> tuple:
    """Copies of array arguments (kernels may write into them)."""
    return tuple(static_args.map_arrays(list(args), lambda a: a.copy()
                                        if isinstance(a, np.ndarray) else a))


def _configs(space: ConfigSpace, opts: argparse.Namespace) -> list[Config]:
    """The space's default config, then --samples others drawn with --seed."""
    default = space.default()
    return [default] + [c for c in space.sample(opts.samples + 1, seed=opts.seed)
                        if c != default][:opts.samples]


def _fmt_table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


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
        from tiledsl.arrays import from_numpy
        like = self.torch.empty(0)
        return static_args.map_arrays(list(args), lambda a: from_numpy(a, like).cuda()
                                      if isinstance(a, np.ndarray) else a)

    def get(self, value: object, name: str) -> np.ndarray:
        from tiledsl.arrays import to_numpy
        return to_numpy(value.cpu(), "", name)  # type: ignore[attr-defined]


def cmd_run(opts: argparse.Namespace) -> int:
    module, kernels = load_file(opts.file)
    rows, failed = [], False
    gpu = _GPU() if opts.backend == "triton" else None
    for k in kernels:
        args = example_args(module, k, opts.seed)
        ref_fn = getattr(module, f"reference_{k.name}", None) or getattr(module, "reference", None)
        k.bind(args, {})  # the inputs fit the kernel's parameters before reference() runs
        ref = _call_user("reference(...)", module, ref_fn, *_fresh(args)) \
            if ref_fn is not None else None
        configs = _configs(k.config_space(*args, backend=opts.backend), opts)
        written = set(k.written_args(*args))
        for i, cfg in enumerate(tracked(configs, f"running {k.name}", "config", _show(opts))):
            call_args = _fresh(args)
            if gpu is None:
                start = time.perf_counter()
                out = k.run(*call_args, backend=opts.backend, config=cfg)
                ms = (time.perf_counter() - start) * 1e3
            else:
                on_gpu = gpu.put(call_args)
                start = time.perf_counter()
                out = k.run(*on_gpu, backend=opts.backend, config=cfg)
                gpu.torch.cuda.synchronize()
                ms = (time.perf_counter() - start) * 1e3  # the first call includes compiling
                if out is not None:
                    out = tuple(gpu.get(o, "output") for o in testing.as_tuple(out))
                for a, g in zip(static_args.flatten_arrays(list(call_args)),
                                static_args.flatten_arrays(on_gpu)):
                    if isinstance(a, np.ndarray):  # what the kernel wrote, back on the host
                        a[...] = gpu.get(g, "argument")
            if out is None:  # the kernel wrote into its arguments: those are its outputs
                names, flat = static_args.splice(list(k.signature.parameters), list(call_args))
                out = tuple(a for name, a in zip(names, flat) if name in written)
            status, err_text = "ran", "-"
            if ref is not None:
                outs, refs = testing.as_tuple(out), testing.as_tuple(ref)
                errs = [testing.relative_error(o, r) for o, r in zip(outs, refs)]
                tol = max((testing.tolerance(np.asarray(o).dtype) for o in outs), default=0.0)
                ok = len(outs) == len(refs) and all(e <= tol for e in errs)
                err_text = f"{max(errs, default=0.0):.1e}"
                status = "ok" if ok else "FAIL"
                failed |= not ok
            label = "default" if i == 0 else "sampled"
            rows.append([k.name, label, str(cfg.block_sizes), f"{ms:.2f}", err_text, status])
    print(_fmt_table(rows, ["kernel", "config", "block_sizes", "first-call-ms", "rel.err",
                            "status"]))
    return 1 if failed else 0


def cmd_show(opts: argparse.Namespace) -> int:
    module, kernels = load_file(opts.file)
    for k in kernels:
        args = example_args(module, k, opts.seed)
        if opts.space:
            space = k.config_space(*args, backend=opts.backend)
            count = len(space) if space.countable else f"up to {space.size_upper_bound}"
            print(f"# config space of {k.name} ({count} configs)")
            for p in space.params:
                print(f"{p.name}: {list(p.choices)} default {p.default}  # {p.doc}")
        else:
            print(k.source(*args, target="ir-traced" if opts.traced else "ir"), end="")
    return 0


def cmd_compile(opts: argparse.Namespace) -> int:
    """Compile each kernel for --arch with the default and sampled configs; report resources."""
    module, kernels = load_file(opts.file)
    out_dir = Path(opts.out) if opts.out is not None else None
    if out_dir is not None and (not opts.out.strip() or (out_dir.exists() and
                                                         not out_dir.is_dir())):
        raise CLIError(f"--out {opts.out!r}: not a directory")  # before any compile
    rows = []
    for k in kernels:
        args = example_args(module, k, opts.seed)
        configs = _configs(k.config_space(*args, backend="triton"), opts)
        for i, cfg in enumerate(tracked(configs, f"compiling {k.name}", "config", _show(opts))):
            report = k.compile(*args, config=cfg, arch=opts.arch)
            for c in report:
                rows.append([k.name, "default" if i == 0 else "sampled", _short(cfg), opts.arch,
                             f"{c.compile_seconds:.2f}", str(c.registers), str(c.spill_bytes),
                             str(c.shared_bytes), c.problem or "ok"])
                if out_dir is not None:
                    stem = out_dir / f"{k.name}_{i}_{c.kernel}"
                    out_dir.mkdir(parents=True, exist_ok=True)
                    stem.with_suffix(".ptx").write_text(c.ptx)
                    stem.with_suffix(".cubin").write_bytes(c.cubin)
    print(_fmt_table(rows, ["kernel", "config", "knobs", "arch", "compile s", "regs", "spill B",
                            "smem B", "status"]))
    return 0


def cmd_export(opts: argparse.Namespace) -> int:
    """Write an ahead-of-time package per kernel, compiled for the inputs make_inputs builds."""
    from tiledsl.export import export

    module, kernels = load_file(opts.file)
    out = Path(opts.out)
    config = Config.from_json(opts.config) if opts.config else None
    rows = []
    for k in kernels:
        args = example_args(module, k, opts.seed)
        path = export(k, out if len(kernels) == 1 else out / k.name, *args, arch=opts.arch,
                      config=config)
        manifest = json.loads((path / "manifest.json").read_text())
        rows.append([k.name, opts.arch, _short(Config.from_dict(manifest["config"])),
                     manifest["config_source"], str(len(manifest["launches"])), str(path)])
    print(_fmt_table(rows, ["kernel", "arch", "config", "from", "launches", "package"]))
    return 0


def cmd_simulate(opts: argparse.Namespace) -> int:
    """Map each kernel onto a spatial architecture preset and time it on the simulator."""
    module, kernels = load_file(opts.file)
    traces = outputs("--trace", opts.trace, kernels)  # checked before any kernel is simulated
    for k in kernels:
        args = example_args(module, k, opts.seed)
        config = Config.from_json(opts.config) if opts.config else None
        report = k.simulate(*args, arch=opts.arch, config=config, trace=traces.get(k.name))
        print(report.summary())
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


def _common(p: argparse.ArgumentParser, samples: int | None) -> None:
    p.add_argument("file", help="a Python file with @td.tile_kernel functions (FILE[::KERNEL])")
    p.add_argument("--seed", type=int, default=0, help="seed for inputs and config sampling")
    if samples is not None:
        p.add_argument("--samples", type=_count, default=samples,
                       help=f"sampled configs besides the default (default {samples})")
        p.add_argument("--no-progress", action="store_true",
                       help="no progress bar (by default one shows on a terminal, never in a "
                            "log or a pipe)")


def _show(opts: argparse.Namespace) -> bool | None:
    """A progress bar: on a terminal (None), or never with --no-progress (tiledsl/progress.py)."""
    return False if getattr(opts, "no_progress", False) else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tiledsl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a file's kernels on random inputs and check them",
                         description="Trace and run each kernel of FILE on make_inputs(rng), "
                                     "with the default config and sampled configs, and compare "
                                     "with the file's reference() in float64. first-call-ms is "
                                     "the wall time of that one call, tracing and compiling "
                                     "included; `tiledsl bench` times kernels.")
    _common(run, samples=3)
    run.add_argument("--backend", default="numpy", help="backend to run on (default: numpy)")
    run.set_defaults(func=cmd_run)

    show = sub.add_parser("show", help="print a kernel's IR or config space",
                          description="Print what the kernels of FILE become for the inputs "
                                      "make_inputs(rng) builds.")
    _common(show, samples=None)
    what = show.add_mutually_exclusive_group()
    what.add_argument("--ir", action="store_true", help="the tile IR after the pipeline (default)")
    what.add_argument("--traced", action="store_true", help="the tile IR as traced, before passes")
    what.add_argument("--space", action="store_true", help="the config space")
    show.add_argument("--backend", default="numpy", help="backend whose config space to show")
    show.set_defaults(func=cmd_show)

    comp = sub.add_parser("compile", help="compile kernels to PTX/cubin (no GPU needed)",
                          description="Generate Triton code for each kernel of FILE, compile it "
                                      "ahead of time for --arch and report registers, spills and "
                                      "shared memory per config.")
    _common(comp, samples=0)
    comp.add_argument("--arch", default="sm_90", help="target GPU architecture (sm_80, sm_90)")
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
    expo.add_argument("--config", help='a config as JSON, e.g. \'{"block_sizes": [64, 64, 32]}\'')
    expo.set_defaults(func=cmd_export)

    simu = sub.add_parser("simulate", help="time kernels on a spatial dataflow accelerator",
                          description="Map each kernel of FILE onto a spatial architecture "
                                      "preset and run the dataflow config on the event-driven "
                                      "simulator: cycles, MAC utilization, roofline bound, "
                                      "traffic.")
    _common(simu, samples=None)
    simu.add_argument("--arch", default="generic-8x8",
                      help="preset: generic-8x8, aie-like-4x8, wormhole-like, lpu-like")
    simu.add_argument("--config", help='a config as JSON, e.g. \'{"block_sizes": [64, 64, 32]}\'')
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
