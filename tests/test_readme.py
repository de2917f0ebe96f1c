"""The README stays true: every code block in it runs as pasted at the repository root, its
sample error is what tiledsl prints, and nothing it runs leaves files in the repository.

Each block runs in a temporary copy of the files the README uses (`examples/`,
`benchmarks/spaces/`), with tiledsl imported from this checkout; after each run the copy must
hold no new or changed file. `test_every_code_block_is_run` fails for a block no test runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import tiledsl as td
from support import pythonpath

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
COPIED = ("examples", "benchmarks/spaces")  # what the README's blocks read


@dataclass(frozen=True)
class Block:
    lang: str     # "python", "bash", or "" (printed output, a file listing)
    section: str  # the "## " heading above it, up to a colon; "" above the first
    code: str


def readme_blocks() -> list[Block]:
    blocks, section = [], ""
    parts = re.split(r"^```(\w*)\n(.*?)^```\n", README, flags=re.MULTILINE | re.DOTALL)
    for i in range(0, len(parts), 3):
        headings = re.findall(r"^## (.*)$", parts[i], flags=re.MULTILINE)
        section = headings[-1].split(":")[0] if headings else section
        if i + 2 < len(parts):
            blocks.append(Block(parts[i + 1], section, parts[i + 2]))
    return blocks


def blocks_of(lang: str, *sections: str) -> list[str]:
    return [b.code for b in readme_blocks() if b.lang == lang and b.section in sections]


# Which test runs the blocks of each (language, section).
TESTED = {
    ("bash", ""): "test_quickstart_leads_the_readme",
    ("python", "A tour"): "test_tour_runs",
    ("bash", "A tour"): "test_shell_tour_runs",
    ("python", "The language"): "test_language_examples_run",
    ("python", "The kernel object"): "test_language_examples_run",
    ("python", "Errors"): "test_language_examples_run",
    ("python", "Layout"): "test_language_examples_run",
    ("python", "Triton"): "test_triton_tour_runs",
    ("python", "Spatial dataflow accelerators"): "test_spatial_tour_runs",
    ("bash", "Autotuning"): "test_autotuning_commands_run",
    ("python", "Autotuning"): "test_autotune_example_runs",
    ("python", "Using kernels from frameworks"): "test_framework_examples_run_and_are_shown_in_full",
}


def test_every_code_block_is_run() -> None:
    blocks = readme_blocks()
    assert {b.lang for b in blocks} <= {"python", "bash", ""}, "a block of another language"
    untested = {(b.lang, b.section) for b in blocks if b.lang} - set(TESTED)
    assert not untested, f"README code blocks no test runs: {sorted(untested)}"
    assert len([b for b in blocks if b.lang]) >= 20


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what the README's blocks read, and a `tiledsl` command that runs this checkout."""
    top = tmp_path_factory.mktemp("readme")
    for rel in COPIED:
        shutil.copytree(ROOT / rel, top / "repo" / rel, ignore=shutil.ignore_patterns("__pycache__"))
    command = top / "bin" / "tiledsl"
    command.parent.mkdir()
    command.write_text(f"#!{sys.executable}\nimport sys\nfrom tiledsl.cli import main\n"
                       "if __name__ == '__main__':  # not in spawned workers, as pip's scripts\n"
                       "    sys.exit(main())\n")
    command.chmod(0o755)
    return top / "repo"


