"""The GPU session's scripts (benchmarks/gpu_session.sh and the benchmarks it runs), checked on
the CPU where they can be: time limits, reports that survive a failing part, what the model check
prices."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tiledsl as td
from support import pythonpath

ROOT = Path(__file__).resolve().parent.parent


def script(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    """benchmarks/<name>.py as a module; the cache folders it points the environment at, at
    import, are put back after the test."""
    for var in ("TRITON_CACHE_DIR", "TILEDSL_CACHE_DIR"):  # set by the script at import:
        monkeypatch.setenv(var, os.environ.get(var, ""))  # monkeypatch puts them back after
    monkeypatch.setenv("TILEDSL_TUNE_GPU_SCRATCH", str(tmp_path))
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}",
                                                  ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_model_check_prices_again_what_only_the_ir_priced(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A GPU tune prices a config no compile worker compiled from resources guessed from the
    IR: the check of the model against the measured times must price those from their
    compiled kernels, as it says it does."""
    from autotune.tuner import Trial
    tune_gpu = script("tune_gpu", monkeypatch, tmp_path)
    c = td.Config((16,))
    compiled, guessed, unpriced = (Trial(c, 1.0, "ok", 5.0, "compiled"),
                                   Trial(c, 2.0, "ok", 7.0, "ir"), Trial(c, 3.0, "ok"))
    failed = Trial(c, None, "wrong numbers", 4.0, "ir")
    assert tune_gpu.to_price([compiled, guessed, unpriced, failed]) == [guessed, unpriced]


