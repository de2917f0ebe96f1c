"""The GPU session's scripts (benchmarks/gpu_session.sh and the benchmarks it runs), checked on
the CPU where they can be: time limits, reports that survive a failing part, what the model check
prices."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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
    """gpu_kernels.py on a GPU: the ceilings or one case failing (a dtype CuPy lacks, a launch
    error) is recorded, and the other cases are timed and saved as they finish."""
    gpu_kernels = script("gpu_kernels", monkeypatch, tmp_path)

    def ceilings(repeats: int) -> dict:
        raise NotImplementedError("CuPy does not support bfloat16 yet")

    def time_case(case: dict, repeats: int, ceil: dict) -> dict:
        if case["case"] == "first":
            raise RuntimeError("launch failed")
        return {"case": case["case"], "ms": 1.0}
    monkeypatch.setattr(gpu_kernels, "ceilings", ceilings)
    monkeypatch.setattr(gpu_kernels, "time_case", time_case)
    monkeypatch.setattr(gpu_kernels, "cases", lambda quick: [{"case": "first"},
                                                             {"case": "second"}])
    report: dict[str, Any] = {}
    saved: list[int] = []
    gpu_kernels.on_gpu(True, 3, report, lambda: saved.append(len(report["results"])))
    assert "bfloat16" in report["ceilings"]["error"]
    assert report["results"] == [{"case": "first", "error": "RuntimeError: launch failed"},
                                 {"case": "second", "ms": 1.0}]
    assert saved == [1, 2]


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
case "$*" in *gpu_kernels.py*) exit 1 ;; esac
exit 0
"""


def gpu_session(tmp_path: Path, steps: list[str], **env: str) -> tuple[Any, list[str]]:
    """benchmarks/gpu_session.sh with a stand-in python that logs each call; the benchmarks it
    was called for."""
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    log = tmp_path / "calls.log"
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_session.sh"), *steps], capture_output=True,
        text=True, timeout=120, env={**os.environ, "PYTHON": str(python), "FAKE_LOG": str(log),
                                      "OUT": str(tmp_path), **env})
    return done, [line for line in log.read_text().splitlines() if "benchmarks/" in line]


def test_the_gpu_session_shares_its_calls_budget_among_its_steps(tmp_path: Path) -> None:
    """Each step runs within its share of what is left of BUDGET (the device tool stops a call
    at 10 minutes, and what a killed step had not written is lost): the tunes and the finalists
    are told to stop searching in time to write their reports, and a failing step does not stop
    the next."""
    done, calls = gpu_session(tmp_path, ["tune", "kernels", "tune-noprune", "finalists"],
                              BUDGET="20", STEP_TIMEOUT="8", MIN_STEP="3")
    assert len(calls) == 4, done.stdout
    tune, kernels, noprune, finalists = calls
    assert "tune_gpu.py --timeout 2 " in tune  # a quarter of 20 s, halved for the report
    assert "gpu_kernels.py" in kernels  # fails, and the next steps run
    assert "--prune 0 --timeout 4 " in noprune  # half of the 16 or 17 s left, at most 8
    assert "finalists.py" in finalists and "--timeout 4 " in finalists
    assert "kernels (at most 5 s)" in done.stdout and "FAILED" in done.stdout
    assert done.returncode == 1


def test_the_gpu_session_skips_a_step_without_time_for_it(tmp_path: Path) -> None:
    done, calls = gpu_session(tmp_path, ["tune", "finalists"], BUDGET="1", MIN_STEP="3")
    assert not calls and "tune: SKIPPED" in done.stdout and "finalists: SKIPPED" in done.stdout
    assert "skipped" in (tmp_path / "tune.log").read_text() and done.returncode == 1
