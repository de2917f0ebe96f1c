"""The GPU runner's logic on the CPU: torch CPU tensors stand in for CUDA ones, and the NumPy
backend (run on zero-copy views of them) for the Triton launch, so what the runner does with a
kernel's outputs is checked on machines without a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tiledsl as td
from autotune.runners import NumpyRunner, TritonRunner
from support import example, kernel_of

torch = pytest.importorskip("torch")


@td.tile_kernel
def shift_into(x, y):
    """Writes its second argument in place and reads the first."""
    (n,) = x.shape
    for tn in td.tile(n):
        y[tn] = x[tn] + 1


@td.tile_kernel
def double_both(x, y):
    """Writes both arguments in place."""
    (n,) = x.shape
    for tn in td.tile(n):
        x[tn] = x[tn] * 2
        y[tn] = y[tn] - x[tn]


def on_fake_gpu(kernel: Any, args: list[Any]) -> TritonRunner:
    """A TritonRunner whose "GPU" arrays are torch CPU tensors and whose launches run the NumPy
    backend on views of them (so in-place writes land in the tensors, as on a GPU)."""
    from lowering.backends.triton.interpret import to_numpy, to_torch

    class Launcher:
        def run(self, *call: Any, backend: str, config: td.Config) -> Any:
            assert backend == "triton"
            out = kernel.run(*[to_numpy(a) if torch.is_tensor(a) else a for a in call],
                             backend="numpy", config=config)
            if isinstance(out, tuple):
                return tuple(map(to_torch, out))
            return None if out is None else to_torch(out)

    runner = TritonRunner.__new__(TritonRunner)
    runner.kernel, runner.args, runner.arch, runner.torch = Launcher(), list(args), None, torch
    runner.gpu_args = [to_torch(a.copy()) if isinstance(a, np.ndarray) else a for a in args]
    runner._reference = NumpyRunner(kernel, args).reference()
    return runner


@pytest.mark.parametrize("kernel", [shift_into, double_both])
def test_in_place_kernels_are_checked_on_every_array_argument(kernel: Any) -> None:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(300).astype(np.float32) for _ in range(2)]
    runner = on_fake_gpu(kernel, args)
    config = kernel.config_space(*args).default()
    assert len(runner.outputs(config)) == 2
    assert runner.check(config) is None
    # every check starts from the runner's own arguments, which no check writes
    np.testing.assert_array_equal(runner.gpu_args[0].numpy(), args[0])
    np.testing.assert_array_equal(runner.gpu_args[1].numpy(), args[1])


def test_wrong_in_place_numbers_are_caught() -> None:
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(300).astype(np.float32) for _ in range(2)]
    runner = on_fake_gpu(shift_into, args)
    runner._reference = (args[0], args[1] + 2)  # not what the kernel computes
    assert "wrong numbers" in (runner.check(shift_into.config_space(*args).default()) or "")


def test_returned_outputs_are_checked() -> None:
    args = list(example("softmax").make_inputs(np.random.default_rng(1)))
    k = kernel_of("softmax")
    runner = on_fake_gpu(k, args)
    assert runner.check(k.config_space(*args).default()) is None
