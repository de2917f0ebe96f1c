"""Warming Triton's JIT cache without a GPU (`k.warm`, lowering/backends/triton/warmup.py): what it
compiles is what a launch on real memory would look up, it lands in Triton's on-disk cache for
other processes, and it leaves the launch path's state alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tiledsl as td
from support import ROOT, example, pythonpath

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

CONFIGS = [td.Config((64, 32, 32), 4, 2, group_m=8),
           td.Config((32, 64, 32), 4, 3, group_m=1, persistent=True),
           td.Config((64, 64, 32), 4, 3, group_m=8, tma=True)]


def _matmul_args() -> tuple:
    # 16-multiple sizes: TMA needs 16-byte-aligned strides; the tiles stay ragged (m, n).
    return example("matmul").make_inputs(np.random.default_rng(0), {"m": 150, "k": 96, "n": 80},
                                         np.float16)


@pytest.mark.parametrize("layout", ["row-major", "column-major b"])
@pytest.mark.parametrize("config", CONFIGS, ids=["plain", "persistent", "tma"])
def test_warm_compiles_what_a_launch_on_real_memory_looks_up(config: td.Config,
                                                             layout: str) -> None:
    """Meta tensors specialize as real memory does, strides included: the same Triton cache
    entry (hash) as the generated `launch` run on real tensors under the same target."""
    from lowering.backends.triton.interpret import to_torch
    from lowering.backends.triton.warmup import _targeting, _Warmup, warm
    from lowering.backends.triton.codegen import generate_cached
    from lowering.backends.triton.interpret import strides_of
    from lowering.backends.triton.loader import load

    mod = example("matmul")
    args = _matmul_args()
    if layout != "row-major":
        args = (args[0], np.asfortranarray(args[1]))
    fn = mod.matmul.traced(*args).lowered
    warmed = warm(fn, config, list(args), "sm_90", num_sms=132)
    real = [to_torch(a) for a in args]
    module = load(generate_cached(fn, config, strides_of(fn, real)).source, interpret=False)
    launched: list = []
    with _targeting(90):
        module.launch(*real, empty=lambda s, d: torch.empty(s, dtype=getattr(torch, d)),
                      full=lambda s, x, d: torch.full(s, x, dtype=getattr(torch, d)),
                      num_sms=132, wrap=lambda k: _Warmup(k, launched))
    assert [k.hash for k in warmed] == [k.hash for k in launched]
    assert warmed[0].metadata.target.arch == 90
    assert ".target sm_90a" in warmed[0].asm["ptx"]


def test_warm_leaves_the_launch_paths_binders_alone() -> None:
    """The stand-in target must not stay in the kernel's per-device binders, or a later real
    launch in the same process would reuse them."""
    from lowering.backends.triton.codegen import generate_cached
    from lowering.backends.triton.interpret import strides_of, to_torch
    from lowering.backends.triton.loader import load
    from triton.runtime.driver import driver

    mod = example("matmul")
    args = _matmul_args()
    config = td.Config((32, 32, 32), 2, 2, group_m=1)
    before = driver._active
    assert mod.matmul.warm(*args, config=config, arch="sm_80") == 1
    assert driver._active is before
    fn = mod.matmul.traced(*args).lowered
    module = load(generate_cached(fn, config, strides_of(fn, [to_torch(a) for a in args])).source,
                  interpret=False)
    assert len(module.matmul_kernel.device_caches) == 0


WARM_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, {tests!r})
import tiledsl as td
from support import example
mod = example("matmul")
args = mod.make_inputs(np.random.default_rng(0), {{"m": 150, "k": 96, "n": 80}}, np.float16)
config = td.Config(tuple(map(int, sys.argv[1:4])), 4, 2, group_m=8)
if sys.argv[4:] == ["launch"]:  # on a GPU: launch for real, and check the numbers
    import torch
    from lowering.backends.triton.interpret import to_numpy, to_torch
    out = mod.matmul.run(*[to_torch(a).cuda() for a in args], backend="triton", config=config)
    td.testing.assert_close(to_numpy(out.cpu()), mod.reference(*args), np.float16)
    print(1)
else:
    print(mod.matmul.warm(*args, config=config))
"""


@pytest.mark.slow  # (16 s: two subprocesses that import triton)
def test_a_warm_cache_serves_other_processes(tmp_path: Path) -> None:
    """What one process warms, another finds: no new entry in Triton's cache dir for the same
    config, one for another config."""
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"),
               TILEDSL_CACHE_DIR=str(tmp_path / "tiledsl"),
               PYTHONPATH=pythonpath(ROOT))
    script = tmp_path / "warm.py"
    script.write_text(WARM_SCRIPT.format(tests=str(ROOT / "tests")))

    def entries_after(*blocks: int | str) -> int:
        out = subprocess.run([sys.executable, str(script), *map(str, blocks)], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "1"
        # Compiled kernels only: a GPU launch also caches Triton's C launcher there.
        return len({f.parent for f in (tmp_path / "triton").glob("*/*.cubin")})

    first = entries_after(64, 32, 32)
    assert first > 0
    assert entries_after(64, 32, 32) == first
    second = entries_after(32, 32, 32)
    assert second > first
    if torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0):
        # The real launch on an sm_90 GPU loads what was warmed: Triton compiles nothing new.
        assert entries_after(32, 32, 32, "launch") == second


def test_warm_names_the_kernel_on_a_bad_architecture() -> None:
    with pytest.raises(td.BackendError, match=r"kernel 'matmul'.*'hopper'.*sm_90"):
        example("matmul").matmul.warm(*_matmul_args(), arch="hopper")
