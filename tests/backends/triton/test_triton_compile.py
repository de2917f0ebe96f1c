"""Generated Triton code: golden sources, and ahead-of-time PTX/cubin for sm_80 and sm_90 on a
machine without a GPU, with resource usage read from the cubin."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import tiledsl as td
from support import EXAMPLE_NAMES, example, kernel_of

pytest.importorskip("triton")

GOLDEN = Path(__file__).parents[2] / "golden" / "triton"
ACCEPT = os.environ.get("TILEDSL_ACCEPT") == "1"
GOLDEN_EXAMPLES = {  # name: (dims, config)
    "matmul": ({"m": 300, "k": 200, "n": 100}, td.Config((64, 64, 32), 4, 3, group_m=8)),
    "softmax": ({"m": 150, "n": 300}, td.Config((4,), 4, 3)),
    "layer_norm": ({"m": 150, "n": 256}, td.Config((8,), 4, 3)),
    "attention": ({"batch": 2, "seq": 128, "d": 64}, td.Config((64, 32), 4, 2)),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_EXAMPLES))
def test_generated_source_golden(name: str) -> None:
    dims, config = GOLDEN_EXAMPLES[name]
    args = example(name).make_inputs(np.random.default_rng(0), dims, np.float16)
    text = kernel_of(name).source(*args, target="triton", config=config)
    path = GOLDEN / f"{name}.py"
    if ACCEPT or not path.exists():
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if not ACCEPT:
            pytest.fail(f"{path} did not exist; wrote it (check it and commit)")
    assert text == path.read_text(), f"{path} differs (TILEDSL_ACCEPT=1 to regenerate)"


def test_masks_only_where_edges_are_ragged() -> None:
    mod = example("matmul")
    aligned = mod.make_inputs(np.random.default_rng(0), {"m": 128, "k": 64, "n": 128}, np.float16)
    text = mod.matmul.source(*aligned, target="triton", config=td.Config((64, 64, 32), 4, 3,
                                                                          group_m=8))
    assert "mask" not in text and "tl.dot(a_tile, b_tile, acc)" in text
    ragged = mod.make_inputs(np.random.default_rng(0), {"m": 100, "k": 64, "n": 128}, np.float16)
    text = mod.matmul.source(*ragged, target="triton", config=td.Config((64, 64, 32), 4, 3,
                                                                         group_m=8))
    assert "mask_tm = offs_tm < 100" in text and "mask_tn" not in text and "mask_tk" not in text


def test_int64_offsets_only_when_int32_could_overflow() -> None:
    mod = example("vector_add")
    small = mod.make_inputs(np.random.default_rng(0), {"n": 1000}, np.float32)
    assert "int64" not in mod.vector_add.source(*small, target="triton")
    big = [np.lib.stride_tricks.as_strided(a, (3 * 2**30,), (0,)) for a in small[:2]]
    text = mod.vector_add.source(*big, target="triton")  # zero strides: no memory is touched
    loads = [ln for ln in text.splitlines() if "tl.load" in ln]
    stores = [ln for ln in text.splitlines() if "tl.store" in ln]
    assert loads and not any("int64" in ln for ln in loads)  # a stride of 0 never overflows
    assert stores and all(".to(tl.int64)" in ln for ln in stores)  # 3 * 2**30 outputs do


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_every_example_compiles(name: str, arch: str) -> None:
    args = example(name).make_inputs(np.random.default_rng(0), dtype=np.float16)
    if name in ("fp8_gemm", "block_scaled_matmul") and arch == "sm_80":  # float8_e4m3fn needs sm_89
        with pytest.raises(td.BackendError, match="before sm_89"):
            kernel_of(name).compile(*args, arch=arch)
        return
    reports = kernel_of(name).compile(*args, arch=arch)
    assert reports
    for r in reports:
        assert r.arch == arch and r.registers > 0 and r.shared_bytes >= 0
        assert f".target {arch}" in r.ptx and len(r.cubin) > 1000
        assert r.spill_bytes == 0 and r.compile_seconds >= 0  # the default config


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_default_fp32_configs_do_not_spill_on_hopper(name: str) -> None:
    """Default blocks and warps that fit the registers. Before: softmax, layer norm and RMS norm
    over 300 fp32 columns (64 rows at a time, 4 warps) spilled 3144, 1360 and 600 bytes per
    thread on sm_90, an fp32 batched matmul 440, fp32 attention 6928 (312 at 8 warps)."""
    args = example(name).make_inputs(np.random.default_rng(0), dtype=np.float32)
    reports = kernel_of(name).compile(*args, arch="sm_90")  # one per grid (launch)
    assert reports and [r.problem for r in reports] == [None] * len(reports)


def test_default_fp32_attention_with_a_head_of_128_does_not_spill() -> None:
    """Its two fp32 dots take smaller default blocks (at 64x64 and 8 warps: 840 bytes)."""
    args = example("attention").make_inputs(np.random.default_rng(0),
                                            {"batch": 2, "seq": 300, "d": 128}, np.float32)
    assert [r.problem for r in kernel_of("attention").compile(*args, arch="sm_90")] == [None]


@pytest.mark.parametrize(("name", "dims", "blocks", "warps"), [
    ("vector_add", {"n": 10**6}, (1024,), 4),  # as Triton's tutorial (977 programs), not 64
    ("vector_add", {"n": 300}, (512,), 4),  # no larger than the extent
    ("softmax", {"m": 150, "n": 300}, (4,), 4),  # 4 rows of 512 (padded)
    ("softmax", {"m": 150, "n": 20000}, (1,), 16),  # one row of 32768: 128 values a thread
    ("axpby", {"m": 150, "n": 260}, (32, 64), 4),
    ("matmul", {"m": 512, "k": 512, "n": 512}, (64, 64, 64), 4),  # dots keep 64 (fp16)
])
def test_default_blocks_size_the_largest_tile(name: str, dims: dict, blocks: tuple,
                                              warps: int) -> None:
    args = example(name).make_inputs(np.random.default_rng(0), dims, np.float16)
    default = kernel_of(name).config_space(*args, backend="triton").default()
    assert (default.block_sizes, default.num_warps) == (blocks, warps)


def test_hopper_matmul_uses_wgmma_and_pipelines() -> None:
    mod = example("matmul")
    args = mod.make_inputs(np.random.default_rng(0), {"m": 512, "k": 512, "n": 512}, np.float16)
    config = td.Config((128, 128, 64), num_warps=8, num_stages=3, group_m=8)
    ptx = mod.matmul.source(*args, target="ptx", config=config, arch="sm_90")
    assert "wgmma" in ptx
    (report,) = mod.matmul.compile(*args, config=config, arch="sm_90")
    assert report.shared_bytes >= 3 * (128 * 64 + 64 * 128) * 2 * 2 // 3  # >= 2 stages in smem
    assert report.problem is None


def test_tma_lowers_to_bulk_tensor_copies_on_hopper() -> None:
    mod = example("matmul")
    args = mod.make_inputs(np.random.default_rng(0), {"m": 512, "k": 512, "n": 512}, np.float16)
    config = td.Config((128, 128, 64), 4, 3, group_m=8, tma=True, persistent=True)
    hopper = mod.matmul.compile(*args, config=config, arch="sm_90")[0]
    ampere = mod.matmul.compile(*args, config=config, arch="sm_80")[0]
    assert "cp.async.bulk.tensor" in hopper.ptx and "cp.async.bulk.tensor" not in ampere.ptx


def test_compile_cache_hits() -> None:
    mod = example("softmax")
    args = mod.make_inputs(np.random.default_rng(0), dtype=np.float32)
    first = mod.softmax.compile(*args, arch="sm_80")[0]
    again = mod.softmax.compile(*args, arch="sm_80")[0]
    assert again == first  # read back from the disk cache: same paths, same numbers


def test_spilling_configs_are_reported() -> None:
    mod = example("matmul")
    args = mod.make_inputs(np.random.default_rng(0), dtype=np.float32)
    (report,) = mod.matmul.compile(*args, config=td.Config((128, 128, 32), 4, 1, group_m=4),
                                   arch="sm_90")  # 648 and 128 bytes (triton 3.9, 3.6)
    assert report.spill_bytes > 0 and "spills" in (report.problem or "")


def test_serialized_wgmma_is_reported() -> None:
    """compile.py `ptxas_notes`: ptxas's "Potential Performance Loss" notes, which Triton never
    shows, become the report's problem (and `tiledsl compile`'s and a package's warning).
    Causal attention at 128x64, 8 warps and group_m=1 with the diagonal loop's literal bound
    (before loops.py `opaque_trips`) got C7515 from triton 3.9's ptxas; now it gets none."""
    from dataclasses import replace
    args = [np.zeros((4, 1024, 64), np.float16)] * 3
    (report,) = kernel_of("attention").compile(
        *args, config=td.Config((128, 64), 8, 3, group_m=1, tma=False), arch="sm_90")
    assert report.ptxas_notes == () and report.problem is None
    from unittest import mock

    from lowering.backends.triton import compile as triton_compile
    note = "(C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized"
    with mock.patch.object(triton_compile, "ptxas_notes", return_value=(note,)):
        assert replace(report).problem == f"ptxas: {note}"  # a copy finds its notes anew
    # the notes are advice: a ptxas that cannot run gives none, not a failed compile
    with mock.patch("subprocess.run", side_effect=FileNotFoundError("ptxas")):
        assert triton_compile.ptxas_notes(report.ptx) == ()


