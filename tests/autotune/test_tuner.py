"""The autotuner on the CPU: spatial and model runners, wrong-number rejection, crash and hang
isolation, resume after interruption, shared studies, the result cache."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tiledsl as td
from autotune import cache, finalists as finals
from autotune.isolate import Isolated, TrialFailed
from autotune.strategies import optuna_adapter as studies
from autotune.tuner import tune
from support import example, kernel_of, pythonpath

ROOT = Path(__file__).resolve().parents[2]


def small_matmul() -> tuple:
    return example("matmul").make_inputs(np.random.default_rng(0), {"m": 70, "k": 50, "n": 40})


def test_spatial_tuning_finds_a_config_at_least_as_good_as_the_default(tmp_path: Path) -> None:
    a, b = small_matmul()
    k = kernel_of("matmul")
    k.forget_tuned()
    k.run(a, b, backend="spatial")  # dispatch is now cached with the default config
    r = tune(k, [a, b], backend="spatial", trials=10, storage=f"sqlite:///{tmp_path}/s.db")
    assert r.best is not None and r.best_value is not None and r.default_value is not None
    assert r.best_value <= r.default_value and len(r.trials) >= 10
    assert r.trials[0].config == r.default  # the study starts from the default config
    assert r.finalists == [] and r.best == r.search_best  # simulated cycles are not re-timed
    best_so_far = r.best_so_far
    assert all(x >= y for x, y in zip(best_so_far, best_so_far[1:]) if x is not None)
    # the result cache: the next call without a config uses the tuned one
    assert cache.load(cache.key(k, [a, b], "spatial")) == r.best
    k.run(a, b, backend="spatial")  # tune() dropped the cached dispatch
    assert r.best in k.caches.tuned.values()
    assert any(plan[2] == r.best for plan in k.caches.plans.values())


@td.tile_kernel
def buggy_row_sum(x):
    """Overwrites instead of accumulating: right only when one tile covers a whole row."""
    m, n = x.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        acc = td.zeros((tm,))
        for tn in td.tile(n):
            acc = td.sum(x[tm, tn], axis=1)
        out[tm] = acc
    return out


def test_wrong_numbers_are_rejected_and_reported(tmp_path: Path, capsys: Any) -> None:
    x = np.random.default_rng(1).standard_normal((9, 40)).astype(np.float32)
    r = tune(buggy_row_sum, [x], backend="spatial", trials=25, strategy="random",
             storage=f"sqlite:///{tmp_path}/s.db", progress=True)
    wrong = [t for t in r.trials if t.status.startswith("wrong numbers")]
    assert wrong, "some sampled configs split the row and must be caught"
    assert r.best is not None and r.best.block_sizes[1] >= 40  # only a whole-row tile is right
    assert all(t.value is None for t in wrong)
    bar = capsys.readouterr().err  # the progress bar shows the best so far and the rejections
    assert f"25/25 [" in bar and f", best {r.best_so_far[-1]:.4g} cycles, {len(wrong)} rejected]" \
        in bar, bar


def test_isolation_survives_hangs_crashes_and_exceptions() -> None:
    iso = Isolated("isolation_helpers:make", (), timeout=2.0)
    try:
        assert iso.measure(td.Config((8,))) == 8.0
        with pytest.raises(TrialFailed, match="timed out after 2 s"):
            iso.measure(td.Config((1,)))
        with pytest.raises(TrialFailed, match="died"):
            iso.measure(td.Config((2,)))
        with pytest.raises(TrialFailed, match="kernel launch failed"):
            iso.measure(td.Config((3,)))
        assert iso.measure(td.Config((16,))) == 16.0  # a fresh process took over
        assert iso.restarts == 2
        assert iso.time(td.Config((4,))) == 4.0  # re-timing a finalist goes the same way
        with pytest.raises(TrialFailed, match="died"):
            iso.time(td.Config((2,)))
    finally:
        iso.close()


SCRIPT_WITH_ITS_OWN_CACHE = """
import os, sys, tempfile
os.environ["TILEDSL_CACHE_DIR"] = tempfile.mkdtemp()  # at import: a spawned child makes another
from pathlib import Path
import numpy as np
import tiledsl as td
from autotune.isolate import Isolated
from autotune.precompile import Precompiler
from support import EXAMPLES_DIR, example

if __name__ == "__main__":
    mine = os.environ["TILEDSL_CACHE_DIR"]
    probe = Isolated("isolation_helpers:env_probe", (mine,), timeout=60)
    print("isolated child:", probe.measure(td.Config((1,))))
    probe.close()
    args = example("matmul").make_inputs(np.random.default_rng(0), {"m": 32, "k": 32, "n": 32},
                                         np.float16)
    pool = Precompiler(str(EXAMPLES_DIR / "matmul.py"), "matmul", list(args), "aot", workers=1)
    config = td.Config((16, 16, 16), 4, 1, group_m=1)
    pool.submit([config])
    pool.pending[config].result()
    pool.close()
    print("compile worker:", any(Path(mine).rglob("*")))
