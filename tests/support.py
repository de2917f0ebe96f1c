"""Helpers shared by the test modules: loading the example files, copying arguments."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT / "examples"
EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.py"))


@cache
def example(name: str) -> ModuleType:
    """Import examples/<name>.py by path (examples/ is not a package); once per session."""
    path = EXAMPLES_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"tiledsl_example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pythonpath(*paths: Path) -> str:
    """PYTHONPATH for a child process: `paths`, then the caller's own (which may hold an install
    made with `pip install --target`)."""
    import os
    return os.pathsep.join([*map(str, paths), *filter(None, [os.environ.get("PYTHONPATH")])])


def kernel_of(name: str) -> Any:
    return getattr(example(name), name)


def fresh(args: tuple) -> tuple:
    """Copies of array arguments, for kernels that write into them."""
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def under_configs(kernel: Any, args: tuple, backend: str, samples: int = 2,
                  seed: int = 0) -> Any:
    """(config, outputs) of `kernel` on `backend` under the space's default config and
    `samples` sampled ones; skips when the backend's libraries are missing."""
    import pytest
    if backend == "triton-interpret":
        pytest.importorskip("torch")
        pytest.importorskip("triton")
    space = kernel.config_space(*args, backend=backend)
    for config in (space.default(), *space.sample(samples, seed=seed)):
        yield config, kernel.run(*args, backend=backend, config=config)
