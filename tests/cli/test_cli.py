"""The `tiledsl` command line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tiledsl.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_run_checks_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(EXAMPLES / "matmul.py"), "--samples", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["kernel", "config", "values", "first-call-ms",
                                           "rel.err", "status", "checked", "against"]
    assert out.count(" ok ") == 3 and "default" in out and "sampled" in out
    assert out.count("reference()") == 3


def test_run_reports_a_wrong_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import numpy as np\nimport tiledsl as td\n\n@td.tile_kernel\ndef double(x):\n"
        "    out = td.empty_like(x)\n    for t in td.tile(x.shape[0]):\n"
        "        out[t] = x[t] * 3.0\n    return out\n\n"
        "def make_inputs(rng):\n    return (rng.standard_normal(50).astype(np.float32),)\n\n"
        "def reference(x):\n    return 2.0 * x.astype(np.float64)\n")
    assert main(["run", str(bad), "--samples", "1"]) == 1
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.parametrize("ref_state, status", [("None", 0), ("x.sum()", 1)])
def test_run_compares_an_optional_output_left_out(tmp_path: Path, ref_state: str, status: int,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`return out, None`: a reference that leaves it out too passes; one with an array fails."""
    f = tmp_path / "optional.py"
    f.write_text(
        "import numpy as np\nimport tiledsl as td\n\n@td.tile_kernel\ndef double(x):\n"
        "    out = td.empty_like(x)\n    for t in td.tile(x.shape[0]):\n"
        "        out[t] = x[t] * 2.0\n    return out, None\n\n"
        "def make_inputs(rng):\n    return (rng.standard_normal(50).astype(np.float32),)\n\n"
        f"def reference(x):\n    return 2.0 * x.astype(np.float64), {ref_state}\n")
    assert main(["run", str(f), "--samples", "1"]) == status
    assert ("FAIL" in capsys.readouterr().out) == bool(status)


def test_show_prints_ir_and_space(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(EXAMPLES / "softmax.py"), "--ir"]) == 0
    assert "kernel @softmax" in capsys.readouterr().out
    assert main(["show", str(EXAMPLES / "softmax.py"), "--space", "--backend", "spatial"]) == 0
    out = capsys.readouterr().out
    assert "config space of softmax on backend spatial" in out and "block_sizes[0]" in out


