"""Replaying strategies on recorded (T4) tuning spaces."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from autotune import replay as rp
from autotune.space import Evaluator, SearchSpace
from tiledsl.cli import commands as cli
from tiledsl.errors import ConfigError

SHARED = Path(__file__).parents[3] / "shared" / "tuning-spaces"


def t4(tmp_path: Path, rows: list[tuple[dict, str, float]], gz: bool = True) -> Path:
    results = [{"configuration": c, "invalidity": inv, "times": {"runtimes": [t, t]},
                "measurements": [{"name": "time", "value": t, "unit": "ms"}]}
               for c, inv, t in rows]
    data = json.dumps({"schema_version": "1.0.0", "results": results})
    path = tmp_path / ("space_T4.json.gz" if gz else "space_T4.json")
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(data)
    else:
        path.write_text(data)
    return path


def small_rows() -> list[tuple[dict, str, float]]:
    rows = []
    for bx in (64, 16, 32, 128):  # unsorted on purpose
        for by in (1, 2, 4):
            for unroll in (0, 1):
                if bx * by > 256:
                    continue  # not in the file: outside the space
                t = 1.0 + abs(bx - 32) / 16 + abs(by - 2) + 0.25 * unroll
                inv = "runtime" if (bx, by) == (128, 1) else "correct"
                rows.append(({"bx": bx, "by": by, "unroll": unroll, "fixed": 7}, inv, t))
    return rows


def test_load_points_values_and_validity(tmp_path: Path) -> None:
    rows = small_rows()
    rs = rp.load(t4(tmp_path, rows))
    assert [p.name for p in rs.space.params] == ["bx", "by", "unroll", "fixed"]
    assert rs.space.params[0].values == (16, 32, 64, 128)
    assert {SearchSpace.key(p) for p in rs.space.points()} == {
        SearchSpace.key(c) for c, _, _ in rows}
    assert not rs.space.contains({"bx": 128, "by": 4, "unroll": 0, "fixed": 7})
    assert rs.objective({"bx": 128, "by": 1, "unroll": 0, "fixed": 7}) is None
    assert rs.objective({"bx": 32, "by": 2, "unroll": 1, "fixed": 7}) == 1.25
    assert rs.optimum == 1.0
    assert len(rs.valid_times) == len(rows) - 2


def test_best_so_far_semantics(tmp_path: Path) -> None:
    rs = rp.load(t4(tmp_path, small_rows(), gz=False))
    ev = Evaluator(rs.objective, 10)
    seq = [({"bx": 128, "by": 1, "unroll": 0, "fixed": 7}, None),   # fails: null
           ({"bx": 128, "by": 1, "unroll": 1, "fixed": 7}, None),   # fails: null
           ({"bx": 64, "by": 4, "unroll": 1, "fixed": 7}, 5.25),
           ({"bx": 128, "by": 1, "unroll": 0, "fixed": 7}, None),   # a repeat: not counted
           ({"bx": 16, "by": 1, "unroll": 0, "fixed": 7}, 3.0),
           ({"bx": 64, "by": 2, "unroll": 0, "fixed": 7}, 3.0),     # worse: repeats 3.0
           ({"bx": 128, "by": 2, "unroll": 0, "fixed": 7}, 7.0)]
    for point, value in seq:
        assert ev(point) == value
    assert ev.best_so_far() == [None, None, 5.25, 3.0, 3.0, 3.0]
    assert rp.evaluations_to(ev.best_so_far(), 2.9, 0.05) == 4
    assert rp.evaluations_to(ev.best_so_far(), 1.0, 0.05) is None


def test_random_expectation(tmp_path: Path) -> None:
    assert rp.random_expectation(9, 1) == 5.0
    assert rp.random_expectation(4201, 1) == 2101.0
    rs = rp.load(t4(tmp_path, small_rows()))
    n = len(rs.valid_times)
    k = sum(1 for t in rs.valid_times if t <= 1.0 * 1.3)
    assert rs.within(0.3) == k == 2  # 1.0 and 1.25
    assert rs.random_expectation(0.3) == (n + 1) / (k + 1)
    # Random search's mean over many seeds agrees with the formula (K = 1 at 2%).
    runs = rp.replay(rs, "random", 300, budget=len(list(rs.space.points())))
    mean = sum(rp.evaluations_to(r["best_so_far"], rs.optimum, 0.02) for r in runs) / 300
    assert abs(mean - rs.random_expectation(0.02)) < 1.5


def test_median_counts_misses_as_infinite() -> None:
    assert rp.median_evaluations([1, 3, None]) == 3.0
    assert rp.median_evaluations([1, None, None]) is None


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = t4(tmp_path, small_rows())
    assert cli.main(["replay", str(path), "--strategy", "random", "--seeds", "3",
                     "--budget", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"space", "strategy", "optimum", "runs"}
    assert out["strategy"] == "random" and out["optimum"] == 1.0 and out["space"] == str(path)
    assert [r["seed"] for r in out["runs"]] == [0, 1, 2]
    for r in out["runs"]:
        assert set(r) == {"seed", "best_so_far"} and len(r["best_so_far"]) == 5
        bsf = r["best_so_far"]
        first = next((i for i, b in enumerate(bsf) if b is not None), len(bsf))
        assert all(b is None for b in bsf[:first])
        assert all(a >= b for a, b in zip(bsf[first:], bsf[first + 1:]))


def test_cli_table_and_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from autotune.strategies import DEFAULT

    path = t4(tmp_path, small_rows())
    assert cli.main(["replay", str(path), "--seeds", "2", "--budget", "20"]) == 0
    out = capsys.readouterr().out
    assert f"strategy {DEFAULT}" in out and "median" in out and "random" in out
    assert "optimum 1 ms" in out and "\n   min-max " in out  # the unit, the seeds' spread
    with pytest.raises(SystemExit) as e:
        cli.main(["replay", "--help"])
    assert e.value.code == 0
    assert "--strategy" in capsys.readouterr().out
    assert cli.main(["replay", str(path), "--strategy", "nope"]) == 2


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared tuning spaces not available")
def test_shared_space_small_budget() -> None:
    path = SHARED / "convolution_milo-MI250X_T4.json.gz"
    rs = rp.load(path)
    assert len(rs.valid_times) == 4362
    assert math.isclose(rs.random_expectation(0.02), 872.6, rel_tol=1e-3)
    runs = rp.replay(rs, "local", [0, 1], budget=30)
    for r in runs:
        assert len(r["best_so_far"]) == 30
        assert all(b is None or b >= rs.optimum for b in r["best_so_far"])
    summary = rp.summarize(rs, runs)
    assert summary["random"]["2%"] == rs.random_expectation(0.02)


@pytest.mark.parametrize("bad", [math.nan, -1.0, 0.0, math.inf, "3.5", None, True])
def test_a_correct_configuration_needs_a_finite_positive_time(
        tmp_path: Path, bad: object, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [({"a": 1}, "correct", 1.0), ({"a": 2}, "correct", bad), ({"a": 3}, "runtime", bad)]
    path = t4(tmp_path, rows)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^results\[1\] \{'a': 2\}: the time of a correct "
                                          r"configuration must be a finite number above 0, got "):
        rp.load(path)
    assert cli.main(["replay", str(path), "--seeds", "1", "--budget", "2"]) == 2
    out, err = capsys.readouterr()
    assert "results[1] {'a': 2}" in err and "the recorded space is corrupt" in err
    assert "optimum" not in out and "Traceback" not in err
    assert rp.load(t4(tmp_path, [rows[0], rows[2]])).valid_times == [1.0]  # a failed one's time


def test_true_and_1_are_distinct_configurations(tmp_path: Path) -> None:
    rows = [({"a": True, "b": 1}, "correct", 1.0), ({"a": 1, "b": 1}, "correct", 2.0),
            ({"a": 0, "b": 1}, "correct", 3.0), ({"a": False, "b": 1}, "runtime", 4.0),
            ({"a": True, "b": 1}, "correct", 9.0)]  # a duplicate record: the first counts
    rs = rp.load(t4(tmp_path, rows))
    assert rs.valid_times == [1.0, 2.0, 3.0]
    assert [rs.objective({"a": a, "b": 1}) for a in (True, 1, 0, False)] == [1.0, 2.0, 3.0, None]
    assert [(v.value, v.type) for v in rs.space.params[0].values] == [
        (False, "bool"), (0, "int"), (True, "bool"), (1, "int")]
    assert rs.space.params[1].values == (1,)  # no equal values of two types: as in the file
    assert len(list(rs.space.points())) == 4
    for strategy in ("exhaustive", "random", "local", "bo+local"):
        run = rp.replay(rs, strategy, [0], budget=4)[0]
        assert len(run["best_so_far"]) == 4 and run["best_so_far"][-1] == 1.0, strategy


def _ok(config: dict, t: float = 1.0) -> dict:
    return {"configuration": config, "invalidity": "correct",
            "measurements": [{"name": "time", "value": t}]}


@pytest.mark.parametrize("data, message", [
    ({"schema_version": "1.0.0"}, "no list of `results`"),
    ({"results": [5]}, r"results\[0\]: a result is an object with a `configuration`"),
    ({"results": [{**_ok({"a": 1}), "measurements": [5]}]}, "`measurements` is a list"),
    ({"results": [_ok({"a": 1}), _ok({"b": 1}, 2.0)]},
     r"results\[1\] has the parameters \['b'\], results\[0\] has \['a'\]"),
    ({"results": [_ok({"a": [1]})]}, "parameter values are numbers, strings or booleans"),
], ids=["no-results", "not-an-object", "measurement", "other-parameters", "list-value"])
def test_a_malformed_space_is_a_load_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           data: dict, message: str) -> None:
    path = tmp_path / "bad_T4.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=message):
        rp.load(path)
    assert cli.main(["replay", str(path), "--strategy", "local"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tiledsl: cannot load {path}: ") and err.count("\n") == 1


def test_the_held_out_space_is_taken_from_the_packages_source_distribution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/heldout_spaces.py with pip's download stood in for (no network in tests):
    the fixture is taken out of the sdist and written where replay.py looks, gzipped."""
    import importlib.util
    import io
    import subprocess
    import tarfile
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "heldout_spaces.py"
    spec = importlib.util.spec_from_file_location("heldout_spaces", script)
    assert spec is not None and spec.loader is not None
    heldout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(heldout)
    data = gzip.decompress(t4(tmp_path, small_rows()).read_bytes())
    calls = []

    def pip_download(command: list[str], check: bool) -> None:
        calls.append(command)
        dest = Path(command[command.index("--dest") + 1])
        with tarfile.open(dest / "autotuning_methodology-1.1.0.tar.gz", "w:gz") as tar:
            info = tarfile.TarInfo(heldout.MEMBER)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    monkeypatch.setattr(subprocess, "run", pip_download)
    path = heldout.fetch(tmp_path / "spaces")
    assert calls and heldout.PACKAGE in calls[0] and "download" in calls[0]
    assert [str(p) for p in (tmp_path / "spaces").glob("*_T4.json*")] == [str(path)]
    fetched, original = rp.load(path), rp.load(tmp_path / "space_T4.json.gz")
    assert fetched.times == original.times and fetched.optimum == original.optimum