def test_unknown_arch_is_a_clear_error() -> None:
    args = example("softmax").make_inputs(np.random.default_rng(0))
    with pytest.raises(td.BackendError, match="unknown architecture 'sm_7'") as info:
        kernel_of("softmax").compile(*args, arch="sm_7")
    assert info.value.kernel == "softmax"


def test_a_process_that_imported_triton_interpreted_says_so_when_a_compile_fails(
        tmp_path: Path) -> None:
    """TRITON_INTERPRET=1 at import makes tl.sum interpreter code for good: compiling softmax
    then crashed inside Triton ('incompatible function arguments')."""
    import subprocess
    import sys
    code = ("import numpy as np, tiledsl as td\nfrom support import example, kernel_of\n"
            "args = example('softmax').make_inputs(np.random.default_rng(0))\n"
            "try:\n    kernel_of('softmax').compile(*args, arch='sm_90')\n"
            "except td.BackendError as e:\n    print(e)\n")
    env = dict(os.environ, TRITON_INTERPRET="1", TILEDSL_CACHE_DIR=str(tmp_path),
               TRITON_CACHE_DIR=str(tmp_path / "triton"),
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[2]),
                                           str(Path(__file__).parents[2] / "tests"),
                                           os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert "imported with TRITON_INTERPRET=1" in out.stdout, out.stdout + out.stderr
    assert "unset TRITON_INTERPRET" in out.stdout


