"""The functions a kernel file gives the `tiledsl` command, per kernel.

A file may hold several kernels. For kernel `k`, the command looks up

- `make_inputs_k(rng)`, else `make_inputs(rng)`: the arguments of `k` (for every kernel of
  the file; the arguments are checked against `k`'s parameters before anything runs);
- `reference_k(*args)`, else `reference(*args)`: what `k` computes, in float64 NumPy;
- `baseline_k(xp, *args)`, else `baseline(xp, *args)`: the same with the array module `xp`.

A file's plain `reference` and `baseline` describe one kernel: the file's only kernel, or the
kernel named like the file (`softmax` in softmax.py). Another kernel of the file needs its own
`reference_<kernel>`, else `tiledsl run` runs it unchecked and says so, rather than comparing
it with another kernel's reference.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from tiledsl.runtime.kernel import TileKernel

HELP = """\
A kernel file defines @td.tile_kernel functions and, for each kernel K, optionally:
  make_inputs_K(rng, dims, dtype)  its arguments (else make_inputs(...), shared by all kernels)
  reference_K(*args)               what K computes, in float64 NumPy (else reference(...))
  baseline_K(xp, *args)            the same written with the array module xp (else baseline(...))
  DIMS                             the problem sizes make_inputs takes by default ({"m": 128})
The plain reference() and baseline() belong to the file's only kernel, or to the kernel named
like the file; other kernels need their own reference_K. FILE::K selects kernel K of FILE."""


def file_kernels(module: ModuleType) -> list[TileKernel]:
    """Every tile kernel the file's module defines or imports."""
    return [v for v in vars(module).values() if isinstance(v, TileKernel)]


def _plain_applies(module: ModuleType, kernel: TileKernel) -> bool:
    """Whether the file's plain `reference`/`baseline` describe `kernel`."""
    stem = Path(str(getattr(module, "__file__", ""))).stem
    return len(file_kernels(module)) == 1 or kernel.name == stem


Hook = tuple[str, Callable[..., Any]]  # (its name in the file, the function)


def hook(module: ModuleType, kernel: TileKernel, what: str) -> Hook | None:
    """(its name, the function) of the file's `what` ("make_inputs", "reference" or
    "baseline") for `kernel`, or None if the file has none for it (see the module docstring)."""
    own = getattr(module, f"{what}_{kernel.name}", None)
    if callable(own):
        return f"{what}_{kernel.name}", own
    plain = getattr(module, what, None)
    if callable(plain) and (what == "make_inputs" or _plain_applies(module, kernel)):
        return what, plain
    return None


def missing(module: ModuleType, kernel: TileKernel, what: str) -> str:
    """Why the file has no `what` for `kernel`, and what to write."""
    own = f"{what}_{kernel.name}"
    if callable(getattr(module, what, None)):
        stem = Path(str(module.__file__)).stem
        return (f"the file's {what}() belongs to a file's only kernel or to the kernel named "
                f"like the file ('{stem}'); define {own}(...) for '{kernel.name}' "
                f"(`{own} = {what}` if it computes the same)")
    return f"the file defines neither {own}(...) nor {what}(...)"
