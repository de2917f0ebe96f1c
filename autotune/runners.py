"""Runners measure one config of one kernel on one set of arguments (lower is better).

- `spatial`: simulated cycles on a spatial architecture (deterministic).
- `numpy`: wall-clock median of the NumPy backend (the CPU baseline machine).
- `model`: an analytic GPU cost model (roofline, occupancy and waves from the compiled
  resource usage), ranking configs without a GPU.
- `triton`: CUDA-event timing on a GPU, cold L2, median; run in an isolated process.
Every runner also checks a candidate's numbers against the NumPy backend (`check`).
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

from autotune.timing import cuda_median_ms
from tiledsl import testing
from tiledsl.config import Config
from tiledsl.ir.core import walk
from tiledsl.ir.types import TensorType, TileType
from tiledsl.kernel import TileKernel


def _fresh(args: list[Any]) -> list[Any]:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


class Runner:
    unit = ""
    backend = ""
    noisy = False  # timings vary run to run: the tuner re-times its finalists (finalists.py)

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
        """A candidate's value in the search (the triton runner checks its numbers first)."""
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


# An H100 SXM, as published by NVIDIA (dense): used by the model runner.
H100 = {"sms": 132, "tflops": {"f16": 989.0, "bf16": 989.0, "f32": 67.0, "i8": 1979.0,
                               "f64": 67.0},
        "hbm_gbps": 3350.0, "regs_per_sm": 65536, "smem_per_sm": 228 * 1024,
        "max_warps_per_sm": 64, "launch_us": 3.0}


class ModelRunner(Runner):
    """Predicted microseconds on an H100 from the compiled kernel: the roofline of its tile
    traffic and FLOPs, derated by how many programs fit on an SM (registers, shared memory,
    warps) and by the last partial wave; spills add their local-memory traffic."""

    unit = "us (model)"
    backend = "triton"

    def outputs(self, config: Config) -> Any:
        call = _fresh(self.args)
        out = self.kernel.run(*call, backend="triton-interpret", config=config)
        return tuple(a for a in call if isinstance(a, np.ndarray)) if out is None else out

    def time(self, config: Config) -> float:
        reports = self.kernel.compile(*self.args, config=config, arch="sm_90")
        t = self.kernel.traced(*self.args).lowered
        blocks = dict(zip(t.symbols, config.block_sizes))
        flops, traffic, dtype, programs = 0.0, 0.0, "f32", 1
        for op in walk(t.body):
            if op.name == "grid":
                programs = math.prod(-(-r.type.extent // (blocks.get(r.type.block, r.type.block)
                                                         if isinstance(r.type.block, str) else
                                                         r.type.block))
                                     for r in op.regions[0].args)  # type: ignore[union-attr]
        trips = _trip_counts(t, blocks)
        for op in walk(t.body):
            mult = trips.get(id(op), 1)
            if op.name == "dot":
                a, b = (o.type for o in op.operands)
                assert isinstance(a, TileType) and isinstance(b, TileType)
                dims = [blocks.get(d, d) if isinstance(d, str) else d for d in (*a.shape, b.shape[1])]
                flops += 2.0 * dims[0] * dims[1] * dims[2] * mult * programs
                dtype = a.dtype.short
            elif op.name in ("load", "store"):
                tt = op.result.type if op.name == "load" else op.operands[-1].type
                tensor = op.operands[0].type
                assert isinstance(tt, TileType) and isinstance(tensor, TensorType)
                elems = math.prod(blocks.get(d, d) if isinstance(d, str) else d for d in tt.shape)
                traffic += elems * tensor.dtype.bits / 8 * mult * programs
        # L2 catches re-reads of shared operands; grouped ordering helps it (a rough factor).
        traffic /= 4.0 if config.get("group_m", 1) > 1 else 2.0
        gpu = H100
        threads = 32 * max(r.num_warps for r in reports)
        regs = max(r.registers for r in reports)
        smem = max(r.shared_bytes + r.static_shared_bytes for r in reports)
        per_sm = min(gpu["regs_per_sm"] // max(1, regs * threads),
                     gpu["smem_per_sm"] // max(1, smem) if smem else 32,
                     gpu["max_warps_per_sm"] * 32 // threads) or 1
        waves = programs / (gpu["sms"] * per_sm)
        quantization = math.ceil(waves) / waves if waves > 0 else 1.0
        spill = sum(r.spill_bytes for r in reports) * threads * programs
        t_compute = flops / (gpu["tflops"].get(dtype, 67.0) * 1e12)
        t_memory = (traffic + 2 * spill) / (gpu["hbm_gbps"] * 1e9)
        occupancy = min(1.0, per_sm * threads / 256)  # latency hiding needs ~8 warps per SM
        return (max(t_compute, t_memory) * quantization / max(occupancy, 0.25)) * 1e6 + \
            gpu["launch_us"]


def _trip_counts(fn: Any, blocks: dict[str, int]) -> dict[int, int]:
    """How many times each op runs per program (the product of its enclosing loop trips)."""
    out: dict[int, int] = {}

    def visit(block: Any, mult: int) -> None:
        for op in block.ops:
            out[id(op)] = mult
            if op.name == "for":
                r = op.regions[0].args[0].type
                b = blocks.get(r.block, r.block) if isinstance(r.block, str) else r.block
                visit(op.regions[0], mult * -(-r.extent // b))
            elif op.name == "grid":
                visit(op.regions[0], mult)
    visit(fn.body, 1)
    return out


class TritonRunner(Runner):
    """CUDA-event timing on the GPU (autotune/timing.py): warm-up, L2 flushed before each
    repeat, median."""

    unit = "ms"
    backend = "triton"
    noisy = True
    repeats = 20

    def __init__(self, kernel: TileKernel, args: list[Any], arch: Any = None) -> None:
        super().__init__(kernel, args, arch)
        import torch

        from lowering.backends.triton.interpret import to_torch
        self.torch = torch
        self.gpu_args = [to_torch(a).cuda() if isinstance(a, np.ndarray) else a for a in args]

    def outputs(self, config: Config) -> Any:
        from lowering.backends.triton.interpret import to_numpy
        call = [a.clone() if hasattr(a, "clone") else a for a in self.gpu_args]
        out = self.kernel.run(*call, backend="triton", config=config)
        outs = out if isinstance(out, tuple) else (call[0],) if out is None else (out,)
        return tuple(to_numpy(o.cpu()) for o in outs)

    def measure(self, config: Config) -> float:
        why = self.check(config)
        if why is not None:
            raise ValueError(why)
        return self.time(config)

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


def from_file(file: str, name: str, args: list[Any], backend: str, arch: Any = None) -> Runner:
    """The factory isolated processes call: `autotune.runners:from_file`."""
    return RUNNERS[backend](load_kernel(file, name), args, arch)
