"""Golden tests of each pass and of the whole pipeline on the examples.

Each tests/golden/passes/<pass-name>.ir is parsed, the pass of that name runs on it, and the
result must equal <pass-name>.expected.ir. The examples' IR after the pipeline is pinned in
tests/golden/examples/. Regenerate after a deliberate change with TILEDSL_ACCEPT=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from lowering.pipeline import PASSES, Pipeline
from support import example
from tiledsl.ir.parser import parse_ir
from tiledsl.ir.printer import print_ir
from tiledsl.ir.verify import verify

GOLDEN = Path(__file__).parents[1] / "golden"
ACCEPT = os.environ.get("TILEDSL_ACCEPT") == "1"
PASS_CASES = sorted(p for p in (GOLDEN / "passes").glob("*.ir") if not p.name.endswith(".expected.ir"))
GOLDEN_EXAMPLES = ["matmul", "softmax", "layer_norm", "attention"]


def check_golden(path: Path, text: str) -> None:
    if ACCEPT or not path.exists():
        path.write_text(text)
        if not ACCEPT:
            pytest.fail(f"{path} did not exist; wrote it (check it and commit)")
    assert text == path.read_text(), f"{path} differs (TILEDSL_ACCEPT=1 to regenerate)"


@pytest.mark.parametrize("case", PASS_CASES, ids=lambda p: p.stem)
def test_pass_golden(case: Path) -> None:
    fn = parse_ir(case.read_text())
    verify(fn)
    PASSES[case.name.split(".")[0]].run(fn)
    verify(fn)
    check_golden(case.with_suffix(".expected.ir"), print_ir(fn, locs=False))


def test_every_pass_has_a_golden_case() -> None:
    assert {p.name.split(".")[0] for p in PASS_CASES} == set(PASSES)


@pytest.mark.parametrize("name", GOLDEN_EXAMPLES)
def test_example_pipeline_golden(name: str) -> None:
    module = example(name)
    kernel = getattr(module, name)
    args = module.make_inputs(np.random.default_rng(0))
    traced = kernel.traced(*args)
    lowered = Pipeline(verify_each=True)(traced.ir.clone())
    assert print_ir(lowered) == print_ir(traced.lowered)
    check_golden(GOLDEN / "examples" / f"{name}.ir", print_ir(traced.lowered, locs=False))


def test_the_triton_backends_passes_run_on_a_copy_and_numpy_runs_the_ir_as_written() -> None:
    module = example("softmax")
    traced = module.softmax.traced(*module.make_inputs(np.random.default_rng(0)))
    triton_ir = print_ir(traced.for_backend("triton"), locs=False)
    assert traced.for_backend("numpy") is traced.lowered
    assert traced.for_backend("triton") is traced.for_backend("triton-interpret") or \
        print_ir(traced.for_backend("triton-interpret"), locs=False) == triton_ir
    assert " exp2 " in triton_ir and " exp " not in triton_ir
    assert " exp " in print_ir(traced.lowered, locs=False)
