"""Every registered search strategy on a small synthetic space with a known optimum."""

from __future__ import annotations

import pytest

from autotune.space import Evaluator, Param, SearchSpace
from autotune.strategies import DEFAULT, STRATEGIES, get

get("random")  # load every strategy module (registration)

PARAMS = [Param("bx", (16, 32, 64, 128, 256)), Param("by", (1, 2, 4, 8)),
          Param("unroll", (1, 2, 3, 4, 5, 6)), Param("fixed", ("on",))]
OPT = {"bx": 64, "by": 4, "unroll": 3, "fixed": "on"}


def valid(p: dict) -> bool:
    return p["bx"] * p["by"] <= 512 and not (p["unroll"] == 6 and p["by"] == 8)


def objective(p: dict) -> float | None:
    if p["bx"] == 128 and p["unroll"] == 5:  # valid, but fails at run time
        return None
    i = [PARAMS[k].values.index(p[PARAMS[k].name]) for k in range(3)]
    return 1.0 + (i[0] - 2) ** 2 + 0.5 * (i[1] - 2) ** 2 + 0.3 * abs(i[2] - 2)


SPACE = SearchSpace(PARAMS, valid=valid)
N_VALID = sum(1 for _ in SPACE.points())
NAMES = sorted(STRATEGIES)


class Checked(Evaluator):
    def __init__(self, budget: int) -> None:
        super().__init__(self._objective, budget)
        self.invalid: list[dict] = []

    def _objective(self, p: dict) -> float | None:
        if not SPACE.contains(p):
            self.invalid.append(p)
        return objective(p)


def run(name: str, budget: int, seed: int = 0, initial: list | None = None) -> Checked:
    ev = Checked(budget)
    get(name)(SPACE, ev, seed, list(initial or []))
    return ev


def test_default_is_registered() -> None:
    assert DEFAULT in STRATEGIES
    assert {"random", "exhaustive", "local", "tpe", "cmaes", "gp"} <= set(STRATEGIES)


@pytest.mark.parametrize("name", NAMES)
def test_finds_optimum_valid_only_within_budget(name: str) -> None:
    budget = N_VALID if name in ("random", "exhaustive") else 40
    ev = run(name, budget)
    assert ev.invalid == []
    assert len(ev.history) <= budget
    assert len({SearchSpace.key(p) for p, _ in ev.history}) == len(ev.history)
    assert ev.best is not None and ev.best[0] == OPT


@pytest.mark.parametrize("name", NAMES)
def test_budget_is_respected_and_spent(name: str) -> None:
    ev = run(name, 7)
    assert len(ev.history) == 7


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_for_a_seed(name: str) -> None:
    a = [p for p, _ in run(name, 15, seed=3).history]
    b = [p for p, _ in run(name, 15, seed=3).history]
    assert a == b


@pytest.mark.parametrize("name", NAMES)
def test_initial_points_first(name: str) -> None:
    initial = [{"bx": 16, "by": 1, "unroll": 1, "fixed": "on"},
               {"bx": 256, "by": 2, "unroll": 6, "fixed": "on"}]
    ev = run(name, 10, initial=initial)
    assert [p for p, _ in ev.history[:2]] == initial


def test_optuna_is_imported_by_the_adapter_only() -> None:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"^\s*(import optuna|from optuna)", re.M)
    importers = sorted(str(p.relative_to(root)) for d in ("tiledsl", "lowering", "autotune")
                       for p in (root / d).rglob("*.py") if pattern.search(p.read_text()))
    assert importers == ["autotune/strategies/journal_file.py",
                         "autotune/strategies/optuna_adapter.py",
                         "autotune/strategies/study_workers.py"]  # the adapter and its studies


def test_bo_local_searches_near_the_elite() -> None:
    """bo+local's proposals after the random start stay mostly within one parameter of the ten
    best points so far (its trust region); a global EI search does not. Points that measure
    exactly the same count once, as in the strategy's elite (`rugged` is symmetric in p2 and
    p3, so swapping them gives twins)."""
    import math

    params = [Param(f"p{i}", tuple(range(8))) for i in range(4)]
    space = SearchSpace(params)

    def rugged(p: dict) -> float:
        v = [p[f"p{i}"] for i in range(4)]
        return (1 + 0.1 * sum((x - 5) ** 2 for x in v) + 0.5 * math.sin(3 * v[0] + 2 * v[1])
                + 0.3 * math.cos(5 * v[2] * v[3]))

    def near_elite(name: str, seed: int) -> float:
        ev = Evaluator(rugged, 60)
        get(name)(space, ev, seed, [])
        near = []
        for i in range(20, len(ev.history)):
            best = {v: p for p, v in reversed(ev.history[:i])}  # the first of each tie
            top = [(best[v], v) for v in sorted(best)[:10]]
            q = ev.history[i][0]
            near.append(any(sum(q[k] != p[k] for k in q) == 1 for p, _ in top))
        return sum(near) / len(near)

    assert min(near_elite("bo+local", s) for s in range(3)) >= 0.8
    assert max(near_elite("bo", s) for s in range(3)) < 0.8