"""


def test_children_keep_the_parents_cache_folders(tmp_path: Path) -> None:
    """A script that sets TILEDSL_CACHE_DIR at import (spawned children re-import it): the
    measuring child and the compile workers still use the parent's folder."""
    pytest.importorskip("triton")
    script = tmp_path / "tune_script.py"
    script.write_text(SCRIPT_WITH_ITS_OWN_CACHE)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": pythonpath(ROOT / "tests")})
    assert out.returncode == 0, out.stderr
    assert "isolated child: 1.0" in out.stdout and "compile worker: True" in out.stdout


def test_isolated_tuning_runs_the_kernel_in_a_child_process(tmp_path: Path) -> None:
    x = example("softmax").make_inputs(np.random.default_rng(0), {"m": 20, "n": 30})[0]
    r = tune(kernel_of("softmax"), [x], backend="numpy", trials=3, isolate=True,
             storage=f"sqlite:///{tmp_path}/s.db", rounds=2)
    assert r.best_value is not None and r.best_value > 0 and r.unit == "ms"
    # the finalists were re-timed by the child too: 3 trials, all finalists, 2 rounds each
    assert len(r.finalists) == 3 and all(len(f.samples) == 2 for f in r.finalists)
    assert r.best_value == min(f.value for f in r.finalists if f.value is not None)


def test_finalists_are_re_timed_in_rounds_of_rotated_order() -> None:
    calls: list[int] = []

    def timer(point: dict) -> float:
        calls.append(point["b"])
        if point["b"] == 3 and calls.count(3) == 2:
            raise RuntimeError("launch failed\nmore detail")
        return {1: 5.0, 2: 4.0, 3: 1.0}[point["b"]] + 0.1 * len(calls)

    chosen = finals.choose([({"b": 1}, 2.0), ({"b": 9}, None), ({"b": 2}, 1.5),
                            ({"b": 3}, 1.0), ({"b": 4}, 3.0)], count=3)
    assert [f.point["b"] for f in chosen] == [3, 2, 1]  # fastest first; failed trials never
    finals.retime(chosen, timer, rounds=3)
    # each round starts one finalist later; a finalist that fails is out and not timed again
    assert calls == [3, 2, 1, 2, 1, 3, 1, 2]
    assert chosen[0].failure == "launch failed" and chosen[0].value is None
    assert [len(f.samples) for f in chosen] == [1, 3, 3]
    won = finals.winner(chosen)
    assert won is not None and won.point == {"b": 2}  # the fastest in the search failed
    assert won.value == pytest.approx(4.4)  # the median of its samples (calls 2, 4 and 8)


def test_the_default_config_joins_the_finalists() -> None:
    history = [({"b": i}, float(i)) for i in range(1, 9)]
    chosen = finals.choose(history, count=2, always={"b": 7})
    assert [f.point["b"] for f in chosen] == [1, 2, 7]
    assert [f.point["b"] for f in finals.choose(history, count=2, always={"b": 2})] == [1, 2]


