"""The GPU runner's logic on the CPU: torch CPU tensors stand in for CUDA ones, the NumPy
backend (run on zero-copy views of them) for the Triton launch, and the CPU clock for CUDA
events, so what the runner does with a kernel's arguments, outputs and timing is checked on
machines without a GPU."""

from __future__ import annotations

import time
from typing import Any

import ml_dtypes
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


class FakeLaunch:
    """A kernel whose `run(backend="triton")` runs the NumPy backend on views of torch CPU
    tensors (so in-place writes land in the tensors, as on a GPU); everything else is the
    kernel's. `seen` records the arguments' values at each launch."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.seen: list[list[np.ndarray]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kernel, name)

    def run(self, *call: Any, backend: str, config: td.Config | None = None) -> Any:
        from lowering.backends.triton.interpret import to_numpy, to_torch
        if backend != "triton":
            return self.kernel.run(*call, backend=backend, config=config)
        for a in call:
            assert not isinstance(a, np.ndarray), "an array was not moved to the device"
        views = [to_numpy(a) if torch.is_tensor(a) else a for a in call]
        self.seen.append([v.copy() for v in views if isinstance(v, np.ndarray)])
        out = self.kernel.run(*views, backend="numpy", config=config)
        if isinstance(out, tuple):
            return tuple(map(to_torch, out))
        return None if out is None else to_torch(out)


def on_fake_gpu(kernel: Any, args: list[Any]) -> TritonRunner:
    """A TritonRunner whose "GPU" is torch's CPU and whose launches run the NumPy backend."""
    runner = TritonRunner(FakeLaunch(kernel), list(args))
    runner.device = "cpu"
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


@td.tile_kernel
def accumulate(x, y):
    """Adds its first argument into its second, in place."""
    (n,) = x.shape
    for tn in td.tile(n):
        y[tn] = y[tn] + x[tn]


class FakeEvent:
    """torch.cuda.Event on the CPU clock."""

    log: list[str] | None = None

    def __init__(self, enable_timing: bool = False) -> None:
        self.at = 0.0

    def record(self) -> None:
        self.at = time.perf_counter()
        if FakeEvent.log is not None:
            FakeEvent.log.append("event")

    def elapsed_time(self, end: "FakeEvent") -> float:
        return (end.at - self.at) * 1e3


class FakeFlush:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def zero_(self) -> None:
        self.log.append("flush")


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """CUDA events, synchronisation and the L2 flush buffer stood in for on the CPU; returns the
    log of flushes and event records."""
    from autotune import timing
    log: list[str] = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append("hold"))
    monkeypatch.setattr(FakeEvent, "log", log)
    monkeypatch.setitem(timing._flush, 0, FakeFlush(log))
    return log


def test_setup_runs_before_the_flush_outside_the_timed_region(fake_cuda: list[str]) -> None:
    from autotune.timing import cuda_median_ms
    ms = cuda_median_ms(lambda: fake_cuda.append("fn"), repeats=2, warmup=1,
                        setup=lambda: fake_cuda.append("setup"))
    assert ms >= 0
    assert fake_cuda == ["setup", "fn"] + ["setup", "flush", "hold", "event", "fn", "event"] * 2


def test_a_kernel_accumulating_into_an_argument_is_timed_on_the_values_it_was_given(
        fake_cuda: list[str]) -> None:
    """Every timed launch (warm-ups included) starts from the runner's arguments: without the
    restore, `y` would grow by `x` on every repeat."""
    x = np.ones(64, np.float32)
    y = np.arange(64, dtype=np.float32)
    runner = on_fake_gpu(accumulate, [x, y])
    assert runner.time(accumulate.config_space(x, y).default()) >= 0
    launches = runner.kernel.seen
    assert len(launches) == 3 + runner.repeats
    for _, y_seen in launches:
        np.testing.assert_array_equal(y_seen, y)
    assert fake_cuda.count("flush") == runner.repeats


def test_a_kernel_that_writes_nothing_in_place_is_timed_without_copies(
        fake_cuda: list[str]) -> None:
    args = list(example("softmax").make_inputs(np.random.default_rng(1)))
    k = kernel_of("softmax")
    runner = on_fake_gpu(k, args)
    assert runner.written == [] and runner.time(k.config_space(*args).default()) >= 0


def test_numpy_scalars_and_0d_arrays_stay_scalars_on_the_gpu() -> None:
    """A kernel's scalar parameters: NumPy scalars, and the 0-d arrays they become on their way
    to the measuring process, are launched as numbers, not as 0-d tensors (which would trace
    as tensors: every config rejected)."""
    mod = example("axpby")
    x, y, alpha, beta = mod.make_inputs(np.random.default_rng(0))
    for a, b in [(np.float32(alpha), np.float32(beta)),
                 (np.asarray(np.float32(alpha)), np.asarray(beta, dtype=np.float32))]:
        runner = on_fake_gpu(mod.axpby, [x, y, a, b])
        assert not any(torch.is_tensor(v) for v in runner.gpu_args[2:])
        assert runner.check(mod.axpby.config_space(x, y, a, b).default()) is None


def test_bfloat16_and_strided_arrays_keep_their_dtype_and_layout_on_the_device() -> None:
    from autotune.runners import to_device
    a = np.arange(12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16).T
    (t,) = to_device([a], "cpu")
    assert t.dtype == torch.bfloat16 and t.stride() == (1, 4)
    np.testing.assert_array_equal(t.float().numpy(), a.astype(np.float32))
    t.zero_()  # a copy: writing on the device leaves the caller's array alone
    assert a.astype(np.float32).sum() == 66


def test_the_tuners_own_runner_does_not_touch_the_gpu() -> None:
    """The tuner builds a runner in its own process for its unit and flags only; the arrays go
    to the GPU in the measuring process (on a machine without CUDA, building it must work)."""
    a, b = example("matmul").make_inputs(np.random.default_rng(0))
    runner = TritonRunner(kernel_of("matmul"), [a, b])
    assert runner._gpu_args is None and runner.unit == "ms"


def test_a_dead_cuda_context_makes_the_runner_unhealthy(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = on_fake_gpu(shift_into, [np.ones(4, np.float32), np.ones(4, np.float32)])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)
    assert runner.healthy()

    def sticky(*args: Any) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    monkeypatch.setattr(torch.cuda, "synchronize", sticky)
    assert not runner.healthy()


@td.tile_kernel
def scale_into(x, y, alpha):
    """Writes its second argument in place; `alpha` is a scalar."""
    (n,) = x.shape
    for tn in td.tile(n):
        y[tn] = x[tn] * alpha


def test_an_in_place_kernel_with_a_0d_scalar_is_checked_on_its_arrays() -> None:
    """A 0-d array is a scalar argument, not an array the kernel writes: the reference must not
    count it among the outputs (the GPU passes it as a number)."""
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(50).astype(np.float32), np.zeros(50, np.float32),
            np.asarray(np.float32(2.0))]
    runner = on_fake_gpu(scale_into, args)
    assert runner.check(scale_into.config_space(*args).default()) is None
    assert len(runner.reference()) == 2
