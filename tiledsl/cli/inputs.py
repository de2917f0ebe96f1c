"""What a `tiledsl` command reads: the kernel file it names (`FILE` or `FILE::KERNEL`), the
kernel's inputs from the file's hooks (tiledsl/cli/file_hooks.py) with --seed, --dims and --dtype,
and the CLIError every problem with them raises (exit status 2)."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from tiledsl.cli import file_hooks
from tiledsl.frontend import static_args
from tiledsl.errors import TileDSLError
from tiledsl.runtime.kernel import TileKernel


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
    kernels = file_hooks.file_kernels(module)
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


def call_user(what: str, module: ModuleType, fn: Any, *args: Any, **kwargs: Any) -> Any:
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
    found = file_hooks.hook(module, kernel, "make_inputs")
    if found is None:
        raise CLIError(f"{module.__file__} has no make_inputs(rng) (or make_inputs_{kernel.name}) "
                       f"to build inputs for '{kernel.name}'")
    name, make = found
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
        raise CLIError(f"{module.__file__}: {name} does not take {sorted(kwargs)} "
                       f"(--dims and --dtype need {name}(rng, dims, dtype))")
    args = call_user(f"{name}(rng)", module, make, np.random.default_rng(seed), **kwargs)
    if not isinstance(args, (tuple, list)):
        raise CLIError(f"{module.__file__}: {name}(rng) must return a tuple of the "
                       f"arguments of '{kernel.name}', got a {type(args).__name__}")
    return tuple(args)


def inputs(module: ModuleType, kernel: TileKernel, opts: argparse.Namespace) -> tuple:
    """The kernel's inputs for the command line's --seed, --dims and --dtype."""
    return example_args(module, kernel, opts.seed, parse_dims(opts.dims), opts.dtype)


def fresh(args: tuple) -> tuple:
    """Copies of array arguments (kernels may write into them)."""
    return tuple(static_args.map_arrays(list(args), lambda a: a.copy()
                                        if isinstance(a, np.ndarray) else a))


def fmt_table(rows: list[list[str]], header: list[str]) -> str:
    """`rows` under `header`, in columns as wide as their widest cell."""
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def input_options(p: Any) -> None:
    """--dims and --dtype: the problem the inputs are made for (`make_inputs(rng, dims, dtype)`)."""
    p.add_argument("--dims", default="", help="problem sizes, e.g. m=4096,k=4096,n=4096 (default: "
                                              "the file's DIMS)")
    p.add_argument("--dtype", choices=sorted(DTYPES), help="input dtype (default: the file's)")


def file_argument(p: Any) -> None:
    """FILE[::KERNEL], and the file's hooks in the subcommand's --help."""
    p.add_argument("file", help="a Python file with @td.tile_kernel functions (FILE[::KERNEL])")
    p.epilog = file_hooks.HELP
    p.formatter_class = argparse.RawDescriptionHelpFormatter
