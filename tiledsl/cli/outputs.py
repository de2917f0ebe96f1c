"""The files commands write (`--json`, `--plot`, `--t4`, `--trace`): one per kernel of a file
with several, named by the kernel, each checked before any work so that a bad path fails
before a tune or a simulation, not after it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tiledsl.cli.inputs import CLIError


def per_kernel(path: str, kernel: str) -> str:
    """The output path for one kernel of several: the kernel's name goes before the suffix
    (`out.json.gz` -> `out-matmul.json.gz`, `conv.png` -> `conv-matmul.png`, `out` ->
    `out-matmul`)."""
    p = Path(path)
    suffix = "".join(p.suffixes[-2:]) if p.suffix == ".gz" else p.suffix
    return str(p.with_name(f"{p.name[:len(p.name) - len(suffix)]}-{kernel}{suffix}"))


def check_output(option: str, path: str | Path) -> None:
    """Before any work: `path` (the file an option writes) can be written, i.e. its directory
    exists and is writable and it is not itself a directory."""
    if not str(path).strip():
        raise CLIError(f"{option} needs a file name, got {str(path)!r}")
    p = Path(path)
    parent = p.parent
    if p.is_dir():
        raise CLIError(f"{option} {path}: is a directory, not a file")
    if not parent.is_dir():
        raise CLIError(f"{option} {path}: no such directory {str(parent)!r}")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise CLIError(f"{option} {path}: not writable")


def check_plot(option: str, path: str | Path) -> None:
    """`check_output`, and that matplotlib is there and writes the file's format (from its
    suffix; none means PNG)."""
    check_output(option, path)
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise CLIError(f"{option} needs matplotlib: pip install matplotlib") from None
    suffix = Path(path).suffix.lower().lstrip(".")
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix and suffix not in formats:
        raise CLIError(f"{option} {path}: matplotlib writes no {suffix!r} files; use one of "
                       f"{', '.join('.' + f for f in sorted(formats))}")


def outputs(option: str, path: str | None, kernels: list[Any]) -> dict[str, str]:
    """kernel name -> the file `option` writes for it (`path` itself for a single kernel), each
    checked before any work."""
    if path is None:
        return {}
    check = check_plot if option == "--plot" else check_output
    check(option, path)
    out = {k.name: path if len(kernels) == 1 else per_kernel(path, k.name) for k in kernels}
    for each in out.values():
        check(option, each)
    return out
