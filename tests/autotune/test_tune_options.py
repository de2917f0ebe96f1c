"""Checking tuning options before anything runs (autotune/options.py), and the files the `tune`
command writes (per-kernel names, gzip)."""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune.finalists import FINALISTS
from autotune.options import check_tune_options
from autotune.prune import PRUNE_FACTOR
from autotune.tune_cli import write_json
from tiledsl.cli.outputs import check_output, check_plot, per_kernel
from tiledsl.cli.inputs import CLIError
from tiledsl.errors import ConfigError

GOOD: dict[str, Any] = {"trials": 40, "timeout": None, "strategy": None, "prune": PRUNE_FACTOR,
                        "finalists": FINALISTS, "seed": 0}  # tune()'s defaults


@pytest.mark.parametrize("changes", [
    {}, {"trials": 1, "timeout": 2.5, "strategy": "random", "prune": None, "finalists": 0},
    {"trials": np.int64(3), "timeout": 1, "strategy": "bo+local", "prune": 6, "seed": 2**32 - 1},
])
def test_good_tune_options_pass(changes: dict[str, Any]) -> None:
    check_tune_options("k", **{**GOOD, **changes})


@pytest.mark.parametrize("option, value, message", [
    ("trials", None, "trials must be an integer of at least 1, got None"),
    ("trials", "3", "trials must be an integer of at least 1, got '3'"),
    ("trials", 0, "trials must be an integer of at least 1, got 0"),
    ("trials", 2.5, "trials must be an integer"),
    ("trials", True, "trials must be an integer"),
    ("timeout", 0, "timeout must be a number of seconds above 0"),
    ("timeout", -1.0, "timeout must be a number of seconds above 0"),
    ("timeout", math.nan, "timeout must be a number of seconds above 0"),
    ("timeout", "5", "timeout must be a number of seconds above 0"),
    ("trial_timeout", 0, "trial_timeout must be a finite number of seconds above 0, got 0"),
    ("trial_timeout", math.inf, "trial_timeout must be a finite number of seconds above 0"),
    ("strategy", "", "unknown strategy ''; known: ["),
    ("strategy", "TPE", "unknown strategy 'TPE'; known: ["),
    ("strategy", 5, "strategy must be a strategy's name"),
    ("prune", "x", "prune factor must be above 1 (or None to time every config), got 'x'"),
    ("prune", 1.0, "prune factor must be above 1"),
    ("prune", math.nan, "prune factor must be above 1"),
    ("finalists", "x", "finalists must be an integer of at least 0"),
    ("finalists", -1, "finalists must be an integer of at least 0"),
    ("finalists", 1.5, "finalists must be an integer of at least 0"),
    ("seed", None, "seed must be an integer from 0 to 2**32 - 1, got None"),
    ("seed", "a", "seed must be an integer from 0 to 2**32 - 1"),
    ("seed", -1, "seed must be an integer from 0 to 2**32 - 1"),
    ("seed", 2**32, "seed must be an integer from 0 to 2**32 - 1"),
])
def test_bad_tune_options_are_config_errors_naming_option_and_kernel(
        option: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_tune_options("vector_add", **{**GOOD, option: value})
    assert info.value.kernel == "vector_add"
    assert str(info.value).startswith("in kernel 'vector_add': ") and message in str(info.value)


@pytest.mark.parametrize("path, kernel, expected", [
    ("study.json", "matmul", "study-matmul.json"),
    ("out.json.gz", "matmul", "out-matmul.json.gz"),
    ("study.json.gz", "add1", "study-add1.json.gz"),
    ("out", "matmul", "out-matmul"),
    ("out.t4", "matmul", "out-matmul.t4"),
    ("conv.png", "matmul", "conv-matmul.png"),
    ("dir.v2/run.1.svg", "softmax", "dir.v2/run.1-softmax.svg"),
])
def test_per_kernel_output_names_keep_the_suffix(path: str, kernel: str, expected: str) -> None:
    assert per_kernel(path, kernel) == str(Path(expected))


def test_json_is_gzipped_when_the_path_ends_with_gz(tmp_path: Path) -> None:
    data = {"results": [{"configuration": {"a": 1}}]}
    write_json("--t4", str(tmp_path / "s.json.gz"), data)
    with gzip.open(tmp_path / "s.json.gz", "rt") as f:
        assert json.load(f) == data
    write_json("--t4", str(tmp_path / "s.json"), data)
    assert json.loads((tmp_path / "s.json").read_text()) == data


def test_failed_writes_are_errors_naming_the_option(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(CLIError, match=r"^--t4: cannot write .*s\.json\.gz: No such file"):
        write_json("--t4", str(tmp_path / "missing" / "s.json.gz"), {})
    with pytest.raises(CLIError, match=r"^--json: cannot write .*: Is a directory"):
        write_json("--json", str(tmp_path / "d"), {})


def test_output_paths_are_checked(tmp_path: Path) -> None:
    check_output("--json", tmp_path / "r.json")  # a new file in an existing folder
    check_output("--json", "r.json")  # in the working directory
    with pytest.raises(CLIError, match="^--json .*r.json: no such directory '.*no_such_dir'"):
        check_output("--json", tmp_path / "no_such_dir" / "r.json")
    with pytest.raises(CLIError, match="^--t4 .*: is a directory, not a file"):
        check_output("--t4", tmp_path)
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(CLIError, match="^--t4 .*: not writable"):
            check_output("--t4", locked / "s.json")
    check_plot("--plot", tmp_path / "c.svg")
    check_plot("--plot", tmp_path / "c")  # PNG
    with pytest.raises(CLIError, match="^--plot .*c.t4: matplotlib writes no 't4' files"):
        check_plot("--plot", tmp_path / "c.t4")