def files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def run_in(repo: Path, argv: list[str], timeout: float, cache: Path | None = None) -> str:
    """Runs `argv` at the root of the copy as a user at the repository root would (a fresh
    tiledsl cache if `cache` is given); fails if it fails or leaves a file in the repository.
    Returns its stdout."""
    env = {**os.environ, "PYTHONPATH": pythonpath(ROOT),
           "PATH": f"{repo.parent / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    if cache is not None:
        env["TILEDSL_CACHE_DIR"] = str(cache)
    before = files(repo)
    result = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    after = files(repo)
    left = sorted(p for p in after if before.get(p) != after[p])
    assert not left, f"left in the repository (new or changed): {left}"
    return result.stdout


RUNNER = ("import runpy, sys\n"
          "for path in sys.argv[1:]:\n"
          "    print('running', path, flush=True)\n"
          "    runpy.run_path(path, run_name='__main__')\n")


def run_python(repo: Path, blocks: list[str], scripts: Path, timeout: float,
               cache: Path | None = None) -> str:
    """Runs each block as its own script (`__main__`, a fresh namespace), all in one child
    process whose working directory is the copy's root, first on sys.path as in a REPL there."""
    paths = []
    for i, code in enumerate(blocks):
        paths.append(scripts / f"readme_block_{i}.py")
        paths[-1].write_text(code)
    return run_in(repo, [sys.executable, "-c", RUNNER, *map(str, paths)], timeout, cache)


def test_quickstart_leads_the_readme() -> None:
    """The first block installs and runs what CI runs; its tune is the autotuning block's first
    command, which test_autotuning_commands_run runs."""
    lines = [ln.split("#")[0].strip() for ln in blocks_of("bash", "")[0].strip().splitlines()]
    assert lines == ['pip install -e ".[dev]" && tiledsl tune examples/matmul.py --quick',
                     'pip install -e ".[dev]" && python -m pytest -n auto']
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[dev]"' in ci and "\npython -m pytest -n auto\n" in ci
    assert blocks_of("bash", "Autotuning")[0].startswith("tiledsl tune examples/matmul.py --quick ")


def test_tour_runs(repo: Path, tmp_path: Path) -> None:
    out = run_python(repo, blocks_of("python", "A tour"), tmp_path, timeout=120)
    assert "kernel @matmul" in out and "grid (%tm" in out


@td.tile_kernel
def matmul(a, b):
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=td.float32)
        for tk in td.tile(k):
            acc += a[tm, tk] @ b[tn, tk]
        out[tm, tn] = acc
    return out


def test_sample_error_matches_the_readme() -> None:
    shown = README.split("\nexamples/bad.py:9: ", 1)[1].split("```", 1)[0].strip().splitlines()
    with pytest.raises(td.ShapeError) as info:
        matmul(np.ones((300, 200), np.float32), np.ones((200, 100), np.float32))
    printed = str(info.value).splitlines()
    assert re.sub(r"^.*?:\d+: ", "", printed[0]) == shown[0]
    assert [ln.strip() for ln in printed[1:]] == [ln.strip() for ln in shown[1:]]


