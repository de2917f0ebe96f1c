"""The tune's bookkeeping (autotune/trials.py): one Trial record per evaluated point, observers
told of each new trial (the progress bar is one), and the stop when the study's budget is
spent."""

from __future__ import annotations

from autotune.space import Param, Point, SearchSpace
from autotune.strategies.exhaustive import exhaustive
from autotune.strategies.study_workers import BudgetSpent
from autotune.trials import TrialLog, TrialProgress


def test_the_log_keeps_a_record_per_trial_and_tells_its_observers() -> None:
    space = SearchSpace([Param("a", (1, 2, 3, 4)), Param("b", (1, 2))])

    def objective(point: Point) -> float | None:
        if len(log.history) == 5:
            raise BudgetSpent  # another worker on the study took the last points
        if point["a"] == 3:
            log.record(point).status = "wrong numbers"
            return None
        return float("nan") if point == {"a": 2, "b": 2} else float(point["a"] * point["b"])

    log = TrialLog(objective, 8, None, config=lambda p: f"config {p['a']}x{p['b']}")
    seen: list = []
    log.observers.append(seen.append)
    progress = TrialProgress("k", log, 8, show=False, unit="ms")
    log.observers.append(progress)
    exhaustive(space, log, 0, [{"a": 3, "b": 2}, {"a": 3, "b": 2}])
    assert log.spent and len(log.history) == 5
    assert seen == log.trials()  # each new trial once, in order; the repeat is not a trial
    assert [(t.config, t.value, t.status) for t in seen] == [
        ("config 3x2", None, "wrong numbers"), ("config 1x1", 1.0, "ok"),
        ("config 1x2", 2.0, "ok"), ("config 2x1", 2.0, "ok"),
        ("config 2x2", None, "ok")]  # a NaN counts as failed, in the record as in the history
    assert progress.bar.n == 5 and progress.bar.postfix == "best 1 ms, 2 rejected"
    progress.close()