def test_a_failing_kernel_case_keeps_the_others(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """gpu_kernels.py on a GPU: a case that fails (a launch error, say) is recorded, the others
    are timed and the report is saved after each; a case past the time limit is not started."""
    gpu_kernels = script("gpu_kernels", monkeypatch, tmp_path)
    cases = gpu_kernels.PARTS["rows"](True)[:3]

    class Workers:
        def __init__(self, arch: str, num_sms: int | None) -> None:
            assert (arch, num_sms) == ("sm_90", 132)

        def plan(self, cases: list) -> list:
            return [([], [])] * len(cases)

        def close(self) -> None:
            pass

    def time_case(case: Any, *rest: Any) -> dict:
        if case is cases[0]:
            raise RuntimeError("launch failed")
        monkeypatch.setattr(gpu_kernels.time, "monotonic", lambda: float("inf"))
        return {"case": case.name, "ms": 1.0}
    monkeypatch.setattr(gpu_kernels, "Workers", Workers)
    monkeypatch.setattr(gpu_kernels, "target", lambda gpu: ("sm_90", 132))
    monkeypatch.setattr(gpu_kernels, "time_case", time_case)
    report = gpu_kernels.Report("test", tmp_path / "r.json")
    saved: list[int] = []
    monkeypatch.setattr(report, "save", lambda: saved.append(len(report.data["results"])))
    opts = argparse.Namespace(ceilings=None, timeout=100, repeats=3)
    gpu_kernels.run_part(cases, opts, report, gpu=True)
    first, second, third = report.data["results"]
    assert first["error"] == "RuntimeError: launch failed"
    assert second == {"case": cases[1].name, "ms": 1.0}
    assert third == {"case": cases[2].name, "error": "not started: out of time"}
    assert saved[:3] == [1, 2, 3]


def test_the_candidates_are_the_default_then_one_per_distinct_estimate(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The model's favourites: configs it prices the same teach it nothing new, so one each;
    a variant of the default is timed when the space admits it."""
    gpu_kernels = script("gpu_kernels", monkeypatch, tmp_path)
    from support import example
    args = example("layer_norm").make_inputs(np.random.default_rng(0), {"m": 4096, "n": 4096},
                                             np.float16)
    space = example("layer_norm").layer_norm.config_space(*args, backend="triton")
    picked = gpu_kernels.favourites(space, 3, ((("num_warps", 8),), (("num_warps", 3),)))
    configs = [c for c, _ in picked]
    assert configs[0] == space.default() and len(set(configs)) == len(configs) == 5
    estimates = [round(e, 6) for _, e in picked[:4]]
    assert len(set(estimates)) == 4
    assert min(e for _, e in picked) == min(space.estimate(c) for c in space)
    assert configs[4] == space.default().replace(num_warps=8)  # 3 warps: not in the space


def test_the_finalists_benchmark_stops_starting_runs_when_out_of_time(tmp_path: Path) -> None:
    out = tmp_path / "finalists.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "finalists.py"), "--kernels", "softmax",
         "--runs", "5", "--trials", "2", "--rounds", "2", "--timeout", "1",
         "--dims", "m=8,n=16", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": pythonpath(ROOT / "tests")})
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["runs_done"] for r in rows] == [1, 1] and "out of time after 1 runs" in done.stdout
    assert all(r["regret_median"] is not None for r in rows)


FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case "$*" in *tune_gpu.py*) sleep 3 ;; esac
case "$*" in *"gpu_kernels.py gemm"*) echo "gemm went wrong"; exit 1 ;; esac
exit 0
"""


def gpu_session(tmp_path: Path, steps: list[str], **env: str) -> tuple[Any, list[str]]:
    """benchmarks/gpu_session.sh with a stand-in python that logs each call; the calls of the
    steps (benchmarks and pytest)."""
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    log = tmp_path / "calls.log"
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_session.sh"), *steps], capture_output=True,
        text=True, timeout=120, env={**os.environ, "PYTHON": str(python), "FAKE_LOG": str(log),
                                      "OUT": str(tmp_path), **env})
    calls = log.read_text().splitlines() if log.exists() else []
    return done, [c for c in calls if "benchmarks/" in c or "pytest" in c]


def test_the_gpu_session_shares_its_calls_budget_among_its_steps(tmp_path: Path) -> None:
    """One call of the device tool: each step runs within its weight's share of what is left of
    BUDGET (a killed step loses what it had not written); the benchmarks are told to stop in
    time to write their reports, and a failing step does not stop the next."""
    done, calls = gpu_session(tmp_path, ["ceilings", "gpu-tests", "gemm", "rows", "dispatch",
                                         "tune"], BUDGET="160", MIN_STEP="3")
    assert len(calls) == 6, done.stdout
    ceilings, tests, gemm, rows, dispatch, tune = calls
    assert "gpu_ceilings.py --out" in ceilings
    assert "-m pytest -m gpu" in tests and "tests/backends/triton/test_triton_gpu.py" in tests
    assert "gpu_kernels.py gemm --timeout" in gemm and "--ceilings" in gemm
    share = int(gemm.split("--timeout ")[1].split()[0]) + 20  # 3/11 of the ~150 s left
    assert 35 <= share <= 45, gemm
    assert "gpu_kernels.py rows" in rows and "call_overhead.py --gpu-only" in dispatch
    assert "tune_gpu.py --timeout" in tune
    assert "gemm went wrong" in done.stdout and "FAILED" in done.stdout
    assert "gemm went wrong" in (tmp_path / "session.log").read_text()
    assert done.returncode == 1


def test_the_gpu_session_skips_a_step_without_time_for_it(tmp_path: Path) -> None:
    done, calls = gpu_session(tmp_path, ["tune", "rows"], BUDGET="1", MIN_STEP="3")
    assert not calls and "tune: SKIPPED" in done.stdout and "rows: SKIPPED" in done.stdout
    assert "SKIPPED" in (tmp_path / "session.log").read_text() and done.returncode == 1


def test_the_gpu_session_refuses_an_unknown_step(tmp_path: Path) -> None:
    done, calls = gpu_session(tmp_path, ["gemm", "kernels"])
    assert done.returncode == 2 and "unknown step: kernels" in done.stdout and not calls
