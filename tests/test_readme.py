"""The README stays true: its tour runs and its sample error is what tiledsl prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tiledsl as td
from support import pythonpath

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_quickstart_leads_the_readme() -> None:
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    lines = [ln.split("#")[0].strip() for ln in first_block.strip().splitlines()]
    assert lines == ['pip install -e ".[dev]" && tiledsl tune examples/matmul.py --quick',
                     'pip install -e ".[dev]" && python -m pytest']
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[dev]"' in ci and "python -m pytest" in ci


def test_tour_runs(tmp_path: Path) -> None:
    code = README.split("```python", 1)[1].split("```", 1)[0]
    script = tmp_path / "tour.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "kernel @matmul" in result.stdout and "grid (%tm" in result.stdout


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


def test_triton_tour_runs() -> None:
    pytest.importorskip("torch")
    code = README.split("## Triton:", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    code += ("\nassert report.registers > 0 and 'wgmma' in ptx\n"
             "print(td.testing.relative_error(out, a.astype(float) @ b))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, cwd=ROOT)  # as in a REPL at the repository root
    assert result.returncode == 0, result.stderr
    assert float(result.stdout.strip().splitlines()[-1]) < 5e-3


def test_spatial_tour_runs(tmp_path: Path) -> None:
    code = README.split("## Spatial dataflow", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    code += ("\nassert report.cycles >= report.bound_cycles and 'agents' in config_json\n"
             "print(td.testing.relative_error(out, a.astype(float) @ b))\n")
    code = "import tiledsl as td\n" + code
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": pythonpath(ROOT)})
    assert result.returncode == 0, result.stderr
    assert float(result.stdout.strip().splitlines()[-1]) < 1e-5
    assert (tmp_path / "gemm_trace.json").exists() and "MAC utilization" in result.stdout


FRAMEWORK_SCRIPTS = sorted((ROOT / "examples" / "frameworks").glob("*.py"))


@pytest.mark.parametrize("script", FRAMEWORK_SCRIPTS, ids=[p.stem for p in FRAMEWORK_SCRIPTS])
def test_framework_examples_run_and_are_shown_in_full(script: Path) -> None:
    code = script.read_text().split('"""', 2)[2].strip()
    assert code in README, f"README does not show {script.name} as it is"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]


def test_language_examples_run(tmp_path: Path) -> None:
    """Every Python block of the language, kernel-object and errors sections runs as pasted
    (each asserts its result), each as its own script (`__main__`, a fresh namespace), all in
    one child process at the repository root."""
    pytest.importorskip("torch")
    sections = [README.split(title, 1)[1].split("\n## ", 1)[0]
                for title in ("## The language", "## The kernel object", "## Errors")]
    blocks = [b.split("```", 1)[0] for section in sections
              for b in section.split("```python")[1:]]
    assert len(blocks) >= 5
    scripts = []
    for i, code in enumerate(blocks):
        script = tmp_path / f"language_{i}.py"
        script.write_text(code)
        scripts.append(str(script))
    runner = ("import runpy, sys, traceback\n"
              "for path in sys.argv[1:]:\n"
              "    print('running', path, flush=True)\n"
              "    runpy.run_path(path, run_name='__main__')\n")
    result = subprocess.run([sys.executable, "-c", runner, *scripts], capture_output=True,
                            text=True, timeout=600, cwd=ROOT)
    failed = result.stdout.strip().splitlines()[-1:] if result.returncode else []
    assert result.returncode == 0, f"{failed}:\n{result.stderr}"