class Hinted(Checked):
    """Records the strategy's compile-ahead hints, and the latest one before each evaluation."""

    def __init__(self, budget: int) -> None:
        super().__init__(budget)
        self.hints: list[list[tuple]] = []
        self.on_prefetch = lambda points: self.hints.append([SearchSpace.key(p) for p in points])
        self.hint_before: list[list[tuple] | None] = []

    def _objective(self, p: dict) -> float | None:
        self.hint_before.append(self.hints[-1] if self.hints else None)
        return super()._objective(p)


def test_evaluated_points_are_left_out_of_hints() -> None:
    ev = Hinted(10)
    ev(OPT)
    ev.prefetch([OPT, dict(OPT, unroll=2)])
    assert ev.hints == [[SearchSpace.key(dict(OPT, unroll=2))]]


@pytest.mark.parametrize("name", ["bo", "bo+local", "local", "exhaustive"])
def test_strategies_announce_what_they_evaluate_next(name: str) -> None:
    """What the tuner compiles ahead: bo's start points all at once, then before each model
    proposal the proposal and its runners-up by expected improvement; a descent's neighbours in
    the order it tries them; exhaustive search's next points."""
    ev = Hinted(30)
    initial = [dict(OPT, bx=16, by=1)]
    get(name)(SPACE, ev, 0, initial)
    assert len(ev.history) == 30
    keys = [SearchSpace.key(p) for p, _ in ev.history]
    # Named one measurement ahead: by the hint current when the previous measurement started.
    ahead = [keys[j] in (ev.hint_before[j - 1] or []) for j in range(1, len(keys))]
    if name.startswith("bo"):
        first = ev.hints[0]
        assert first[0] == SearchSpace.key(initial[0]) and len(first) == 8  # n_init for 3 params
        assert keys[:8] == first
    assert sum(ahead) >= {"local": 15, "exhaustive": 25}.get(name, 20), ahead
    assert run(name, 30, initial=initial).history == ev.history  # hints change nothing


@pytest.mark.parametrize("name", ["bo", "bo+local"])
def test_bo_starts_small_on_a_small_space(name: str) -> None:
    """The random start takes at most an eighth of a small space (at least 3 points): on 24
    configs a fixed start of 8 would spend a third of the space before the model says anything."""
    space = SearchSpace([Param("a", (1, 2, 4, 8)), Param("b", (1, 2, 3)), Param("c", (0, 1))])
    hints: list[list] = []
    ev = Evaluator(lambda p: float(p["a"] + p["b"] + p["c"]), 10)
    ev.on_prefetch = hints.append
    get(name)(space, ev, 0, [])
    assert len(hints[0]) == 3
    assert len(ev.history) == 10 and ev.best is not None


def test_bo_local_stops_moving_along_a_knob_that_changes_nothing() -> None:
    """On a deterministic objective where a knob is inert (the buffer depth where loads never
    run ahead: exact ties), bo+local stops trying its other values once it has seen it change
    nothing, so its evaluations go to distinct outcomes."""
    import math

    params = [Param("a", tuple(range(8))), Param("b", tuple(range(8))),
              Param("depth", (2, 3, 4))]
    space = SearchSpace(params)

    def flat(p: dict) -> float:  # a plateau with a narrow optimum; the depth does nothing
        return 10.0 - 3.0 * (p["a"] == 6) * (p["b"] == 1) + 0.1 * math.sin(p["a"] * 7 + p["b"])

    twins = []
    for seed in range(5):
        ev = Evaluator(flat, 40)
        get("bo+local")(space, ev, seed, [])
        seen = [(p["a"], p["b"]) for p, _ in ev.history]
        twins.append(len(seen) - len(set(seen)))
    assert max(twins) <= 3, twins


def test_the_gps_likelihood_gradient_is_its_derivative() -> None:
    """bo's hyperparameter fit follows the analytic gradient of the marginal likelihood (with
    finite differences, scipy 1.15's L-BFGS-B stopped far from the optimum)."""
    import numpy as np
    from scipy.optimize import approx_fprime

    from autotune.strategies.bo import GP
    rng = np.random.default_rng(0)
    x = rng.random((25, 3))
    y = np.sin(4 * x[:, 0]) + x[:, 1] ** 2 + 0.05 * rng.standard_normal(25)
    y = (y - y.mean()) / y.std()
    gp = GP(3)
    for _ in range(4):
        theta = np.concatenate([rng.uniform(-2, 1, 3), [rng.uniform(-1, 1)],
                                [rng.uniform(-10, -2)]])
        _, grad = gp._nll(theta, x, y)
        numeric = approx_fprime(theta, lambda t: gp._nll(t, x, y)[0], 1e-6)
        assert np.allclose(grad, numeric, rtol=1e-3, atol=1e-3 * np.abs(numeric).max())
    start = np.concatenate([gp.log_ls, [gp.log_sf2, gp.log_sn2]])
    gp.fit(x, y)
    fitted = np.concatenate([gp.log_ls, [gp.log_sf2, gp.log_sn2]])
    assert gp._nll(fitted, x, y)[0] < gp._nll(start, x, y)[0] - 1.0