def test_triton_tour_runs(repo: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    code, *more = blocks_of("python", "Triton")  # the tour, then the section's other blocks
    code += ("\nassert report.registers > 0 and 'wgmma' in ptx\n"
             "print(td.testing.relative_error(out, a.astype(float) @ b))\n")
    out = run_python(repo, [*more, code], tmp_path, timeout=300)
    assert float(out.strip().splitlines()[-1]) < 5e-3


def test_spatial_tour_runs(repo: Path, tmp_path: Path) -> None:
    """Runs as pasted; its trace goes to a scratch directory, not the working directory."""
    code, *more = blocks_of("python", "Spatial dataflow accelerators")  # the tour, then others
    code += ("\nimport tiledsl as td\n"
             "assert report.cycles >= report.bound_cycles and 'agents' in config_json\n"
             "print(td.testing.relative_error(out, a.astype(float) @ b))\n")
    out = run_python(repo, [*more, code], tmp_path, timeout=300)
    assert float(out.strip().splitlines()[-1]) < 1e-5 and "MAC utilization" in out


FRAMEWORK_SCRIPTS = sorted((ROOT / "examples" / "frameworks").glob("*.py"))


@pytest.mark.parametrize("script", FRAMEWORK_SCRIPTS, ids=[p.stem for p in FRAMEWORK_SCRIPTS])
def test_framework_examples_run_and_are_shown_in_full(script: Path, repo: Path,
                                                      tmp_path: Path) -> None:
    """Each script is shown in full, and runs as pasted at the repository root (as `python -m
    examples.frameworks.NAME` runs it there)."""
    code = script.read_text().split('"""', 2)[2].strip()
    assert code in [b.strip() for b in blocks_of("python", "Using kernels from frameworks")], \
        f"README does not show {script.name} as it is"
    run_python(repo, [code], tmp_path, timeout=300)


def test_language_examples_run(repo: Path, tmp_path: Path) -> None:
    """Every Python block of the language, kernel-object, errors and layout sections runs as
    pasted (each asserts its result)."""
    pytest.importorskip("torch")
    blocks = blocks_of("python", "The language", "The kernel object", "Errors", "Layout")
    assert len(blocks) >= 5
    run_python(repo, blocks, tmp_path, timeout=600)


@pytest.mark.slow
def test_shell_tour_runs(repo: Path) -> None:
    """The tour's shell commands, as one script. About 45 s on 2 loaded cores, 20 s of it in
    Triton's interpreter."""
    pytest.importorskip("torch")
    [code] = blocks_of("bash", "A tour")
    out = run_in(repo, ["bash", "-e", "-o", "pipefail", "-c", code], timeout=600)
    assert "usage: tiledsl" in out and "kernel @matmul" in out


@pytest.mark.slow
def test_autotuning_commands_run(repo: Path, tmp_path: Path) -> None:
    """The autotuning block's commands, as one script, with an empty tiledsl cache; the GPU tune
    runs only where `nvidia-smi` finds a GPU. Its outputs go where it says (a scratch
    directory), none into the repository."""
    [code] = blocks_of("bash", "Autotuning")
    out = run_in(repo, ["bash", "-e", "-o", "pipefail", "-c", code + 'ls "$out"\n'],
                 timeout=900, cache=tmp_path / "cache")
    assert out.count("tuned vs the default config") >= 4
    assert {"study.db", "conv.png", "report.json", "study.json"} <= set(out.split())
    assert "384 valid configurations" in out  # the replay, on the space shipped in benchmarks/


@pytest.mark.slow
def test_autotune_example_runs(repo: Path, tmp_path: Path) -> None:
    out = run_python(repo, blocks_of("python", "Autotuning"), tmp_path, timeout=600,
                     cache=tmp_path / "cache")
    assert "tuned vs the default config" in out


def test_benchmarks_write_where_told_else_to_scratch(tmp_path: Path) -> None:
    """A benchmark run without `--out` writes its report to the scratch directory and says
    where, leaving the committed benchmarks/results/ as it is; every benchmark with an `--out`
    option takes its default from benchmarks/outputs.py."""
    for script in (ROOT / "benchmarks").glob("*.py"):
        source = script.read_text()
        assert '"results" /' not in source, f"{script.name} writes into benchmarks/results/"
        assert '"--out"' not in source or "out_path(opts.out" in source, script.name
    bench = tmp_path / "repo" / "benchmarks"
    (bench / "results").mkdir(parents=True)
    for name in ("sim_engine.py", "outputs.py", "results/sim_engine.json"):
        shutil.copy(ROOT / "benchmarks" / name, bench / name)
    committed = (bench / "results" / "sim_engine.json").read_bytes()
    result = subprocess.run(
        [sys.executable, str(bench / "sim_engine.py"), "--iterations", "20", "--repeats", "1"],
        cwd=tmp_path / "repo", capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": pythonpath(ROOT),
             "TILEDSL_BENCH_OUT": str(tmp_path / "scratch")})
    assert result.returncode == 0, result.stderr
    assert f"wrote {tmp_path / 'scratch' / 'sim_engine.json'}" in result.stdout
    assert (bench / "results" / "sim_engine.json").read_bytes() == committed
    assert sorted(p.name for p in (tmp_path / "repo").rglob("*")
                  if "__pycache__" not in p.parts) == [
        "benchmarks", "outputs.py", "results", "sim_engine.json", "sim_engine.py"]
