"""CPU tunes measure their candidates in a worker process (autotune/isolate.py): a candidate
that crashes or hangs fails its own trial, with its reason, and the tune goes on; the tune's
`timeout` stops a trial in flight."""

from __future__ import annotations

import faulthandler
import os
import signal
import time
from typing import Any

import numpy as np
import pytest

import tiledsl as td
from autotune.runners import NumpyRunner, SpatialRunner
from autotune.tuner import analytic_candidates, search_space, tune
from support import example, kernel_of

RUNNER = {"numpy": NumpyRunner, "spatial": SpatialRunner}


def vector_add_inputs() -> list:
    return list(example("vector_add").make_inputs(np.random.default_rng(0), {"n": 300}))


def tried_first(backend: str) -> list[td.Config]:
    """The configs a tune of vector_add tries first, in order (the default first)."""
    space = kernel_of("vector_add").config_space(*vector_add_inputs(), backend=backend)
    return [space.make(p) for p in analytic_candidates(space, search_space(space))]


def misbehave(monkeypatch: pytest.MonkeyPatch, backend: str, crashes: td.Config | None,
              hangs: td.Config) -> None:
    """The backend's runner crashes (SIGSEGV) on config `crashes` and hangs on `hangs`; in the
    tuner's own process it refuses to measure at all."""
    runner = RUNNER[backend]
    tuner, timed = os.getpid(), runner.time

    def time_(self: Any, config: td.Config) -> float:
        assert os.getpid() != tuner, "a candidate was measured in the tuner's own process"
        if config == crashes:
            faulthandler.disable()  # (pytest's: it would print the crash's traceback)
            os.kill(os.getpid(), signal.SIGSEGV)
        if config == hangs:
            time.sleep(600)
        return timed(self, config)
    monkeypatch.setattr(runner, "time", time_)


@pytest.mark.parametrize("backend", ["numpy", "spatial"])
def test_a_candidate_that_crashes_or_hangs_fails_alone(backend: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    default, crashes, hangs, fine = tried_first(backend)[:4]
    misbehave(monkeypatch, backend, crashes, hangs)
    r = tune(kernel_of("vector_add"), vector_add_inputs(), backend=backend, trials=4,
             trial_timeout=2.0, storage="sqlite:///:memory:", use_cache=False, rounds=2)
    status = {t.config: t.status for t in r.trials}
    assert status[crashes].startswith("the measuring process died of SIGSEGV"), status
    assert status[hangs] == "timed out after 2 s", status
    good = [t for t in r.trials if t.value is not None]
    assert {t.config for t in good} == {default, fine}, status  # a fresh worker measured it
    assert all(t.status == "ok" for t in good) and r.best in (default, fine) and r.best_value


def test_the_tunes_timeout_stops_a_trial_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    default = tried_first("numpy")[0]  # the first trial: it starts well before the deadline
    misbehave(monkeypatch, "numpy", None, hangs=default)
    start = time.monotonic()
    # (a timeout that a worker's start fits in on a loaded machine, as under pytest -n)
    r = tune(kernel_of("vector_add"), vector_add_inputs(), backend="numpy", trials=4,
             timeout=4.0, trial_timeout=30.0, storage="sqlite:///:memory:", use_cache=False)
    assert time.monotonic() - start < 15.0  # not the trial's own 30 s, nor the hang's 600
    assert [t.config for t in r.trials] == [default] and r.best is None
    assert r.trials[0].status.startswith("stopped after"), r.trials[0].status
    assert r.trials[0].status.endswith("the tune's timeout ran out")
    assert r.trials[0].stopped and not r.rejected and r.to_t4()["results"] == []  # not failed


def test_re_timing_the_finalists_stops_at_the_deadline_with_complete_rounds() -> None:
    from autotune import finalists as finals
    from autotune.isolate import OutOfTime

    calls: list[int] = []

    def timer(point: dict) -> float:
        calls.append(point["b"])
        if len(calls) == 5:  # round 2's second timing: the deadline came during it
            raise OutOfTime("stopped")
        return float(point["b"])

    def three() -> list:
        return [finals.Finalist({"b": b}, 1.0) for b in (1, 2, 3)]
    out = finals.retime(three(), timer, rounds=5, stopped=(OutOfTime,))
    assert [f.samples for f in out] == [[1.0], [2.0], [3.0]]  # the cut round is dropped
    assert finals.retime(three(), timer, deadline=time.monotonic() - 1) == []  # no round