def test_a_lucky_search_timing_loses_to_the_re_timed_finalists(tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    """The first config measured (the default) is timed once at half its true time; the second
    is truly the fastest. The search picks the lucky one, the re-timing the right one."""
    from autotune.runners import NumpyRunner
    seen: dict[str, int] = {}

    def fake_time(self: Any, config: td.Config) -> float:
        key = str(config)
        seen.setdefault(key, 0)
        seen[key] += 1
        order = list(seen).index(key)
        if order == 0:
            return 0.5 if seen[key] == 1 else 2.0
        return 1.0 if order == 1 else 2.0
    monkeypatch.setattr(NumpyRunner, "time", fake_time)
    x = example("softmax").make_inputs(np.random.default_rng(0), {"m": 20, "n": 30})[0]
    k = kernel_of("softmax")

    def run(finalists: int) -> Any:
        seen.clear()
        return tune(k, [x], backend="numpy", trials=6, check=False, finalists=finalists,
                    storage=f"sqlite:///{tmp_path}/s{finalists}.db", use_cache=finalists > 0)
    lucky = run(0)
    assert lucky.best == lucky.default and lucky.best_value == 0.5 and not lucky.finalists
    r = run(5)
    assert r.search_best == r.default and r.best != r.default
    assert r.best == r.trials[1].config and r.best_value == 1.0
    assert r.default_value == 2.0  # re-timed like the winner, so the speedup is like for like
    assert len(r.finalists) == 5 and all(len(f.samples) == finals.ROUNDS for f in r.finalists)
    assert "finalists re-timed interleaved" in r.table()
    assert r.to_json()["finalists"][0]["samples"] == [2.0] * finals.ROUNDS
    assert cache.load(cache.key(k, [x], "numpy")) == r.best


def test_resume_after_interruption(tmp_path: Path) -> None:
    a, b = small_matmul()
    url = f"sqlite:///{tmp_path}/resume.db"
    first = tune(kernel_of("matmul"), [a, b], backend="spatial", trials=4, storage=url,
                 study_name="resume", use_cache=False)
    assert len(first.trials) == 4
    second = tune(kernel_of("matmul"), [a, b], backend="spatial", trials=9, storage=url,
                  study_name="resume", use_cache=False)
    assert len(second.trials) == 9
    assert sum(t.status == "resumed" for t in second.trials) == 4
    assert "9 trials (resumed 4, ran 5)" in second.table()
    assert len(studies.load_trials(studies.open_study(url, "resume"))) == 9
    again = tune(kernel_of("matmul"), [a, b], backend="spatial", trials=9, storage=url,
                 study_name="resume", use_cache=False)  # nothing left to run: it says so
    assert (again.resumed, again.ran) == (9, 0) and "9 trials (resumed 9, ran 0)" in again.table()


def test_a_tune_table_gives_units_ranges_and_says_within_noise() -> None:
    """Every row has its unit and its range (min-max) beside its median; a ratio between two
    overlapping ranges is "within noise", not a speedup (under load NumPy's matmul had a 112 ms
    median against a 2.2 ms minimum); CPU milliseconds do not compare with simulated cycles."""
    from autotune.spread import Spread
    from autotune.tuner import Trial, TuneResult
    best, default = td.Config(block_sizes=(16,)), td.Config(block_sizes=(512,))
    retimed = [finals.Finalist({}, 45.0, [45.0, 46.0, 47.5], config=best),
               finals.Finalist({}, 98.0, [97.0, 98.2, 99.0], config=default)]
    numpy = TuneResult("softmax", "numpy", "ms", best, 46.0, default, 98.2,
                       [Trial(best, 45.0, "ok")] * 6, "s", "sqlite://", 52.6, {"NumPy": 112.0},
                       finalists=retimed, search_best=best,
                       baseline_spreads={"NumPy": Spread.of([2.2, 112.0, 115.0])})
    lines = numpy.table().splitlines()
    assert lines[0].startswith("softmax on numpy: 6 trials (ran 6), 0 rejected; 52.6 s in all")
    assert lines[1].split() == ["config", "median", "range", "(min-max)", "unit"]
    assert lines[2].split()[-4:] == ["46", "45-47.5", "CPU", "ms"]  # tuned
    assert lines[3].split()[-4:] == ["98.2", "97-99", "CPU", "ms"]  # default
    assert lines[4].split()[-4:] == ["112", "2.2-115", "CPU", "ms"]  # NumPy
    assert "tuned vs the default config: 2.13x faster\n" in numpy.table()
    assert "tuned vs NumPy: 2.43x faster by the medians, but within noise: the ranges 45-47.5 " \
           "and 2.2-115 overlap" in numpy.table()
    from autotune.spread import compare  # apart, but one range spans 15x: a busy machine
    assert compare(168.0, 37.5, Spread.of([155.0, 168.0, 180.0]), Spread.of([4.7, 37.5, 72.3])) \
        == "4.48x faster by the medians, but unreliable: one row's times vary 15.4x (a busy " \
           "machine?)"
    spatial = TuneResult("softmax", "spatial", "cycles", best, 7349.0, default, 28209.0,
                         [Trial(best, 7349.0, "ok")], "s", "sqlite://", 3.0, {"NumPy": 0.06},
                         baseline_spreads={"NumPy": Spread.of([0.05, 0.06, 0.07])})
    table = spatial.table()
    assert "7,349  exact (deterministic)  simulated cycles" in table
    assert "0.06  0.05-0.07              CPU ms" in table and "3.84x faster" in table
    assert "the baselines are CPU ms, the configs simulated cycles: the two do not compare" \
        in table and "tuned vs NumPy" not in table


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_tune_shows_progress_on_a_terminal_and_none_in_a_pipe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tqdm's automatic mode, also from Python: a bar on a terminal, nothing in a log or pipe."""
    x = example("softmax").make_inputs(np.random.default_rng(0), {"m": 20, "n": 30})[0]
    for stream, shown in ((_Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        kernel_of("softmax").autotune(x, backend="numpy", trials=1, finalists=0, check=False,
                                      use_cache=False, storage=f"sqlite:///{tmp_path}/p.db",
                                      study_name=str(shown))
        assert ("tuning softmax: 100%" in stream.getvalue()) == shown, stream.getvalue()


def test_a_study_of_another_problem_is_refused(tmp_path: Path) -> None:
    """A study name reused for other shapes would feed one problem's measurements (and its
    best config, into the result cache) to another."""
    a, b = small_matmul()
    url = f"sqlite:///{tmp_path}/named.db"
    tune(kernel_of("matmul"), [a, b], backend="spatial", trials=2, storage=url,
         study_name="named", use_cache=False)
    with pytest.raises(td.ConfigError, match=r"matmul.*study 'named' holds trials of kernel "
                       r"'matmul' on spatial \(generic-8x8\) for \(f32\(70, 50\), f32\(50, 40\)\), "
                       r"not of kernel 'matmul' on spatial \(generic-8x8\) for \(f32\(70, 50\), "
                       r"f32\(50, 33\)\) \(they differ in argument shapes or dtypes, the "
                       r"kernel's IR\)"):
        tune(kernel_of("matmul"), [a, b[:, :33]], backend="spatial", trials=2, storage=url,
             study_name="named", use_cache=False)
    with pytest.raises(td.ConfigError, match="holds trials of kernel 'matmul'"):
        tune(kernel_of("vector_add"), [a[0], a[0]], backend="spatial", trials=2, storage=url,
             study_name="named", use_cache=False)


def test_a_study_names_the_architecture_its_trials_measured_on(tmp_path: Path) -> None:
    a, b = small_matmul()
    url = f"sqlite:///{tmp_path}/arch.db"
    tune(kernel_of("matmul"), [a, b], backend="spatial", trials=2, storage=url,
         study_name="a", use_cache=False)
    with pytest.raises(td.ConfigError, match=r"on spatial \(generic-8x8\) for .* not of kernel "
                       r"'matmul' on spatial \(aie-like-4x8\) .*\(they differ in device or "
                       r"architecture\)"):
        tune(kernel_of("matmul"), [a, b], backend="spatial", arch="aie-like-4x8", trials=2,
             storage=url, study_name="a", use_cache=False)


def test_a_study_tiledsl_did_not_write_is_refused(tmp_path: Path) -> None:
    """A plain Optuna study of the same name: its trials are not measurements of the kernel."""
    import optuna
    a, b = small_matmul()
    url = f"sqlite:///{tmp_path}/foreign.db"
    study = optuna.create_study(storage=url, study_name="theirs")
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=2)
    with pytest.raises(td.ConfigError, match=r"matmul.*study 'theirs' holds 2 trial\(s\) that "
                       "tiledsl did not record"):
        tune(kernel_of("matmul"), [a, b], backend="spatial", trials=2, storage=url,
             study_name="theirs", use_cache=False)


@pytest.mark.parametrize("edit", ["unreadable", "outside the space", "impossible time"])
def test_stored_trials_edited_by_hand_are_ignored_with_a_warning(tmp_path: Path,
                                                                 edit: str) -> None:
    """A resumed tune must neither crash on a stored point it cannot read nor adopt one
    outside the config space (or a time no measurement gives) as its best."""
    import sqlite3
    a, b = small_matmul()
    url = f"sqlite:///{tmp_path}/edited.db"
    first = tune(kernel_of("matmul"), [a, b], backend="spatial", trials=4, storage=url,
                 study_name="e", use_cache=False)
    con = sqlite3.connect(tmp_path / "edited.db")
    attr, raw, trial = con.execute("select trial_user_attribute_id, value_json, trial_id from "
                                   "trial_user_attributes where key='point'").fetchall()[1]
    point = json.loads(json.loads(raw))
    if edit == "unreadable":
        point = "{block_sizes"
    elif edit == "outside the space":
        point = {k: 999 if isinstance(v, int) and not isinstance(v, bool) else v
                 for k, v in point.items()}
    text = point if isinstance(point, str) else json.dumps(point)
    con.execute("update trial_user_attributes set value_json=? where "
                "trial_user_attribute_id=?", (json.dumps(text), attr))
    con.execute("update trial_values set value=? where trial_id=?",
                (-1.0 if edit == "impossible time" else 1e-9, trial))
    con.commit()
    con.close()
    with pytest.warns(td.TileDSLWarning, match="study 'e': 1 stored trial"):
        again = tune(kernel_of("matmul"), [a, b], backend="spatial", trials=6, storage=url,
                     study_name="e", use_cache=False)
    assert again.best_value is not None and again.best_value >= first.best_value * 0.5
    assert again.best in kernel_of("matmul").config_space(a, b, backend="spatial")
    assert sum(t.status == "resumed" for t in again.trials) == 3


def test_a_checked_tune_measures_again_what_was_measured_unchecked(tmp_path: Path) -> None:
    a, b = small_matmul()
    url = f"sqlite:///{tmp_path}/check.db"
    first = tune(kernel_of("matmul"), [a, b], backend="spatial", trials=3, storage=url,
                 study_name="c", use_cache=False, check=False)
    again = tune(kernel_of("matmul"), [a, b], backend="spatial", trials=3, storage=url,
                 study_name="c", use_cache=False)
    assert len(first.trials) == 3 and len(again.trials) >= 3
    assert not any(t.status == "resumed" for t in again.trials)
    resumed = tune(kernel_of("matmul"), [a, b], backend="spatial", trials=3, storage=url,
                   study_name="c", use_cache=False)
    assert all(t.status == "resumed" for t in resumed.trials)  # checked ones are trusted


def test_the_default_config_counts_when_the_deadline_passes_first() -> None:
    """The default is measured even past the deadline; it is then the tuned config."""
    a, b = small_matmul()
    r = tune(kernel_of("matmul"), [a, b], backend="spatial", timeout=1e-9,
             storage="sqlite:///:memory:", use_cache=False)
    assert [t.config for t in r.trials] == [r.default] and r.best == r.default
    assert r.best_value == r.default_value is not None


def test_a_custom_arch_with_a_preset_name_is_another_target() -> None:
    """In-process caches (spaces, plans, tuned configs) key an Arch by its description."""
    import dataclasses

    from lowering.backends.spatial.arch import preset

    a, b = small_matmul()
    k = kernel_of("matmul")
    small = dataclasses.replace(preset("generic-8x8"), sram_bytes=8192)
    big = k.config_space(a, b, backend="spatial", arch="generic-8x8")
    assert len(k.config_space(a, b, backend="spatial", arch=small)) < len(big)


def _worker(url: str, study: str, trials: int = 6) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": pythonpath(ROOT / "tests")}
    return subprocess.Popen([sys.executable, "-m", "tiledsl.cli", "tune",
                             str(ROOT / "examples" / "vector_add.py"), "--backend", "spatial",
                             "--trials", str(trials), "--storage", url, "--study", study,
                             "--no-progress"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _two_workers(url: str) -> None:
    """`--trials` is the study's total and no config is measured twice, however the two
    workers interleave: each reserves a point in the storage before it measures it."""
    workers = [_worker(url, "shared"), _worker(url, "shared")]
    for w in workers:
        out, err = w.communicate(timeout=240)
        assert w.returncode == 0, err
        assert "vector_add on spatial" in out
    trials = studies.load_trials(studies.open_study(url, "shared"))
    keys = [str(sorted(p.items())) for p, _, _ in trials]
    assert len(keys) == 6 and len(set(keys)) == 6, keys


def test_two_workers_share_a_sqlite_study(tmp_path: Path) -> None:
    _two_workers(f"sqlite:///{tmp_path}/shared.db")


def test_two_workers_share_a_journal_file(tmp_path: Path) -> None:
    _two_workers(f"journal:{tmp_path}/shared.journal")


@pytest.mark.skipif(not os.environ.get("TILEDSL_TEST_POSTGRES"),
                    reason="set TILEDSL_TEST_POSTGRES to a PostgreSQL URL (.ci/run starts one)")
def test_two_workers_share_a_postgresql_study() -> None:
    pytest.importorskip("psycopg")
    _two_workers(os.environ["TILEDSL_TEST_POSTGRES"])


def test_reservations_keep_workers_off_one_point_and_within_the_budget(tmp_path: Path) -> None:
    """The protocol the two-process tests above race through, step by step: a worker waits for
    the value of a point another one reserved, and a reservation that finds the budget recorded
    or reserved before it stops. Another host's worker counts while its heartbeat is fresh."""
    import threading
    import time

    import optuna

    from autotune.space import Param, SearchSpace
    from autotune.strategies import study_workers as sw
    study = studies.open_study(f"journal:{tmp_path}/w.journal", "w")
    for beat in (time.time() - sw.STALE_S - 1, time.time()):  # a dead and a live one
        study.add_trial(optuna.trial.create_trial(
            state=optuna.trial.TrialState.RUNNING, user_attrs={
                sw.MARKER: f"elsewhere {beat}", "host": "elsewhere", "pid": 1, "beat": beat,
                "rank": 0}))
    a, b = studies.join(study), studies.join(study)
    assert (a.rank, b.rank) == (1, 2)
    assert study.get_trials()[0].state == optuna.trial.TrialState.FAIL  # the dead one, cleaned
    space = SearchSpace([Param("b", (1, 2, 4))])
    records = studies.trusted_records(space, lambda attrs: True)
    first = a.claim({"b": 1}, 2, records)
    got: list = []
    waiting = threading.Thread(target=lambda: got.append(b.claim({"b": 1}, 2, records)))
    waiting.start()
    time.sleep(0.3)
    assert not got  # b waits for the value a measures
    a.finish(first, lambda: studies.record(study, space, {"b": 1}, 5.0))
    waiting.join(10)
    assert got[0].trial_id is None and got[0].shared == 5.0
    assert b.claim({"b": 2}, 2, records).trial_id is not None  # 1 recorded: within budget
    with pytest.raises(sw.BudgetSpent):
        a.claim({"b": 4}, 2, records)  # 1 recorded and 1 reserved: the budget is spent
    a.leave()
    b.leave()


def test_a_killed_study_resumes_as_the_search_an_uninterrupted_one_makes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed worker's marker is stale at once (its process is gone), so the resumed worker
    takes rank 0 and its seed, and the start points the killed one ranked (a ranking cut
    short by time, here none at all, would start elsewhere): the same trials, in the same
    order, as an uninterrupted run."""
    import signal
    import time

    from autotune import tuner
    url = f"journal:{tmp_path}/killed.journal"
    killed = _worker(url, "killed", trials=8)
    study = studies.open_study(url, "killed")
    while not studies.load_trials(study) and killed.poll() is None:
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert 0 < len(studies.load_trials(study)) < 8  # killed midway
    x, y = example("vector_add").make_inputs(np.random.default_rng(0))
    for name in ("killed", "whole"):
        with monkeypatch.context() as m:
            m.setattr(tuner, "RANK_SECONDS", 0.0 if name == "killed" else tuner.RANK_SECONDS)
            tune(kernel_of("vector_add"), [x, y], backend="spatial", trials=8, storage=url,
                 study_name=name, use_cache=False)
    resumed, whole = (studies.load_trials(studies.open_study(url, n)) for n in ("killed", "whole"))
    assert [(p, v) for p, v, _ in resumed] == [(p, v) for p, v, _ in whole]


def test_a_torn_journal_tail_is_set_aside_with_a_warning(tmp_path: Path) -> None:
    """A crash (or a full disk) cuts the last record short: the whole records are kept, the
    torn bytes moved aside, and a resume appends after the whole records. A record an earlier
    resume glued to the torn bytes is cut out and kept; the crashed writer's lock is broken."""
    import time
    from autotune.space import Param, SearchSpace
    path = tmp_path / "torn.journal"
    url = f"journal:{path}"
    space = SearchSpace([Param("b", (1, 2, 4))])
    study = studies.open_study(url, "t")
    studies.record(study, space, {"b": 1}, 3.0)
    studies.record(study, space, {"b": 2}, 2.0)
    whole = path.read_bytes()
    last = whole[whole.rindex(b"\n", 0, len(whole) - 1) + 1:]
    glued = json.dumps({"op_code": 2, "worker_id": "w", "study_id": 0,
                        "user_attr": {"glued": 1}}).encode() + b"\n"
    path.write_bytes(whole[:-len(last)] + last[:-25] + glued)
    os.symlink(path, f"{path}.lock")  # the killed writer's lock (Optuna breaks it after 30 s)
    start = time.monotonic()
    with pytest.warns(td.TileDSLWarning, match=r"torn.journal: \d+ byte\(s\) were not a whole "
                      r"record .* every whole record is kept, the torn bytes are set aside"):
        study = studies.open_study(url, "t")
    assert time.monotonic() - start < 10 and study.user_attrs["glued"] == 1
    studies.record(study, space, {"b": 4}, 1.0)
    assert [p["b"] for p, _, _ in studies.load_trials(studies.open_study(url, "t"))] == [1, 4]
    assert (tmp_path / "torn.journal.torn").read_bytes() == last[:-25] + b"\n"
    path.write_bytes(b"not a record\n" + path.read_bytes())  # not a tail: refused, kept
    with pytest.raises(td.ConfigError, match="torn.journal: line 1 holds no record"):
        studies.open_study(url, "t")


def test_searches_start_from_the_configs_the_estimate_ranks_best() -> None:
    """After the default, the points of the space with the lowest estimates, one per distinct
    estimate (a knob the estimate cannot see does not spend a pick), then uniform blocks."""
    from autotune.tuner import MODEL_PICKS, analytic_candidates, search_space
    from tiledsl.runtime.config import ConfigSpace, Param

    space = ConfigSpace("k", (Param("block_sizes[0]", (1, 2, 4, 8, 16), 4),
                              Param("knob", ("a", "b"), "a")))
    space = space.with_estimate(lambda c: abs(c.block_sizes[0] - 8))
    points = analytic_candidates(space, search_space(space))
    assert MODEL_PICKS == 4  # estimates 0, 4, 6, 7: blocks 8, 4 (the default), 2, 1
    assert points == [{"block_sizes[0]": b, "knob": "a"} for b in (4, 8, 2, 1, 16)]
    assert analytic_candidates(space) == [{"block_sizes[0]": b, "knob": "a"} for b in (4, 16)]


def test_a_slow_estimate_ranks_a_shuffled_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past RANK_SECONDS the ranking stops, and what it ranked is a sample of the whole space,
    not its first points in order."""
    import time

    from autotune import tuner
    from tiledsl.runtime.config import ConfigSpace, Param

    seen: list[int] = []

    def slow(c: td.Config) -> float:
        seen.append(c.block_sizes[0])
        time.sleep(0.01)
        return -c.block_sizes[0]

    blocks = tuple(2 ** i for i in range(12))
    space = ConfigSpace("k", (Param("block_sizes[0]", blocks, 1),)).with_estimate(slow)
    monkeypatch.setattr(tuner, "RANK_SECONDS", 0.06)
    points = tuner.analytic_candidates(space, tuner.search_space(space), seed=1)
    assert 2 <= len(seen) < len(blocks) and seen != sorted(seen)
    best = sorted(seen, reverse=True)[:tuner.MODEL_PICKS]
    assert [p["block_sizes[0]"] for p in points[1:1 + len(best)]] == best


@pytest.mark.slow  # ranks the whole space: ~12 s
def test_spatial_tuning_tries_the_estimates_best_config_early(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune import tuner
    from autotune.tuner import search_space

    monkeypatch.setattr(tuner, "RANK_SECONDS", 1e9)  # the whole space, however loaded the machine

    a, b = small_matmul()
    k = kernel_of("matmul")
    space = k.config_space(a, b, backend="spatial")
    best = min(search_space(space).points(), key=lambda p: space.estimate(space.make(p)))
    r = tune(k, [a, b], backend="spatial", trials=5, storage=f"sqlite:///{tmp_path}/s.db",
             use_cache=False)
    assert r.trials[0].config == r.default
    # the spatial default is itself the estimate's pick (lowering/backends/spatial/defaults.py);
    # where the descent stopped short, the global best is tried next
    assert space.estimate(r.default) == space.estimate(space.make(best)) or \
        r.trials[1].config == space.make(best)


def test_model_runner_ranks_configs_without_a_gpu(tmp_path: Path) -> None:
    a, b = example("matmul").make_inputs(np.random.default_rng(0), {"m": 256, "k": 256, "n": 256},
                                         np.float16)
    r = tune(kernel_of("matmul"), [a, b], backend="model", trials=4, check=False,
             storage=f"sqlite:///{tmp_path}/m.db")
    assert r.unit.startswith("us") and r.best_value is not None and r.best_value > 0
    assert r.compiled_ahead is not None and 0 <= r.compiled_ahead <= len(r.trials)
    assert "compiled ahead" in r.table() and r.to_json()["compiled_ahead"] == r.compiled_ahead


def test_a_changed_kernel_or_shape_misses_the_cache() -> None:
    a, b = small_matmul()
    base = cache.key(kernel_of("matmul"), [a, b], "spatial")
    assert cache.key(kernel_of("matmul"), [a[:-1], b], "spatial").digest != base.digest
    assert cache.key(kernel_of("matmul"), [a, b], "spatial", "wormhole-like").digest != base.digest
    assert cache.key(kernel_of("batched_matmul"), list(example("batched_matmul").make_inputs(
        np.random.default_rng(0))), "spatial").digest != base.digest
    assert cache.load(cache.CacheKey("never stored")) is None


@pytest.mark.parametrize("text", ["[1, 2]", '"a string"', "7", "null"])
def test_a_cache_entry_of_the_wrong_shape_is_a_miss(text: str) -> None:
    a, b = small_matmul()
    k = cache.key(kernel_of("matmul"), [a, b], "spatial")
    path = cache._path(k)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    try:
        assert cache.load(k) is None
        kernel_of("matmul")(a, b)  # a plain call reads the cache: it runs the default
    finally:
        path.unlink()


def test_tuning_without_a_gpu_or_with_an_unknown_backend_says_so(capsys: Any) -> None:
    from autotune.tuner import require_gpu
    from tiledsl.cli.commands import main
    x = example("softmax").make_inputs(np.random.default_rng(0), {"m": 20, "n": 30})[0]
    with pytest.raises(td.TileDSLError, match="kernel 'softmax': no tuning backend 'cuda'"):
        tune(kernel_of("softmax"), [x], backend="cuda")
    try:
        require_gpu(kernel_of("softmax"))
    except td.TileDSLError:
        pass
    else:
        pytest.skip("a GPU is available")
    with pytest.raises(td.TileDSLError, match="needs torch and an NVIDIA GPU.*backend='model'"):
        tune(kernel_of("softmax"), [x], backend="triton")
    assert main(["tune", str(ROOT / "examples" / "softmax.py"), "--backend", "triton"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tiledsl: BackendError: kernel 'softmax': tuning on backend 'triton'")
    assert "Traceback" not in err


@pytest.mark.parametrize("options, message", [
    ({"strategy": "nope"}, "unknown strategy 'nope'; known: "),
    ({"storage": "nosuchdb://x"}, "cannot open the study storage 'nosuchdb://x'"),
    ({"storage": "sqlite:////no/such/folder/s.db"}, "cannot open the study storage"),
    ({"prune": 1.0}, "prune factor must be above 1")])
def test_bad_tuning_options_are_clear_errors(options: dict, message: str, capsys: Any) -> None:
    x = example("softmax").make_inputs(np.random.default_rng(0), {"m": 5, "n": 7})[0]
    with pytest.raises(td.ConfigError, match=message) as info:
        tune(kernel_of("softmax"), [x], trials=2, **options)
    assert info.value.kernel == "softmax"
    from tiledsl.cli.commands import main
    flag, value = next(iter(options.items()))
    assert main(["tune", str(ROOT / "examples" / "softmax.py"), f"--{flag}", str(value),
                 "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_tune_cli_writes_report_and_plot(tmp_path: Path) -> None:
    from tiledsl.cli.commands import main
    plot, report = tmp_path / "c.png", tmp_path / "r.json"
    assert main(["tune", str(ROOT / "examples" / "rms_norm.py"), "--quick", "--no-progress",
                 "--storage", f"sqlite:///{tmp_path}/c.db", "--plot", str(plot),
                 "--json", str(report)]) == 0
    assert plot.stat().st_size > 1000
    import json
    data = json.loads(report.read_text())
    assert data["backend"] == "spatial" and len(data["trials"]) >= 12


def test_tune_cli_re_times_finalists_on_timed_backends(tmp_path: Path, capsys: Any) -> None:
    import json
    from tiledsl.cli.commands import main
    report = tmp_path / "r.json"
    assert main(["tune", str(ROOT / "examples" / "softmax.py"), "--backend", "numpy",
                 "--trials", "4", "--finalists", "2", "--no-progress", "--storage",
                 f"sqlite:///{tmp_path}/f.db", "--json", str(report)]) == 0
    assert "finalists re-timed interleaved, 5 rounds" in capsys.readouterr().out
    data = json.loads(report.read_text())
    assert len(data["finalists"]) in (2, 3)  # the two fastest, and the default if not among them
    assert all(len(f["samples"]) == finals.ROUNDS for f in data["finalists"])
    assert data["default"] in [f["config"] for f in data["finalists"]]
    assert data["best_value"] == min(f["value"] for f in data["finalists"])


def test_studies_export_to_t4_and_replay(tmp_path: Path) -> None:
    import gzip
    import json
    from tiledsl.cli.commands import main
    t4 = tmp_path / "study.json"
    assert main(["tune", str(ROOT / "examples" / "softmax.py"), "--quick", "--no-progress",
                 "--storage", f"sqlite:///{tmp_path}/t4.db", "--t4", str(t4)]) == 0
    data = json.loads(t4.read_text())
    assert data["schema_version"] == "1.0.0" and len(data["results"]) >= 12
    ok = [r for r in data["results"] if r["invalidity"] == "correct"]
    assert ok and all(r["measurements"][0]["name"] == "time" for r in ok)
    packed = tmp_path / "study.json.gz"
    packed.write_bytes(gzip.compress(t4.read_bytes()))
    assert main(["replay", str(packed), "--strategy", "random", "--seeds", "2",
                 "--budget", "5"]) == 0


def _started(pre: Any, config: td.Config) -> None:
    """Wait until a worker has taken `config`'s compile."""
    import time
    future = pre.pending[config]
    deadline = time.monotonic() + 120
    while not (future.running() or future.done()) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_precompiler_fills_the_compile_cache(tmp_path: Path, monkeypatch: Any) -> None:
    triton = pytest.importorskip("triton")
    from autotune.precompile import Precompiler
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path))  # empty; the workers inherit it
    a, b = example("matmul").make_inputs(np.random.default_rng(0), {"m": 64, "k": 64, "n": 64},
                                         np.float16)
    k = kernel_of("matmul")
    config = td.Config((32, 32, 32), 4, 2, group_m=1, tma=False, persistent=False)
    pre = Precompiler(k.file, k.name, [a, b], workers=1)
    try:
        pre.submit([config])
        _started(pre, config)
        assert pre.wait(config)  # a worker compiled it
    finally:
        pre.close()
    assert list(tmp_path.glob("compiled/*/compiled.json"))

    def no_compiling(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("compiled again")
    monkeypatch.setattr(triton, "compile", no_compiling)
    (report,) = k.compile(a, b, config=config, arch="sm_90")  # served from the disk cache
    assert report.registers > 0 and report.num_warps == 4


def test_precompiler_warms_tritons_jit_cache_for_gpu_tuning(tmp_path: Path,
                                                             monkeypatch: Any) -> None:
    """The GPU runner's compiles are `k.warm`: they land in Triton's cache, where the measuring
    process's launch looks."""
    pytest.importorskip("triton")
    from autotune.precompile import Precompiler
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # the spawned workers inherit it
    a, b = example("matmul").make_inputs(np.random.default_rng(0), {"m": 64, "k": 64, "n": 64},
                                         np.float16)
    k = kernel_of("matmul")
    config = td.Config((32, 32, 32), 4, 2, group_m=1, tma=False, persistent=False)
    pre = Precompiler(k.file, k.name, [a, b], kind="jit", arch="sm_90", num_sms=132, workers=1)
    try:
        pre.submit([config])
        _started(pre, config)
        assert pre.wait(config)
    finally:
        pre.close()
    assert list(tmp_path.glob("*/matmul_kernel.cubin"))


def test_precompiler_follows_the_latest_hint() -> None:
    """A new hint cancels the queued compiles it no longer names; a config whose compile has not
    started when it is measured is withdrawn (the measurement compiles it)."""
    from autotune.precompile import Precompiler
    k = kernel_of("matmul")
    a, b = small_matmul()
    configs = [td.Config((bm, bn, 32), 4, 2, group_m=1) for bm in (16, 32, 64) for bn in (16, 32)]
    pre = Precompiler(k.file, k.name, [a, b], workers=1)
    try:
        pre.submit(configs)  # one worker: three at most leave the queue before the first is done
        assert pre.wait(configs[-1]) is False and configs[-1] not in pre.pending
        pre.submit([configs[0]], replace=True)
        assert configs[0] in pre.pending and configs[-2] not in pre.pending
        assert pre.wait(td.Config((16, 16, 16), 4, 2, group_m=1)) is False  # never submitted
    finally:
        pre.close()


@td.tile_kernel
def _two_args(a, b):
    for t in td.tile(a.shape[0]):
        a[t, :] = b[t, :]


def test_listed_inputs_name_shapes_dtypes_and_other_layouts() -> None:
    from autotune.cache_list import _inputs
    x = np.zeros((150, 300), np.float32)
    spec = [list(map(str, s)) for s in _two_args.arg_spec([x, x.T])]
    assert _inputs(spec) == "150x300:f32 300x150:f32@(1,300)"