def test_config_space_prunes_what_cannot_compile() -> None:
    mod = example("matmul")
    args = mod.make_inputs(np.random.default_rng(0), {"m": 512, "k": 512, "n": 512}, np.float16)
    space = mod.matmul.config_space(*args, backend="triton")
    assert {p.name for p in space.params} >= {"num_warps", "num_stages", "group_m"}
    assert "tl.dot needs blocks >= 16" in (space.reason(td.Config((8, 64, 64), 4, 3, group_m=8))
                                           or "")
    assert "shared memory" in (space.reason(td.Config((256, 256, 256), 8, 4, group_m=8)) or "")
    assert all(min(c.block_sizes) >= 16 for c in space.sample(20, seed=0))


def test_interpreted_runs_leave_triton_language_untouched() -> None:
    """The interpreter patches triton.language for nested calls; a later compile must not see
    it (this once broke GPU compiles that followed interpreted runs in one process)."""
    pytest.importorskip("torch")
    import triton.language as tl

    from lowering.backends.triton.interpret import _language_objects
    before = [dict(vars(o)) for o in _language_objects()]
    mod = example("rms_norm")  # tl.sum and a float-math helper: nested interpreted calls
    args = mod.make_inputs(np.random.default_rng(0), {"m": 5, "n": 40}, np.float32)
    mod.rms_norm.run(*args, backend="triton-interpret")
    after = [dict(vars(o)) for o in _language_objects()]
    for b, a in zip(before, after):  # every attribute that existed is the original again
        assert {k for k in b if a.get(k) is not b[k]} == set()
    assert tl.core.program_id is before[1]["program_id"]
    gelu = example("gemm_bias_gelu")  # compiles fine right after the interpreted run
    gargs = gelu.make_inputs(np.random.default_rng(0), dtype=np.float16)
    config = td.Config((32, 32, 16), 4, 1, group_m=4, tma=False, persistent=False)
    assert gelu.gemm_bias_gelu.compile(*gargs, config=config, arch="sm_80")[0].registers > 0


