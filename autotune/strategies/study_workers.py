"""Workers sharing one study: who is alive, and which point each one is measuring.

A worker announces itself with a marker, a RUNNING trial that holds its id, its host, its
process and a heartbeat (a time it rewrites every `BEAT_S` seconds from a thread). A marker is
live while its heartbeat is younger than `STALE_S` and, on the same host, while its process
runs: a killed worker's marker is stale at once on its own host, `STALE_S` later elsewhere.
Stale markers are cleaned (failed) by the next worker that sees them. A worker's rank is the
smallest one no live worker holds: a resumed study is searched as an uninterrupted one was.

A worker reserves a point before it measures it: the reservation is a RUNNING trial that holds
the point's key; when the measurement ends, the point's record is added and the reservation
released. The storages create
a study's trials one at a time (the RDB storage locks the study's row, SQLite and the journal
file serialize their writes), so a trial sees every trial numbered before it: the reservation
with the lowest number among the live ones for a key wins, later ones wait for its value. The
same order bounds the study's total: a reservation that finds `budget` points recorded or
reserved before it is withdrawn, and the worker stops.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState

from autotune.space import Point

BEAT_S = 5.0  # a worker rewrites its heartbeat this often
STALE_S = 60.0  # a worker whose heartbeat is older is dead (clocks of hosts must agree)
POLL_S = 0.1  # how often a worker waiting for another's measurement looks again

MARKER = "tiledsl_worker"  # a marker's user attribute: the worker's id
RESERVED = "tiledsl_reserved"  # a reservation's user attribute: the point's key
OWNER = "tiledsl_owner"  # a reservation's user attribute: the worker that holds it

Records = Callable[[list[Any]], dict[str, "float | None"]]  # trials -> trusted point key -> value


class BudgetSpent(Exception):
    """The study holds its budget of points (or the tune's deadline passed): measure no more."""


def point_key(point: Point) -> str:
    return json.dumps(point, sort_keys=True)


def _host() -> str:
    """This machine (and container): processes of one host see each other's pids."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def _process(pid: int) -> str | None:
    """A token of the running process `pid` (its start time), None if none runs (or it is a
    zombie); '' where /proc cannot tell (then only whether the pid exists)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except OSError:
            pass
        return ""
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else fields[19]


@dataclass
class Claim:
    """What `Worker.claim` found: a reservation to measure under (`trial_id`), or the value
    another worker measured (`shared`, None when that measurement failed)."""
    trial_id: int | None = None
    shared: float | None = None


class Worker:
    """This process's membership of a study: its marker, heartbeat and rank, and its
    reservations. `retry(fn)` calls a storage operation again where workers race (a locked
    SQLite file)."""

    def __init__(self, study: Any, retry: Callable[[Callable[[], Any]], Any]) -> None:
        self.study = study
        self.retry = retry
        self.id = uuid.uuid4().hex
        self.host = _host()
        self._stop = threading.Event()
        marker = optuna.trial.create_trial(state=TrialState.RUNNING, user_attrs={
            MARKER: self.id, "host": self.host, "pid": os.getpid(),
            "process": _process(os.getpid()), "beat": time.time()})
        self.marker = self._add(marker)
        self._beat = threading.Thread(target=self._beating, daemon=True,
                                      name="tiledsl-study-heartbeat")
        self._beat.start()
        self.rank = self._take_rank()

    # -- membership ------------------------------------------------------------------------

    def _add(self, template: Any) -> tuple[int, int]:
        """Add a trial (as `Study.add_trial` does); its (trial id, number)."""
        template._validate()
        storage = self.study._storage
        trial_id = self.retry(lambda: storage.create_new_trial(self.study._study_id, template))
        return trial_id, storage.get_trial_number_from_id(trial_id)

    def _beating(self) -> None:
        while not self._stop.wait(BEAT_S):
            try:
                self.study._storage.set_trial_user_attr(self.marker[0], "beat", time.time())
            except UpdateFinishedTrialError:
                return  # another worker took this one for dead: nothing left to keep alive
            except Exception:  # noqa: BLE001 - a busy database: the next beat tries again
                pass

    def live(self, marker: Any, now: float) -> bool:
        """Whether a marker's worker is alive."""
        attrs = marker.user_attrs
        if marker.state != TrialState.RUNNING or not isinstance(attrs.get("beat"), (int, float)):
            return False
        if attrs[MARKER] == self.id:
            return True
        if not now - attrs["beat"] < STALE_S:
            return False
        if attrs.get("host") == self.host and isinstance(attrs.get("pid"), int):
            running = _process(attrs["pid"])
            return running is not None and (running == "" or attrs.get("process") in (
                None, "", running))
        return True

    def _live_workers(self, trials: list[Any]) -> set[str]:
        """The ids of the live workers; stale markers and their reservations are failed."""
        now = time.time()
        live, dead = set(), set()
        for t in trials:
            if t.state == TrialState.RUNNING and isinstance(t.user_attrs.get(MARKER), str):
                (live if self.live(t, now) else dead).add(t.user_attrs[MARKER])
        for t in trials:
            if t.state == TrialState.RUNNING and (t.user_attrs.get(MARKER) in dead
                                                  or t.user_attrs.get(OWNER) in dead):
                self._fail(t._trial_id)
        return live

    def _fail(self, trial_id: int) -> None:
        try:
            self.retry(lambda: self.study._storage.set_trial_state_values(
                trial_id, TrialState.FAIL))
        except UpdateFinishedTrialError:
            pass  # finished meanwhile (by its worker, or another cleaner)

    def _take_rank(self) -> int:
        """The smallest rank no live worker that joined before this one holds."""
        while True:
            trials = self.study.get_trials(deepcopy=False)
            live = self._live_workers(trials)
            before = [t for t in trials if t.number < self.marker[1]
                      and t.user_attrs.get(MARKER) in live and t.state == TrialState.RUNNING]
            if all(isinstance(t.user_attrs.get("rank"), int) for t in before):
                held = {t.user_attrs["rank"] for t in before}
                rank = next(r for r in range(len(held) + 1) if r not in held)
                self.retry(lambda: self.study._storage.set_trial_user_attr(
                    self.marker[0], "rank", rank))
                return rank
            time.sleep(POLL_S)  # a worker that joined just before is choosing its rank

    def leave(self) -> None:
        """Stop the heartbeat and retire the marker (the rank is free again)."""
        self._stop.set()
        self._beat.join()
        self._fail(self.marker[0])

    # -- reservations ----------------------------------------------------------------------

    def claim(self, point: Point, budget: int | None, records: Records,
              deadline: float | None = None) -> Claim:
        """Reserve `point` for measuring, or wait for the worker that reserved it first.
        `records(trials)`: the finished records this worker trusts, point key -> value (None:
        the measurement failed). Raises BudgetSpent when `budget` points are recorded or
        reserved before this reservation (None: no bound), or at `deadline` (monotonic)."""
        key = point_key(point)
        while True:
            mine = self._add(optuna.trial.create_trial(
                state=TrialState.RUNNING, user_attrs={RESERVED: key, OWNER: self.id}))
            trials = self.study.get_trials(deepcopy=False)
            done = records(trials)
            if key in done:
                self._fail(mine[0])
                return Claim(shared=done[key])
            live = self._live_workers(trials)
            held = {t.user_attrs[RESERVED]: t for t in trials
                    if t.number < mine[1] and t.state == TrialState.RUNNING
                    and isinstance(t.user_attrs.get(RESERVED), str)
                    and t.user_attrs.get(OWNER) in live}
            first = held.get(key)
            if first is None and (budget is None or len(set(done) | set(held)) < budget):
                return Claim(trial_id=mine[0])
            self._fail(mine[0])
            if first is None:
                raise BudgetSpent(f"the study holds {budget} points")
            shared = self._wait(first._trial_id, key, records, deadline)
            if shared is not None:
                return shared

    def _wait(self, trial_id: int, key: str, records: Records,
              deadline: float | None) -> Claim | None:
        """Wait for another worker's reservation to end: its value, or None when it ended
        without one (withdrawn, or its worker died): then the point is free again."""
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise BudgetSpent("the tune's deadline passed")
            time.sleep(POLL_S)
            trials = self.study.get_trials(deepcopy=False)
            done = records(trials)
            if key in done:
                return Claim(shared=done[key])
            held = next((t for t in trials if t._trial_id == trial_id), None)
            if held is None or held.state != TrialState.RUNNING or \
                    held.user_attrs.get(OWNER) not in self._live_workers(trials):
                return None

    def withdraw(self, claim: Claim) -> None:
        """Give a reservation up without a measurement (the point is free again)."""
        if claim.trial_id is not None:
            self._fail(claim.trial_id)

    def finish(self, claim: Claim, record: Callable[[], None]) -> None:
        """End a reservation with its measurement: `record()` adds the point's record (one
        write: its attributes and value together), then the reservation is released; between
        the two, readers see both, never neither."""
        record()
        self.withdraw(claim)
