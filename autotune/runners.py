"""Runners measure one config of one kernel on one set of arguments (lower is better).

- `spatial`: simulated cycles on a spatial architecture (deterministic).
- `numpy`: wall-clock median of the NumPy backend (the CPU baseline machine).
- `model`: an analytic GPU cost model (autotune/model.py: roofline, occupancy and waves from
  the compiled resource usage), ranking configs without a GPU.
- `triton`: CUDA-event timing on a GPU, cold L2, median; run in an isolated process.
Every runner also checks a candidate's numbers against the NumPy backend (`check`).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

from autotune.model import compiled_resources, predict
from autotune.timing import cuda_median_ms
from tiledsl import testing
from tiledsl.config import Config
from tiledsl.kernel import TileKernel


def _fresh(args: list[Any]) -> list[Any]:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


class Runner:
    unit = ""
    backend = ""
    noisy = False  # timings vary run to run: the tuner re-times its finalists (finalists.py)
    # measure() checks the numbers first, in the process that measures (an isolated child, so
    # that a check that hangs, e.g. a million programs on Triton's interpreter, fails one trial)
    self_checking = False

    def __init__(self, kernel: TileKernel, args: list[Any], arch: Any = None) -> None:
        self.kernel = kernel
        self.args = list(args)
        self.arch = arch
        self._reference: Any = None

    def outputs(self, config: Config) -> Any:
        """The kernel's outputs under `config` on this runner's backend (for the check)."""
        call = _fresh(self.args)
        out = self.kernel.run(*call, backend=self.backend, config=config,
                              **({} if self.arch is None else {"arch": self.arch}))
        return tuple(a for a in call if isinstance(a, np.ndarray)) if out is None else out

    def reference(self) -> Any:
        if self._reference is None:
            call = _fresh(self.args)
            out = self.kernel.run(*call, backend="numpy")
            self._reference = tuple(a for a in call if isinstance(a, np.ndarray)) \
                if out is None else out
        return self._reference

    def check(self, config: Config) -> str | None:
        """None if `config` computes the NumPy backend's numbers (within the dtype's tolerance)."""
        try:
            testing.assert_close(self.outputs(config), self.reference(), factor=4.0)
        except AssertionError as e:
            return f"wrong numbers: {e}"
        return None

    def measure(self, config: Config) -> float:
        """A candidate's value in the search (a self-checking runner checks its numbers first)."""
        if self.self_checking and (why := self.check(config)) is not None:
            raise ValueError(why)
        return self.time(config)

    def time(self, config: Config) -> float:
        """The value alone, for configs already measured (re-timing the finalists)."""
        raise NotImplementedError


class SpatialRunner(Runner):
    unit = "cycles"
    backend = "spatial"

    def time(self, config: Config) -> float:
        return self.kernel.simulate(*self.args, arch=self.arch, config=config).cycles


class NumpyRunner(Runner):
    unit = "ms"
    backend = "numpy"
    noisy = True
    repeats = 3

    def time(self, config: Config) -> float:
        times = []
        for _ in range(self.repeats):
            call = _fresh(self.args)
            start = time.perf_counter()
            self.kernel.run(*call, backend="numpy", config=config)
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)


class ModelRunner(Runner):
    """Predicted microseconds on an H100 from the compiled kernel (the cost model in
    autotune/model.py); its numbers are checked on the Triton interpreter."""

    unit = "us (model)"
    backend = "triton"
    self_checking = True

    def outputs(self, config: Config) -> Any:
        call = _fresh(self.args)
        out = self.kernel.run(*call, backend="triton-interpret", config=config)
        return tuple(a for a in call if isinstance(a, np.ndarray)) if out is None else out

    def time(self, config: Config) -> float:
        return predict(self.kernel, self.args, config,
                       compiled_resources(self.kernel, self.args, config))


class TritonRunner(Runner):
    """CUDA-event timing on the GPU (autotune/timing.py): warm-up, L2 flushed before each
    repeat, median."""

    unit = "ms"
    backend = "triton"
    noisy = True
    self_checking = True
    repeats = 20

    def __init__(self, kernel: TileKernel, args: list[Any], arch: Any = None) -> None:
        super().__init__(kernel, args, arch)
        import torch

        from lowering.backends.triton.interpret import to_torch
        self.torch = torch
        self.gpu_args = [to_torch(a).cuda() if isinstance(a, np.ndarray) else a for a in args]

    def outputs(self, config: Config) -> Any:
        from lowering.backends.triton.interpret import to_numpy
        call = [a.clone() if self.torch.is_tensor(a) else a for a in self.gpu_args]
        out = self.kernel.run(*call, backend="triton", config=config)
        if out is None:  # written in place: every array argument, as reference() returns them
            return tuple(to_numpy(a.cpu()) for a in call if self.torch.is_tensor(a))
        return tuple(to_numpy(o.cpu()) for o in (out if isinstance(out, tuple) else (out,)))

    def time(self, config: Config) -> float:
        return cuda_median_ms(lambda: self.kernel.run(*self.gpu_args, backend="triton",
                                                      config=config), repeats=self.repeats)


RUNNERS: dict[str, type[Runner]] = {"spatial": SpatialRunner, "numpy": NumpyRunner,
                                    "model": ModelRunner, "triton": TritonRunner}


def load_kernel(file: str, name: str) -> TileKernel:
    """A kernel from its file (what an isolated process imports)."""
    spec = importlib.util.spec_from_file_location(f"tiledsl_tuned_{abs(hash(file))}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    kernel = getattr(module, name)
    assert isinstance(kernel, TileKernel)
    return kernel


def from_file(file: str, name: str, args: list[Any], backend: str, arch: Any = None,
              check: bool = True) -> Runner:
    """The factory isolated processes call: `autotune.runners:from_file`."""
    runner = RUNNERS[backend](load_kernel(file, name), args, arch)
    runner.self_checking = runner.self_checking and check
    return runner
