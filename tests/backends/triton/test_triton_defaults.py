"""The Triton backend's default configs on Hopper: Triton's tutorial configs for large 16-bit
GEMMs, enough programs for row-wise kernels, no spills on sm_90, and no duplicate tma configs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from support import EXAMPLE_NAMES, example, kernel_of

import tiledsl as td

pytest.importorskip("triton")

F16 = np.float16


def _default(name: str, *args: np.ndarray | float) -> td.Config:
    return kernel_of(name).config_space(*args, backend="triton").default()


def _problem(name: str, rows: int, cols: int, dtype: type) -> tuple:
    x = np.zeros((rows, cols), dtype)
    w = np.zeros((cols,), dtype)
    return {"softmax": (x,), "rms_norm": (x, w), "layer_norm": (x, w, w, 1e-5),
            "row_sum": (x,)}[name]


@pytest.mark.parametrize("dtype", [F16, ml_dtypes.bfloat16])
def test_large_16bit_gemm_takes_the_tutorials_hopper_config(dtype: type) -> None:
    """128x256x64, 8 warps, 3 stages at 4096^3 (the old 64x64x64 w4: 336 us in the model,
    this 146 us); an erf epilogue takes 128x128 (at 128x256 it spilled 120 bytes)."""
    a = np.zeros((4096, 4096), dtype)
    config = _default("matmul", a, a)
    assert (config.block_sizes, config.num_warps, config.num_stages) == ((128, 256, 64), 8, 3)
    config = _default("gemm_bias_gelu", a, a, a[0])
    assert (config.block_sizes, config.num_warps) == ((128, 128, 64), 8)


@pytest.mark.parametrize(("m", "k", "n", "blocks", "warps"), [
    (2048, 2048, 2048, (128, 128, 64), 8),  # 128x256 would run 128 programs on 132 SMs
    (1024, 1024, 1024, (64, 64, 64), 4),
    # clamped to the extents' powers of two (one program); 8 warps since the register estimate
    # counts 4 warps' 64x64 accumulator at 70 (the model's one-program wave prices 4 warps' 7
    # programs an SM 3% above 8 warps' 5; sm_90 compiles 126 registers at 4 warps, 46 at 8)
    (37, 20, 53, (64, 64, 32), 8),
])
def test_smaller_gemms_take_smaller_blocks(m: int, k: int, n: int, blocks: tuple,
                                           warps: int) -> None:
    config = _default("matmul", np.zeros((m, k), F16), np.zeros((k, n), F16))
    assert (config.block_sizes, config.num_warps) == (blocks, warps)


def test_fp32_gemm_default_is_register_bound_at_two_stages() -> None:
    """fp32 dots run on FMAs (input_precision="ieee"), from registers: 64x64x64 at 8 warps, 2
    stages (space.py FMA_DOT_STAGES). At 3 stages triton 3.6 compiled the fp32 GEMM with a bias
    + GELU epilogue at 1024^3 to 32 registers and 3432 bytes of spills per thread."""
    a = np.zeros((4096, 4096), np.float32)
    config = _default("matmul", a, a)
    assert (config.block_sizes, config.num_warps, config.num_stages) == ((64, 64, 64), 8, 2)
    a = np.ones((1024, 1024), np.float32)
    reports = kernel_of("gemm_bias_gelu").compile(a, a, a[0], arch="sm_90")
    assert [r.problem for r in reports] == [None]


@pytest.mark.parametrize("dtype", [F16, np.float32])
def test_row_sum_fills_the_gpu(dtype: type) -> None:
    """At least 4 programs per SM: the old 32x64 ran 256 programs (model: 49.5 us vs 14.6)."""
    x = np.zeros((8192, 4096), dtype)
    space = kernel_of("row_sum").config_space(x, backend="triton")
    config = space.default()
    assert -(-8192 // config.block_sizes[0]) >= 4 * 132
    assert config.block_sizes[0] * config.block_sizes[1] == 2048
    assert space.estimate(config) < space.estimate(td.Config((32, 64), num_warps=4,
                                                             num_stages=3))


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", [F16, np.float32])
def test_wide_rows_do_not_spill(name: str, dtype: type) -> None:
    """32000 columns (a 32768-word row): 16 warps (at 8, layer norm used 254 registers)."""
    args = _problem(name, 4096, 32000, dtype)
    assert _default(name, *args).num_warps == 16
    reports = kernel_of(name).compile(*args, arch="sm_90")
    assert [r.spill_bytes for r in reports] == [0]


def test_vocabulary_rows_take_the_most_warps() -> None:
    """50257 columns fill the register file with one fp32 row: every warp count spills for
    layer and RMS norm; 32 spills least (rms norm fp32: 320 bytes vs 3264 at 8)."""
    args = _problem("rms_norm", 4096, 50257, np.float32)
    space = kernel_of("rms_norm").config_space(*args, backend="triton")
    assert 16 in next(p.choices for p in space.params if p.name == "num_warps")
    assert space.default().num_warps == 32
    assert kernel_of("rms_norm").compile(*args, arch="sm_90")[0].spill_bytes <= 320


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_default_fp16_configs_do_not_spill_on_hopper(name: str) -> None:
    args = example(name).make_inputs(np.random.default_rng(0), dtype=F16)
    reports = kernel_of(name).compile(*args, arch="sm_90")
    assert reports and [r.problem for r in reports] == [None] * len(reports)


@pytest.mark.parametrize(("name", "shapes"), [
    ("matmul", [(4096, 4096), (4096, 4096)]),
    ("gemm_bias_gelu", [(4096, 4096), (4096, 4096), (4096,)]),
    ("attention", [(32, 2048, 128)] * 3),
])
def test_large_fp16_defaults_do_not_spill_on_hopper(name: str, shapes: list) -> None:
    args = [np.zeros(s, F16) for s in shapes]
    assert [r.problem for r in kernel_of(name).compile(*args, arch="sm_90")] == [None]


def test_tma_is_searched_only_where_a_descriptor_can_be_used() -> None:
    """Boxes over 256 take no descriptor: tma=True generates what tma=False does. Attention's
    and batched matmul's scalar batch position stays in range, so it takes a box of 1."""
    a = np.zeros((1024, 1024), F16)
    space = kernel_of("matmul").config_space(a, a, backend="triton")
    assert space.duplicate(td.Config((128, 128, 64), tma=True)) is None
    assert space.duplicate(td.Config((256, 256, 64), tma=True)) is None
    assert space.duplicate(td.Config((512, 512, 64), tma=True)) is not None  # boxes > 256
    q = np.zeros((4, 256, 64), F16)
    for name, args in (("attention", (q, q, q)), ("batched_matmul", (q, q.swapaxes(1, 2)))):
        space = kernel_of(name).config_space(*args, backend="triton")
        assert space.duplicate(space.default().replace(tma=True)) is None


