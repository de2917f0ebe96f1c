"""What a GPU tune does when things go wrong, checked on the CPU: a CUDA error that leaves the
measuring process unusable, a measuring process that cannot start, a kernel file edited during
a tune, a compile worker that dies, arguments on their way to other processes, baselines that
fail."""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tiledsl as td
from autotune.isolate import Isolated, TrialFailed
from autotune.runners import host_args, load_kernel
from autotune.tuner import tune
from gpu_isolation_helpers import kernel_file
from support import example, kernel_of


def test_a_sticky_cuda_error_replaces_the_measuring_process() -> None:
    """After an illegal memory access every CUDA call in that process fails: the next trial
    must run in a new process, not fail with the old error."""
    iso = Isolated("gpu_isolation_helpers:sticky", (), timeout=60)
    try:
        first = iso.measure(td.Config((8,)))
        with pytest.raises(TrialFailed) as failed:
            iso.measure(td.Config((5,)))
        # what a trial's status shows (its first line) names the error and the replacement
        assert "illegal memory access was encountered (the measuring process cannot go on " \
               "after it and was replaced)" in str(failed.value).splitlines()[0]
        second = iso.measure(td.Config((8,)))
        assert second != first and iso.restarts == 1
        assert iso.time(td.Config((16,))) == second  # finalists are re-timed there too
    finally:
        iso.close()


def test_an_error_that_leaves_the_context_usable_keeps_the_process() -> None:
    iso = Isolated("gpu_isolation_helpers:sticky", (), timeout=60)
    try:
        first = iso.measure(td.Config((8,)))
        with pytest.raises(TrialFailed, match="out of resources"):
            iso.measure(td.Config((6,)))
        assert iso.measure(td.Config((8,))) == first and iso.restarts == 0
    finally:
        iso.close()


def test_a_measuring_process_that_cannot_set_up_fails_every_trial_without_restarting(
        tmp_path: Path) -> None:
    log = tmp_path / "setups.log"
    iso = Isolated("gpu_isolation_helpers:fails_setup", (str(log),), timeout=60)
    try:
        for _ in range(3):
            with pytest.raises(TrialFailed) as failed:
                iso.measure(td.Config((8,)))
            assert str(failed.value).splitlines()[0] == \
                "the measuring process failed to set up: BackendError: no GPU in this process"
    finally:
        iso.close()
    assert log.read_text() == "setup\n"  # one process started, not one per trial


def test_a_kernel_file_edited_since_the_tune_started_is_refused(tmp_path: Path) -> None:
    path = kernel_file(tmp_path)
    digest = load_kernel(str(path), "bump").source_digest
    assert load_kernel(str(path), "bump", digest).name == "bump"  # unchanged: accepted
    kernel_file(tmp_path, "y[tn] = x[tn] + 2")
    with pytest.raises(td.TileDSLError, match="changed since the tune started"):
        load_kernel(str(path), "bump", digest)


def test_a_file_without_the_kernel_is_a_clear_error(tmp_path: Path) -> None:
    path = kernel_file(tmp_path)
    with pytest.raises(td.BackendError, match="has no module-level tile kernel 'nope'"):
        load_kernel(str(path), "nope")


def test_a_tune_whose_kernel_file_changed_fails_its_trials_with_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The measuring process imports the kernel from its file: an edit made after the parent
    imported it would be measured and stored under the parent's kernel. (A numpy tune, its
    child spawned as on a GPU, or on a platform without fork.)"""
    import autotune.tuner
    monkeypatch.setattr(autotune.tuner, "fork_start", lambda: "spawn")
    path = kernel_file(tmp_path)
    kernel = load_kernel(str(path), "bump")
    x, y = np.ones(64, np.float32), np.zeros(64, np.float32)
    kernel_file(tmp_path, "y[tn] = x[tn] * 3")
    r = tune(kernel, [x, y], backend="numpy", isolate=True, trials=3, use_cache=False,
             storage=f"sqlite:///{tmp_path}/s.db")
    assert r.best is None and r.trials
    assert all("changed since the tune started" in t.status for t in r.trials)
    # Those trials say nothing of their configs: the study did not keep them, and the same tune
    # with the file as it was measures them.
    kernel_file(tmp_path)
    again = tune(kernel, [x, y], backend="numpy", isolate=True, trials=3, use_cache=False,
                 storage=f"sqlite:///{tmp_path}/s.db", finalists=0)
    assert again.best is not None and all(t.status == "ok" for t in again.trials)


def test_compile_workers_refuse_an_edited_kernel_file(tmp_path: Path) -> None:
    from autotune.precompile import compile_config
    path = kernel_file(tmp_path)
    digest = load_kernel(str(path), "bump").source_digest
    kernel_file(tmp_path, "y[tn] = x[tn] * 3")
    why, predicted = compile_config(str(path), "bump", [np.ones(8, np.float32)] * 2,
                                    {"block_sizes": [8]}, "aot", "sm_90", None, digest)
    assert why is not None and "changed since the tune started" in why and predicted is None


DIES_IN_A_WORKER = """
import multiprocessing
import os

if multiprocessing.parent_process() is not None:  # a compile worker: die as a crashing compiler
    os._exit(7)
