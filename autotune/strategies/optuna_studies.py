"""Optuna studies in persistent storages (SQLite, PostgreSQL, journal files): open, load and
record trials. With optuna_adapter.py (samplers) the only place that imports Optuna."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import optuna

from autotune.space import Point, SearchSpace

optuna.logging.set_verbosity(optuna.logging.WARNING)


def storage_for(url: str) -> Any:
    """An Optuna storage from a URL: `sqlite:///path.db`, any SQLAlchemy URL (PostgreSQL...),
    or `journal:/path/to/file` for a journal file (safe on NFS, no database server)."""
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalStorage
        return JournalStorage(JournalFileBackend(url[len("journal:"):]))
    return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})


def _retrying(fn: Any, attempts: int = 8) -> Any:
    """Workers that start together race to create the schema or lock SQLite: try again."""
    for i in range(attempts):
        try:
            return fn()
        except Exception as e:  # sqlalchemy's IntegrityError/OperationalError, optuna's races
            if i == attempts - 1 or not any(s in str(e) for s in (
                    "UNIQUE constraint", "locked", "already exists", "duplicate key",
                    "could not serialize", "IntegrityError")):
                raise
            time.sleep(0.1 * (i + 1) + random.random() * 0.1)
    raise AssertionError("unreachable")


def open_study(url: str, name: str) -> Any:
    """The study `name` in storage `url`, created if it does not exist (workers share it)."""
    return _retrying(lambda: optuna.create_study(storage=storage_for(url), study_name=name,
                                                 direction="minimize", load_if_exists=True))


def load_trials(study: Any) -> list[tuple[Point, float | None]]:
    """Every finished evaluation of the study (failed ones as None), in trial order."""
    out: list[tuple[Point, float | None]] = []
    for t in study.get_trials(deepcopy=False):
        if "point" not in t.user_attrs:
            continue
        point = json.loads(t.user_attrs["point"])
        if t.state == optuna.trial.TrialState.COMPLETE:
            out.append((point, float(t.value)))
        elif t.state == optuna.trial.TrialState.FAIL:
            out.append((point, None))
    return out


def record(study: Any, space: SearchSpace, point: Point, value: float | None,
           attrs: dict[str, Any] | None = None) -> None:
    """Add one finished evaluation to the study (so it persists and other workers see it)."""
    dists = {p.name: optuna.distributions.CategoricalDistribution(list(p.values))
             for p in space.params}
    state = optuna.trial.TrialState.COMPLETE if value is not None else optuna.trial.TrialState.FAIL
    trial = optuna.trial.create_trial(
        params={k: point[k] for k in dists}, distributions=dists,
        value=value if value is not None else None, state=state,
        user_attrs={"point": json.dumps(point), **(attrs or {})})
    _retrying(lambda: study.add_trial(trial))
