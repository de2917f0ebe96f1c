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
from typing import Any

import numpy as np

from autotune.isolate import TrialFailed
from autotune.model import compiled_resources, predict
from autotune.timing import cuda_times_ms
from tiledsl.frontend import static_args
from tiledsl import testing
from tiledsl.runtime import returns
from tiledsl.runtime.config import Config
from tiledsl.errors import BackendError, TileDSLError
from tiledsl.runtime.kernel import TileKernel


def _fresh(args: list[Any]) -> list[Any]:
    return static_args.map_arrays(args, lambda a: a.copy() if isinstance(a, np.ndarray) else a)


def _written(call: list[Any]) -> tuple:
    """What a kernel that returns nothing computed: its array arguments (0-d arrays are
    scalars), those in lists of arrays included."""
    return tuple(a for a in static_args.flatten_arrays(call)
                 if isinstance(a, np.ndarray) and a.ndim > 0)


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
        return _written(call) if out is None else tuple(returns.tensors(out))

    def reference(self) -> Any:
        if self._reference is None:
            call = _fresh(self.args)
            out = self.kernel.run(*call, backend="numpy")
            self._reference = _written(call) if out is None else tuple(returns.tensors(out))
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
            raise TrialFailed(why)
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
        return _written(call) if out is None else out

    def time(self, config: Config) -> float:
        return predict(self.kernel, self.args, config,
                       compiled_resources(self.kernel, self.args, config))


class TritonRunner(Runner):
    """CUDA-event timing on the GPU (autotune/timing.py): warm-up, L2 flushed before each
    repeat, median. The arrays go to the GPU once, when first needed (the tuner's own runner,
    in the parent process, never launches and so never touches the GPU)."""

    unit = "ms"
    backend = "triton"
    noisy = True
    self_checking = True
    repeats = 20
    device = "cuda"  # where the arrays go (the CPU tests put torch's CPU in its place)

    def __init__(self, kernel: TileKernel, args: list[Any], arch: Any = None) -> None:
        super().__init__(kernel, args, arch)
        import torch
        self.torch = torch
        self._gpu_args: list[Any] | None = None
        # The arguments the kernel writes in place, restored before every timed call (a kernel
        # that accumulates into one would otherwise time other values on every repeat).
        names, _ = static_args.splice(list(kernel.signature.parameters), self.args)
        self.written = [names.index(n) for n in kernel.written_args(*self.args)]  # spliced
        self._pristine: dict[int, Any] = {}

    @property
    def gpu_args(self) -> list[Any]:
        if self._gpu_args is None:
            self._gpu_args = to_device(self.args, self.device)
            flat = static_args.flatten_arrays(self._gpu_args)
            self._pristine = {i: flat[i].clone() for i in self.written}
        return self._gpu_args

    def outputs(self, config: Config) -> Any:
        from lowering.backends.triton.interpret import to_numpy
        call = static_args.map_arrays(
            self.gpu_args, lambda a: a.clone() if self.torch.is_tensor(a) else a)
        out = self.kernel.run(*call, backend="triton", config=config)
        if out is None:  # written in place: every array argument, as reference() returns them
            return tuple(to_numpy(a.cpu()) for a in static_args.flatten_arrays(call)
                         if self.torch.is_tensor(a))
        return tuple(to_numpy(o.cpu()) for o in returns.tensors(out))

    def restore(self) -> None:
        """Put the values the runner was given back into the arguments the kernel writes."""
        args = static_args.flatten_arrays(self.gpu_args)
        for i in self.written:
            args[i].copy_(self._pristine[i])

    def time(self, config: Config) -> float:
        return float(statistics.median(self.times(config)))

    def times(self, config: Config) -> list[float]:
        """Each repeat's time (for a spread), as `time` takes their median."""
        args = self.gpu_args
        return cuda_times_ms(lambda: self.kernel.run(*args, backend="triton", config=config),
                             repeats=self.repeats, setup=self.restore if self.written else None)

    def healthy(self) -> bool:
        """False once the CUDA context is unusable: after a sticky error (an illegal memory
        access, a trap) every later CUDA call fails with it, so the process must be replaced."""
        try:
            self.torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - whatever the error, the context cannot be trusted
            return False
        return True


def to_device(args: list[Any], device: str = "cuda") -> list[Any]:
    """NumPy arrays as copies in torch tensors on `device` (bfloat16 included, strides kept);
    scalars, 0-d arrays among them, stay numbers, as the kernel's signature has them."""
    from lowering.backends.triton.interpret import to_torch
    return static_args.map_arrays(args, lambda a: a[()] if isinstance(a, np.ndarray) and
                                  a.ndim == 0 else to_torch(a).to(device, copy=True)
                                  if isinstance(a, np.ndarray) else a)


def host_args(args: list[Any]) -> list[Any]:
    """Arguments as the processes a tune starts receive them: NumPy arrays (GPU arrays, torch
    and CuPy, copied to the host) and scalars."""
    def one(a: Any) -> Any:
        if isinstance(a, (np.ndarray, np.generic)) or not hasattr(a, "shape"):
            return a
        if type(a).__module__.startswith("torch"):
            from lowering.backends.triton.interpret import to_numpy
            return to_numpy(a.detach().cpu())
        if type(a).__module__.startswith("cupy"):
            return a.get()
        return np.asarray(a)
    return static_args.map_arrays(args, one)


RUNNERS: dict[str, type[Runner]] = {"spatial": SpatialRunner, "numpy": NumpyRunner,
                                    "model": ModelRunner, "triton": TritonRunner}


def load_kernel(file: str, name: str, source: str | None = None) -> TileKernel:
    """A kernel from its file (what an isolated process imports). With `source` (the
    `source_digest` of the kernel the parent tunes), a kernel whose source differs (the file was
    edited since the parent imported it) is refused: its measurements would be stored under the
    parent's kernel."""
    spec = importlib.util.spec_from_file_location(f"tiledsl_tuned_{abs(hash(file))}", file)
    if spec is None or spec.loader is None:
        raise BackendError(f"cannot import kernel '{name}' from {file}", kernel=name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    kernel = getattr(module, name, None)
    if not isinstance(kernel, TileKernel):
        raise BackendError(f"{file} has no module-level tile kernel '{name}' (tuning on this "
                           "backend imports the kernel from its file in another process; "
                           "define it at a module's top level, or tune with isolate=False)",
                           kernel=name)
    if source is not None and kernel.source_digest != source:
        # the reason first: a trial's status keeps the start of the message
        raise TileDSLError(f"its source changed since the tune started, or a global or "
                           f"closure variable it reads differs from the tuning process's, so its "
                           f"numbers would be stored under another kernel; start the tune again "
                           f"({file}). A global set "
                           "at run time is not what this process, which imports the file, "
                           "sees: set it in the file, or tune with isolate=False",
                           kernel=name)
    return kernel


def from_file(file: str, name: str, args: list[Any], backend: str, arch: Any = None,
              check: bool = True, source: str | None = None) -> Runner:
    """The factory isolated processes call: `autotune.runners:from_file` (`source`: see
    `load_kernel`)."""
    return in_child(load_kernel(file, name, source), args, backend, arch, check)


def in_child(kernel: TileKernel, args: list[Any], backend: str, arch: Any = None,
             check: bool = True) -> Runner:
    """The runner a measuring process serves (a forked child calls it with the parent's
    kernel): it checks each candidate's numbers where it measures them, if `check`, so that a
    check that crashes or hangs fails one trial."""
    runner = RUNNERS[backend](kernel, args, arch)
    runner.self_checking = check
    return runner