@td.tile_kernel
def carried_from_scalars(x, limit):
    """Tiles made from scalars (`td.zeros((tm,)) + 1.0`) carried by a `for` and an `if`: Triton
    writes them as scalars, and a loop-carried value or an `if` result must keep its shape
    there (the interpreter accepted the scalar; compiling failed). (tests/lang/test_while.py
    covers the `while` op's widening of its operands the same way.)"""
    m, n = x.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.float32) + 1.0
        for tn in td.tile(n):
            acc = acc + td.sum(x[tm, tn], axis=1)
        low = td.zeros((tm,), dtype=td.float32) - float("inf")
        if limit > 3.0:
            low = td.zeros((tm,), dtype=td.float32) + 2.0
        out[tm] = acc + low
    return out


def test_tiles_made_from_scalars_keep_their_shape_when_carried() -> None:
    x = np.random.default_rng(0).standard_normal((9, 20)).astype(np.float32)
    for limit in (4.0, 1.0):
        expected = x.sum(1) + 1.0 + (2.0 if limit > 3.0 else -np.inf)
        np.testing.assert_allclose(carried_from_scalars.run(x, limit, backend="triton-interpret"),
                                   expected, rtol=1e-5)
    (report,) = carried_from_scalars.compile(x, 4.0, arch="sm_90")
    assert report.registers > 0


@td.tile_kernel
def decayed_dot(a, b, s):
    """fla's chunk_fwd_h without an initial state: a zeros accumulator scaled by a loaded decay
    (written as the scalar `0.0 * decay`), then `acc += a @ b`, which becomes tl.dot's acc."""
    m, n = a.shape[0], b.shape[1]
    out = td.empty((m, n), dtype=td.float32)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn), dtype=td.float32)
        acc *= td.exp2(s[0])
        acc += a[tm, :] @ b[:, tn]
        out[tm, tn] = acc
    return out


def test_a_dot_accumulator_written_as_a_scalar_is_widened_to_its_tile() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 32, 32)).astype(np.float32)
    s = np.array([0.5], np.float32)
    want = a.astype(np.float64) @ b
    td.testing.assert_close(decayed_dot.run(a, b, s, backend="triton-interpret"), want,
                            np.float32)
    assert "tl.dot(a_tile, b_tile, tl.zeros(" in decayed_dot.source(a, b, s, target="triton")
    (report,) = decayed_dot.compile(a, b, s, arch="sm_90")
    assert report.registers > 0