"""


def test_a_compile_worker_that_dies_costs_its_compiles_not_the_tune(tmp_path: Path) -> None:
    from concurrent.futures import Future

    from autotune.precompile import MAX_RESTARTS, Precompiler
    path = tmp_path / "crash.py"
    path.write_text(DIES_IN_A_WORKER)
    pre = Precompiler(str(path), "crash", [np.ones(8, np.float32)], "aot", workers=1)

    def done(future: Future) -> None:
        deadline = time.monotonic() + 120
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.01)
    try:
        for i in range(MAX_RESTARTS + 1):
            config = td.Config((2 ** i,))
            pre.submit([config])
            done(pre.pending[config])
            assert pre.wait(config) is False  # lost with its worker: the measurement compiles
            assert pre.restarts == i + 1
        assert pre.pool is None  # it kept dying: nothing is compiled ahead any more
        pre.submit([td.Config((64,))], replace=True)
        assert not pre.pending and pre.wait(td.Config((64,))) is False
    finally:
        pre.close()


def test_a_broken_pool_is_replaced_when_the_next_hint_comes(tmp_path: Path) -> None:
    """The tuner's hints (submit) must not raise when the pool broke since the last one."""
    from concurrent.futures import BrokenExecutor

    from autotune.precompile import Precompiler
    path = tmp_path / "crash.py"
    path.write_text(DIES_IN_A_WORKER)
    pre = Precompiler(str(path), "crash", [np.ones(8, np.float32)], "aot", workers=1)
    try:
        first = td.Config((1,))
        pre.submit([first])
        with pytest.raises(BrokenExecutor):
            pre.pending[first].result(timeout=120)
        pre.submit([td.Config((2,))], replace=True)  # a new pool takes it
        assert pre.restarts == 1 and td.Config((2,)) in pre.pending
    finally:
        pre.close()


HANGS_IN_A_WORKER = """
import multiprocessing
import time

if multiprocessing.parent_process() is not None:  # a compile worker: hang as a stuck compiler
    time.sleep(600)
"""


def test_a_compile_that_hangs_is_left_to_the_measurement(tmp_path: Path) -> None:
    """Waiting for a compile worker is bounded: a hung compiler must not hang the tune (the
    measurement then compiles the config, under the measuring process's timeout)."""
    from autotune.precompile import Precompiler
    path = tmp_path / "hang.py"
    path.write_text(HANGS_IN_A_WORKER)
    pre = Precompiler(str(path), "hang", [np.ones(8, np.float32)], "aot", workers=1, timeout=1.0)
    assert pre.pool is not None
    try:
        config = td.Config((8,))
        pre.submit([config])
        deadline = time.monotonic() + 120
        while not pre.pending[config].running() and time.monotonic() < deadline:
            time.sleep(0.01)
        start = time.monotonic()
        assert pre.wait(config) is False
        assert time.monotonic() - start < 30
    finally:
        workers = list(pre.pool._processes.values())  # type: ignore[union-attr]
        pre.close()
        for worker in workers:
            worker.kill()  # the hung one: this process would wait for it at exit


def test_arguments_reach_other_processes_as_host_arrays_and_scalars() -> None:
    torch = pytest.importorskip("torch")
    import ml_dtypes
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).to(torch.bfloat16)
    a, s, f, n = host_args([t, np.float32(2.5), 1.5, np.ones(3, np.float16)])
    assert isinstance(a, np.ndarray) and a.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(a.astype(np.float32), np.arange(6).reshape(2, 3))
    assert s == np.float32(2.5) and type(s) is np.float32 and f == 1.5 and n.dtype == np.float16


def test_a_failing_baseline_is_left_out_with_a_warning(tmp_path: Path) -> None:
    x = example("softmax").make_inputs(np.random.default_rng(0), {"m": 8, "n": 16})[0]

    def broken() -> None:
        raise RuntimeError("cuBLAS status not supported")
    with pytest.warns(td.TileDSLWarning, match="baseline 'broken' failed.*cuBLAS status"):
        r = tune(kernel_of("softmax"), [x], backend="numpy", trials=2, use_cache=False,
                 storage=f"sqlite:///{tmp_path}/s.db", finalists=0,
                 baselines={"broken": broken, "NumPy": lambda: np.exp(x)})
    assert r.best is not None and list(r.baselines) == ["NumPy"]


def test_a_cupy_that_cannot_hold_the_inputs_gives_no_baseline(
        monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from autotune.baselines import file_baselines

    def asarray(a: np.ndarray) -> Any:
        raise TypeError(f"Unsupported dtype {a.dtype}")
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(asarray=asarray))
    mod = example("matmul")
    args = mod.make_inputs(np.random.default_rng(0))
    assert file_baselines(mod, mod.matmul, args, "triton") == {}
    assert "CuPy cannot hold its inputs: TypeError: Unsupported dtype" in capsys.readouterr().out


def _has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU")
def test_a_small_gpu_tune_end_to_end(tmp_path: Path) -> None:
    """The whole GPU path once, small: compile workers warming Triton's cache, the measuring
    process checking and timing, NumPy scalar arguments, the finalists, a CuPy-free baseline."""
    mod = example("axpby")
    x, y, alpha, beta = mod.make_inputs(np.random.default_rng(0), {"m": 256, "n": 512})
    args = [x, y, np.float32(alpha), np.float32(beta)]
    r = tune(mod.axpby, args, backend="triton", trials=3, rounds=2, use_cache=False,
             storage=f"sqlite:///{tmp_path}/s.db", baselines={"numpy on the host": lambda: None})
    assert not r.rejected, [t.status for t in r.trials]
    assert r.best_value is not None and r.best_value > 0 and r.unit == "ms"
    assert r.finalists and all(len(f.samples) == 2 for f in r.finalists)
    assert r.compiled_ahead is not None and "numpy on the host" in r.baselines
