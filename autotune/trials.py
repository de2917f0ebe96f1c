"""A tune's bookkeeping: the `TrialLog` keeps one `Trial` record per point the search evaluated
(its config, status, the cost model's prediction, who measured it) and tells its observers of
each new trial; `TrialProgress`, the progress bar, is one such observer."""

from __future__ import annotations

import time
from typing import Callable

from autotune.result import Trial
from autotune.space import Evaluator, Point, SearchSpace
from autotune.strategies.study_workers import BudgetSpent
from tiledsl.runtime.config import Config
from tiledsl.progress import progress_bar

Observer = Callable[[Trial], None]


class TrialLog(Evaluator):
    """The Evaluator a tune's strategy calls. Besides the values (`history`, `results`), it
    keeps each point's `Trial` record (`record`), tells `observers` of each trial the strategy
    had evaluated, and stops at a wall-clock deadline or when the objective finds the study's
    budget spent (by all its workers together)."""

    def __init__(self, objective: Callable[[Point], float | None], budget: int,
                 deadline: float | None, config: Callable[[Point], Config]) -> None:
        super().__init__(objective, budget)
        self.deadline = deadline
        self.spent = False
        self.config = config  # a point's Config
        self.records: dict[tuple, Trial] = {}
        self.observers: list[Observer] = []

    def record(self, point: Point) -> Trial:
        """`point`'s record; a new one (status "ok", measured by this run) if it has none."""
        key = SearchSpace.key(point)
        if key not in self.records:
            self.records[key] = Trial(self.config(point), None, "ok")
        return self.records[key]

    def store(self, point: Point, value: float | None) -> None:
        super().store(point, value)
        self.record(point).value = value

    def __call__(self, point: Point) -> float | None:
        before = len(self.history)
        try:
            value = super().__call__(point)
        except BudgetSpent:
            self.spent = True
            return None
        if len(self.history) > before:
            for observe in self.observers:
                observe(self.record(point))
        return value

    @property
    def done(self) -> bool:
        return super().done or self.spent or (self.deadline is not None
                                              and time.monotonic() > self.deadline)

    def trials(self) -> list[Trial]:
        """The records, in the order their points were evaluated."""
        return [self.records[SearchSpace.key(p)] for p, _ in self.history]


class TrialProgress:
    """The tune's progress bar on stderr (tiledsl/progress.py): a step per trial with the best
    value so far and what was rejected, pruned or compiled ahead; then, replaced by
    `retiming`, a step per timing of the finalists."""

    def __init__(self, kernel: str, log: TrialLog, total: int, show: bool | None, unit: str,
                 compiled_ahead: Callable[[], int] | None = None) -> None:
        self.kernel, self.log, self.show, self.unit = kernel, log, show, unit
        self.compiled_ahead = compiled_ahead  # None: no compile-ahead pool
        resumed = sum(t.origin == "resumed" for t in log.records.values())
        self.bar = progress_bar(total, f"tuning {kernel}" + (f" (resumed {resumed})"
                                                             if resumed else ""),
                                "trial", show, initial=len(log.history))

    def __call__(self, trial: Trial) -> None:
        """A trial ended."""
        values = [v for _, v in self.log.history]
        best = min((v for v in values if v is not None), default=None)
        pruned = sum(t.pruned for t in self.log.records.values())
        failed = values.count(None) - pruned
        shown = [f"best {best:.4g} {self.unit}" if best is not None else "no valid trial"]
        if self.compiled_ahead is not None:
            shown.append(f"{self.compiled_ahead()} compiled ahead")
        shown += [f"{failed} rejected"] * bool(failed) + [f"{pruned} pruned"] * bool(pruned)
        self.bar.n += 1
        self.bar.set_postfix_str(", ".join(shown))  # refreshes: each trial shows

    def retiming(self, timings: int) -> None:
        """The finalists' re-timing starts: a bar of its `timings`."""
        self.bar.close()
        self.bar = progress_bar(timings, f"re-timing {self.kernel}'s finalists", "timing",
                                self.show)

    def timed(self) -> None:
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