def test_a_persistent_tma_epilogue_counts_its_output_tile_in_shared_memory() -> None:
    """The descriptor store of a persistent kernel stages its output tile in shared memory while
    the next tile's loads are in flight: 128x256x64 at 4 stages needs 256 KiB there, more than
    an H100's 227, and passed the space's check when only the operands were counted."""
    from lowering.backends.triton.cost import shared_bytes
    a = np.zeros((4096, 4096), F16)
    matmul = kernel_of("matmul")
    space = matmul.config_space(a, a, backend="triton")
    tile = td.Config((128, 256, 64), 8, 4, group_m=8, tma=True, persistent=True)
    assert "shared-memory: 262144 bytes" in (space.reason(tile) or "")
    assert space.reason(tile.replace(persistent=False)) is None
    fits = tile.replace(num_stages=3)
    (compiled,) = matmul.compile(a, a, config=fits, arch="sm_90")
    fn = matmul.traced(a, a).for_backend("triton")
    assert abs(compiled.shared_bytes - shared_bytes(fn, fits)) <= 2048  # barriers and such


def test_defaults_follow_the_architecture() -> None:
    """sm_90: a plain GEMM loads through TMA in a persistent grid (1-2.5% faster on an H200 in
    all 8 GEMM cases), GEMM+bias+GELU does neither (1.04x and 1.27x slower); sm_80 has no TMA
    and 163 KiB of shared memory, which 128x256x64 at 4 stages (192 KiB) overflows."""
    a = np.zeros((4096, 4096), F16)
    matmul, gelu = kernel_of("matmul"), kernel_of("gemm_bias_gelu")
    hopper = matmul.config_space(a, a, backend="triton", arch="sm_90")
    ampere = matmul.config_space(a, a, backend="triton", arch="sm_80")
    assert hopper.default().get("tma") and hopper.default().get("persistent")
    assert not ampere.default().get("tma") and not ampere.default().get("persistent")
    big = td.Config((128, 256, 64), 8, 4, group_m=8, tma=False, persistent=False)
    assert hopper.reason(big) is None and "shared-memory" in (ampere.reason(big) or "")
    bias = np.zeros(4096, F16)
    epilogue = gelu.config_space(a, a, bias, backend="triton", arch="sm_90").default()
    assert not epilogue.get("tma") and not epilogue.get("persistent")
    with pytest.raises(td.BackendError, match="kernel 'matmul'.*unknown architecture 'hopper'"):
        matmul.config_space(a, a, backend="triton", arch="hopper")


def test_shared_memory_counts_tiles_loaded_outside_the_loop_once_and_inside_per_stage() -> None:
    """Causal attention keeps q (loaded before the key loop) once, k and v once per stage:
    at 128x128, d128, 3 stages, TMA and persistent that is 262,144 bytes with the output tile
    (the H200 refused it at launch: 263,168 needed, 232,448 there), where each dot's operands
    per stage came to 229,376 and passed the space's check."""
    q = np.zeros((8, 1024, 128), F16)
    space = kernel_of("attention").config_space(q, q, q, backend="triton", arch="sm_90")
    config = td.Config((128, 128), 8, 3, group_m=8, persistent=True, tma=True)
    assert "shared-memory: 262144 bytes" in (space.reason(config) or "")
    assert space.reason(config.replace(num_stages=2)) is None


def test_attention_defaults_are_the_tiles_the_h200_ran_fastest() -> None:
    """Issue 30's fix 5, measured (benchmarks/results/h200-run3/rows.json, 4x32 heads, seq
    4096): at d64, 64x64 tiles at 4 warps with TMA ran fastest of 9 configs (0.673 ms; 128x64
    at 8 warps, the old default, 0.709); at d128, 8 warps beat 4 (1.25 against 1.57 ms)."""
    q64, q128 = np.zeros((128, 4096, 64), F16), np.zeros((128, 4096, 128), F16)
    attention = kernel_of("attention")
    d64 = attention.config_space(q64, q64, q64, backend="triton", arch="sm_90").default()
    d128 = attention.config_space(q128, q128, q128, backend="triton", arch="sm_90").default()
    assert (d64.block_sizes, d64.num_warps, d64.get("tma")) == ((64, 64), 4, True)
    assert d128.num_warps == 8 and d128.get("tma") and not d128.get("persistent")