def test_kernel_selector_and_bad_paths(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", f"{EXAMPLES / 'matmul.py'}::nope"]) == 2
    assert "no tile kernel named 'nope'" in capsys.readouterr().err
    assert main(["run", "does/not/exist.py"]) == 2


def test_trace_errors_exit_1_with_the_message(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "ctrl.py"
    bad.write_text(
        "import numpy as np\nimport tiledsl as td\n\n@td.tile_kernel\ndef k(x):\n"
        "    out = td.empty_like(x)\n    for t in td.tile(x.shape[0]):\n"
        "        if x[t] > 0:\n            out[t] = x[t]\n    return out\n\n"
        "def make_inputs(rng):\n    return (rng.standard_normal(5).astype(np.float32),)\n")
    assert main(["run", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "ControlFlowError" in err and "ctrl.py:8" in err and "td.where" in err


def test_compile_reports_resources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("triton")
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    _store_tuned(str(EXAMPLES / "softmax.py"), "triton", {"block_sizes": [2], "num_warps": 2,
                                                          "num_stages": 3})
    assert main(["compile", str(EXAMPLES / "softmax.py"), "--arch", "sm_80", "--samples", "0",
                 "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["kernel", "config", "knobs", "arch"]
    assert "sm_80" in out and out.count("softmax") == 2
    assert "softmax  tuned    (2,) w2" in out and "softmax  default" in out
    tmp_path = tmp_path / "out"
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".cubin", ".cubin", ".ptx", ".ptx"]


def test_run_on_the_interpreter(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    assert main(["run", str(EXAMPLES / "rms_norm.py"), "--backend", "triton-interpret",
                 "--samples", "1"]) == 0
    assert capsys.readouterr().out.count(" ok") == 2


def test_simulate_prints_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.json"
    assert main(["simulate", str(EXAMPLES / "softmax.py"), "--arch", "lpu-like",
                 "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "static timing" in out and "roofline bound" in out and trace.exists()
    assert main(["simulate", str(EXAMPLES / "matmul.py"), "--arch", "nope"]) == 1
    assert "unknown spatial architecture 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["show", "--help"],
                                  ["compile", "--help"], ["simulate", "--help"],
                                  ["tune", "--help"], ["bench", "--help"], ["replay", "--help"]])
def test_help_everywhere(args: list[str]) -> None:
    result = subprocess.run([sys.executable, "-m", "tiledsl.cli", *args], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "usage: tiledsl" in result.stdout
    if args[0] != "replay":  # every command that reads a kernel file documents its hooks
        assert "reference_K(*args)" in result.stdout and "FILE::K" in result.stdout


def test_python_m_reports_a_subcommands_bad_option_in_one_line() -> None:
    """`python -m tiledsl.cli`: the CLIError that --config raises is the one main() catches."""
    result = subprocess.run([sys.executable, "-m", "tiledsl.cli", "bench",
                             str(EXAMPLES / "softmax.py"), "--config", "nope"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("tiledsl: --config takes a config")
    assert "Traceback" not in result.stderr


def test_console_script_is_installed() -> None:
    result = subprocess.run(["tiledsl", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "run" in result.stdout


def test_bench_times_default_tuned_and_given_configs_against_the_baseline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    report = tmp_path / "bench.json"
    softmax = str(EXAMPLES / "softmax.py")
    assert main(["bench", softmax, "--repeats", "3", "--dims", "m=33,n=70", "--dtype", "f16",
                 "--config", '{"block_sizes": [4]}', "--json", str(report)]) == 0
    rows = json.loads(report.read_text())["rows"]
    assert [r["what"] for r in rows] == ["tiledsl numpy (default)", "tiledsl numpy (--config)",
                                         "NumPy"]  # nothing tuned yet
    assert all(r["ms"] > 0 and r["inputs"] == "33x70:float16" for r in rows)
    assert rows[1]["config"] == "Config(block_sizes=(4,))" and rows[2]["over_baseline"] == 1.0
    # every median with its range and unit; a ratio between overlapping ranges is within noise
    assert all(r["min_ms"] <= r["ms"] <= r["max_ms"] and r["unit"] == "CPU ms" for r in rows)
    assert rows[2]["within_noise"] is False and all(
        r["within_noise"] == (r["min_ms"] <= rows[2]["max_ms"] and rows[2]["min_ms"] <= r["max_ms"])
        for r in rows[:2])
    out = capsys.readouterr().out
    assert "x baseline" in out and "range (min-max)" in out and "CPU ms" in out
    # after a tune for the same inputs, the cached config gets its own row
    assert main(["tune", softmax, "--backend", "numpy", "--trials", "3", "--finalists", "0",
                 "--dims", "m=33,n=70", "--dtype", "f16", "--no-progress",
                 "--storage", f"sqlite:///{tmp_path}/s.db"]) == 0
    assert main(["bench", softmax, "--repeats", "3", "--dims", "m=33,n=70", "--dtype", "f16",
                 "--json", str(report)]) == 0
    assert [r["what"] for r in json.loads(report.read_text())["rows"]][1] == \
        "tiledsl numpy (tuned)"


@pytest.mark.parametrize("args, status, message", [
    (["--dims", "q=3"], 2, "names its dimensions ['m', 'n'], not ['q']"),
    (["--dims", "m=0"], 2, "--dims takes name=size pairs"),
    (["--config", "nope"], 2, "--config takes a config as JSON"),
    (["--config", '{"block_sizes": [3]}'], 1, "ConfigError: in kernel 'softmax'"),
])
def test_bench_rejects_bad_options_clearly(args: list[str], status: int, message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(EXAMPLES / "softmax.py"), "--repeats", "1", *args]) == status
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bench_and_run_on_the_gpu_need_one(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a GPU is available")
    except ImportError:
        pass
    assert main(["bench", str(EXAMPLES / "softmax.py"), "--backend", "triton"]) == 1
    assert "benchmarking on backend 'triton' needs torch and an NVIDIA GPU" in \
        capsys.readouterr().err
    assert main(["run", str(EXAMPLES / "softmax.py"), "--backend", "triton"]) == 1
    err = capsys.readouterr().err
    assert "BackendError: backend 'triton' needs an NVIDIA GPU" in err and "Traceback" not in err


TWO_KERNELS = """import numpy as np
import tiledsl as td

@td.tile_kernel
def add1(x, y):
    (n,) = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for tn in td.tile(n):
        out[tn] = x[tn] + y[tn]
    return out

@td.tile_kernel
def mul1(x, y):
    (n,) = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for tn in td.tile(n):
        out[tn] = x[tn] * y[tn]
    return out

def make_inputs(rng):
    return tuple(rng.standard_normal(300).astype(np.float32) for _ in range(2))
"""


def test_tune_writes_one_t4_and_plot_per_kernel_and_gzips(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import gzip
    import json

    from autotune import replay
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    two = tmp_path / "two.py"
    two.write_text(TWO_KERNELS)
    tune = ["tune", str(two), "--trials", "2", "--no-progress",
            "--storage", f"sqlite:///{tmp_path}/s.db"]
    assert main([*tune, "--t4", str(tmp_path / "out"), "--plot", str(tmp_path / "conv.svg")]) == 0
    out = capsys.readouterr().out
    for kernel in ("add1", "mul1"):  # no suffix to replace: the kernel's name still goes in
        t4 = tmp_path / f"out-{kernel}"
        assert f"T4 export: {t4}\n" in out
        assert f"convergence plot: {tmp_path}/conv-{kernel}.svg\n" in out
        assert json.loads(t4.read_text())["metadata"]["kernel"] == kernel
        assert (tmp_path / f"conv-{kernel}.svg").read_text().lstrip().startswith("<?xml")
    assert not (tmp_path / "out").exists() and not (tmp_path / "conv.svg").exists()
    assert main([*tune, "--t4", str(tmp_path / "study.json.gz")]) == 0
    for kernel in ("add1", "mul1"):  # gzipped, as replay reads it
        with gzip.open(tmp_path / f"study-{kernel}.json.gz", "rt") as f:
            assert json.load(f)["metadata"]["kernel"] == kernel
        assert replay.load(tmp_path / f"study-{kernel}.json.gz").optimum > 0
    assert main(["replay", str(tmp_path / "study-add1.json.gz"), "--seeds", "1", "--budget", "2",
                 "--strategy", "random"]) == 0


@pytest.mark.parametrize("option", ["--json", "--plot", "--t4"])
def test_tune_checks_output_paths_before_tuning(
        option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import autotune.tune_cli

    def no_tune(*args: object, **kwargs: object) -> None:
        raise AssertionError("tuned before checking the output paths")
    monkeypatch.setattr(autotune.tune_cli, "tune", no_tune)
    softmax = str(EXAMPLES / "softmax.py")
    assert main(["tune", softmax, "--no-progress", option, str(tmp_path / "no" / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"tiledsl: {option} {tmp_path}/no/r.json: no such directory '{tmp_path}/no'\n"
    assert main(["tune", softmax, "--no-progress", option, str(tmp_path)]) == 2
    assert f"tiledsl: {option} {tmp_path}: is a directory, not a file" in capsys.readouterr().err


def test_tune_turns_a_failed_plot_write_into_a_clean_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import autotune.tune_cli

    class Result:
        def table(self) -> str:
            return "table"

        def plot(self, path: str) -> None:
            raise FileNotFoundError(2, "No such file or directory")

        def to_json(self) -> dict:
            return {}
    monkeypatch.setattr(autotune.tune_cli, "tune", lambda *args, **kwargs: Result())
    assert main(["tune", str(EXAMPLES / "softmax.py"), "--no-progress",
                 "--plot", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err == f"tiledsl: --plot: cannot write {tmp_path}/c.png: No such file or directory\n"


def _result() -> object:
    import tiledsl as td
    from autotune.tuner import Trial, TuneResult
    configs = [td.Config((16,)), td.Config((32,))]
    trials = [Trial(configs[0], 3.0, "ok"), Trial(configs[1], 2.0, "ok")]
    return TuneResult("k", "spatial", "cycles", configs[1], 2.0, configs[0], 3.0, trials, "s",
                      "sqlite://", 1.0)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_plot_that_cannot_be_written_is_an_error_not_a_success(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A full disk: matplotlib's own file write let the failed flush pass."""
    import autotune.tune_cli
    with pytest.raises(OSError):
        _result().plot("/dev/full")
    monkeypatch.setattr(autotune.tune_cli, "tune", lambda *args, **kwargs: _result())
    assert main(["tune", str(EXAMPLES / "softmax.py"), "--no-progress",
                 "--plot", "/dev/full"]) == 2
    assert "tiledsl: --plot: cannot write /dev/full: No space left on device\n" in \
        capsys.readouterr().err


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml"),
                                           (".pdf", b"%PDF"), ("", b"\x89PNG")])
def test_a_plot_is_written_in_the_format_its_suffix_names(suffix: str, magic: bytes,
                                                          tmp_path: Path) -> None:
    _result().plot(tmp_path / f"c{suffix}")
    assert (tmp_path / f"c{suffix}").read_bytes().startswith(magic)


@pytest.mark.parametrize("command, args, message", [
    ("bench", ["--repeats", "0"], "--repeats must be at least 1, got 0"),
    ("bench", ["--seed", "-1"], "--seed must be at least 0, got -1"),
    ("tune", ["--trials", "0"], "--trials must be at least 1, got 0"),
    ("tune", ["--trials", "-3"], "--trials must be at least 1, got -3"),
    ("tune", ["--timeout", "0"], "--timeout must be above 0 seconds, got 0.0"),
    ("tune", ["--timeout", "nan"], "--timeout must be above 0 seconds, got nan"),
    ("tune", ["--trial-timeout", "inf"], "--trial-timeout must be above 0 seconds, got inf"),
    ("tune", ["--finalists", "-1"],
     "--finalists must be at least 0 (0 keeps the search's fastest trial), got -1"),
    ("tune", ["--seed", "-1"], "--seed must be from 0 to 2**32 - 1, got -1"),
    ("run", ["--seed", "-1"], "--seed must be at least 0, got -1"),
])
def test_numeric_options_out_of_range_are_clean_errors(
        command: str, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import autotune.tune_cli

    def no_tune(*args: object, **kwargs: object) -> None:
        raise AssertionError("tuned with an option out of range")
    monkeypatch.setattr(autotune.tune_cli, "tune", no_tune)
    assert main([command, str(EXAMPLES / "softmax.py"), *args]) == 2
    assert capsys.readouterr().err == f"tiledsl: {message}\n"


def test_tune_checks_strategy_and_prune_for_every_kernel_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import autotune.tune_cli

    def no_tune(*args: object, **kwargs: object) -> None:
        raise AssertionError("tuned with a bad option")
    monkeypatch.setattr(autotune.tune_cli, "tune", no_tune)
    two = tmp_path / "two.py"
    two.write_text(TWO_KERNELS)
    assert main(["tune", str(two), "--strategy", ""]) == 1  # was: the default, silently
    assert "ConfigError: in kernel 'add1': unknown strategy ''" in capsys.readouterr().err
    assert main(["tune", str(two), "--prune", "nan"]) == 1
    assert "ConfigError: in kernel 'add1': prune factor must be above 1" in \
        capsys.readouterr().err


def test_simulate_writes_one_trace_per_kernel(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import json
    two = tmp_path / "two.py"
    two.write_text(TWO_KERNELS)
    assert main(["simulate", str(two), "--trace", str(tmp_path / "tr.json")]) == 0
    out = capsys.readouterr().out
    for kernel in ("add1", "mul1"):  # the kernel's name goes before the suffix
        trace = tmp_path / f"tr-{kernel}.json"
        assert f"trace             {trace}\n" in out
        assert json.loads(trace.read_text())["traceEvents"]
    assert not (tmp_path / "tr.json").exists()
    assert main(["simulate", f"{two}::mul1", "--trace", str(tmp_path / "one.json")]) == 0
    assert (tmp_path / "one.json").exists()


def test_simulate_checks_the_trace_path_before_simulating(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from tiledsl.runtime.kernel import TileKernel

    def no_simulate(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated before checking the trace path")
    monkeypatch.setattr(TileKernel, "simulate", no_simulate)
    softmax = str(EXAMPLES / "softmax.py")
    assert main(["simulate", softmax, "--trace", str(tmp_path / "no" / "t.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"tiledsl: --trace {tmp_path}/no/t.json: no such directory '{tmp_path}/no'\n"
    assert main(["simulate", softmax, "--trace", str(tmp_path)]) == 2
    assert f"tiledsl: --trace {tmp_path}: is a directory, not a file" in capsys.readouterr().err


IN_PLACE = """import numpy as np
import tiledsl as td

@td.tile_kernel
def relu_(x, y):
    (n,) = x.shape
    for t in td.tile(n):
        x[t] = td.maximum(x[t], 0.0)
        y[t] = y[t] * 2.0

def make_inputs(rng):
    x = np.abs(rng.standard_normal(50)).astype(np.float32)  # relu_ leaves x as it is
    return (x, rng.standard_normal(50).astype(np.float32))

def reference(x, y):
    return np.maximum(x.astype(np.float64), 0), 2.0 * y.astype(np.float64)
"""


def test_run_checks_every_argument_an_in_place_kernel_writes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = tmp_path / "inplace.py"
    kernel.write_text(IN_PLACE)
    assert main(["run", str(kernel), "--samples", "1"]) == 0
    assert capsys.readouterr().out.count(" ok") == 2
    kernel.write_text(IN_PLACE.replace("y[t] * 2.0", "y[t] * 3.0"))
    assert main(["run", str(kernel), "--samples", "1"]) == 1
    assert "FAIL" in capsys.readouterr().out


_KERNEL = '''import numpy as np
import tiledsl as td

@td.tile_kernel
def copy(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t]
    return out

def reference(x):
    return x
'''


@pytest.mark.parametrize("body, message", [
    ("def f(:\n    pass\n", "cannot load {file}: SyntaxError at line 3"),
    ('raise RuntimeError("boom at import")\n',
     'cannot load {file}: RuntimeError: boom at import (line 3: raise RuntimeError'),
    (_KERNEL + "def make_inputs(rng):\n    return rng.random(5).astype(np.float32)\n",
     "make_inputs(rng) must return a tuple of the arguments of 'copy', got a ndarray"),
    (_KERNEL + "def make_inputs():\n    return ()\n",
     "make_inputs(rng) failed: TypeError: make_inputs() takes 0 positional arguments"),
    (_KERNEL + "def make_inputs(rng):\n    return (np.zeros(10**14, np.float32),)\n",
     "make_inputs(rng) failed: MemoryError"),
], ids=["syntax", "import", "not-a-tuple", "no-rng", "memory"])
def test_errors_of_the_users_file_are_one_clear_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, message: str) -> None:
    file = tmp_path / "user.py"
    file.write_text("import numpy as np\nimport tiledsl as td\n" + body
                    if not body.startswith("import") else body)
    assert main(["run", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert message.format(file=file) in err, err


def test_run_checks_the_inputs_fit_the_kernel_before_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "user.py"
    file.write_text(_KERNEL + "def make_inputs(rng):\n    return (np.ones(4, np.float32), 3)\n")
    assert main(["run", str(file)]) == 1
    assert "too many positional arguments (parameters: x)" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["tune", "--trials", "2", "--json", ""], "--json needs a file name"),
    (["tune", "--trials", "2", "--plot", ""], "--plot needs a file name"),
    (["tune", "--trials", "2", "--t4", " "], "--t4 needs a file name"),
    (["bench", "--json", ""], "--json needs a file name"),
    (["compile", "--out", "{file}"], "not a directory"),
])
def test_empty_or_unusable_output_paths_are_rejected_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
        message: str) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    args = [a.format(file=afile) for a in args]
    assert main([args[0], str(EXAMPLES / "vector_add.py"), *args[1:]]) == 2
    assert message in capsys.readouterr().err


def test_negative_samples_are_an_option_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", str(EXAMPLES / "vector_add.py"), "--samples", "-1"])
    assert info.value.code == 2
    assert "--samples: must be at least 0, got -1" in capsys.readouterr().err


def test_an_unwritable_cache_directory_fails_before_tuning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(afile))
    assert main(["tune", str(EXAMPLES / "vector_add.py"), "--trials", "2", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"the cache directory {afile}" in err and "cannot be written" in err
    assert "trials in" not in err


def test_an_interrupt_is_one_line_and_status_130(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import tiledsl.cli.commands as cli

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "load_file", interrupted)
    assert main(["run", str(EXAMPLES / "vector_add.py")]) == 130
    assert capsys.readouterr().err == ("tiledsl: interrupted (a tune with --storage resumes "
                                       "where it stopped)\n")


def _store_tuned(file: str, backend: str, config: dict, arch: str | None = None) -> None:
    """A tuned config in the result cache for the file's inputs, as `tiledsl tune` stores it."""
    from autotune import cache
    from tiledsl.cli.inputs import example_args, load_file
    from tiledsl.runtime.config import Config
    module, (k, *_) = load_file(file)
    key = cache.key(k, list(example_args(module, k, 0)), backend, arch)
    cache.store(key, Config.from_dict(config), 1.0, "ms")


def test_each_kernel_of_a_file_is_checked_against_its_own_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "add1.py"  # its reference() is add1's, the kernel named like the file
    file.write_text(TWO_KERNELS + "\ndef reference(x, y):\n    return x.astype(np.float64) + y\n")
    assert main(["run", str(file), "--samples", "10"]) == 0  # was: mul1 FAIL against add's
    out = capsys.readouterr().out
    assert out.count(" ok ") == 10 and out.count("  reference()\n") == 10 and "FAIL" not in out
    assert out.count("unchecked") == 10
    assert "mul1: not checked: the file's reference() belongs to a file's only kernel or to the " \
           "kernel named like the file ('add1'); define reference_mul1(...)" in out
    # 10 configs in the space: 9 besides the default, and the table says so
    assert "add1: --samples 10: the numpy config space has 10 configs, only 9 besides the " \
           "default (all of them ran)" in out
    file.write_text(file.read_text() + "\ndef reference_mul1(x, y):\n    return x * 1.0 * y\n")
    assert main(["run", f"{file}::mul1", "--samples", "0"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"mul1 +default +\(\d+,\)", out) and out.count("reference_mul1()") == 1
    file.write_text(file.read_text().replace("x * 1.0 * y", "x * 2.0 * y"))
    assert main(["run", f"{file}::mul1", "--samples", "0"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_run_simulate_and_show_use_and_name_the_tuned_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path / "cache"))
    file = tmp_path / "two.py"
    file.write_text(TWO_KERNELS)
    _store_tuned(str(file), "spatial", {"block_sizes": [8], "buffer_depth": 3, "fold": "linear",
                                        "multicast": True})
    _store_tuned(str(file), "numpy", {"block_sizes": [32]})
    assert main(["simulate", f"{file}::add1"]) == 0
    assert "  config            tuned: (8,) buffer_depth=3 fold=linear multicast=True\n" in \
        capsys.readouterr().out
    assert main(["simulate", f"{file}::add1", "--config", '{"block_sizes": [16]}']) == 0
    assert "  config            --config: (16,) buffer_depth=2" in capsys.readouterr().out
    assert main(["simulate", f"{file}::add1", "--arch", "lpu-like"]) == 0  # tuned for another
    assert "  config            default: (" in capsys.readouterr().out
    assert main(["run", f"{file}::add1", "--samples", "1", "--backend", "spatial"]) == 0
    rows = capsys.readouterr().out.splitlines()[2:5]
    assert rows[0].split()[1:3] == ["tuned", "(8,)"] and rows[1].split()[1] == "default"
    assert re.fullmatch(r"\(\d+,\)", rows[1].split()[2])  # the estimate's pick (spatial/defaults)
    assert "buffer_depth=3" in rows[0] and rows[2].split()[1] == "sampled"
    assert main(["show", str(file), "--tuned"]) == 0
    out = capsys.readouterr().out
    assert "*  spatial  generic-8x8   300:f32 300:f32  (8,) buffer_depth=3" in out
    assert "*  numpy    cpu:" in out and "no tuned config of mul1 in the result cache" in out


@pytest.mark.parametrize("command", ["run", "show", "compile", "export", "simulate", "tune",
                                     "bench"])
def test_every_command_that_runs_a_kernel_takes_dims_and_dtype(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["--out", str(tmp_path / "pkg")] if command == "export" else []
    softmax = f"{EXAMPLES / 'softmax.py'}::softmax"
    assert main([command, softmax, "--dims", "q=3", "--dtype", "f16", *extra]) == 2
    assert "names its dimensions ['m', 'n'], not ['q']" in capsys.readouterr().err
    if command == "show":
        assert main([command, softmax, "--dims", "m=3,n=5", "--dtype", "f16"]) == 0
        assert "kernel @softmax(%x: tensor<3x5xf16>)" in capsys.readouterr().out
