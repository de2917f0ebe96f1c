"""The generated Triton code, run by Triton's interpreter on the CPU, matches the float64
references (and so the NumPy backend) for every example under sampled configs.

This is how CI checks the code generator without a GPU.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from support import EXAMPLE_NAMES, SMALL_DIMS, example, fresh, kernel_of

pytest.importorskip("torch")
pytest.importorskip("triton")

BACKEND = "triton-interpret"
SMALL = SMALL_DIMS
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def run_and_check(name: str, dtype: type, config: td.Config | None) -> None:
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(1), SMALL[name], dtype)
    ref = mod.reference(*fresh(args))
    call_args = fresh(args)
    out = kernel_of(name).run(*call_args, backend=BACKEND, config=config)
    if out is None:  # written into the first argument
        out = call_args[0]
    td.testing.assert_close(out, ref, dtype)


def test_every_example_has_small_sizes() -> None:
    assert sorted(SMALL) == EXAMPLE_NAMES


@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES))
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_default_config(name: str, dtype: str) -> None:
    run_and_check(name, DTYPES[dtype], None)


@pytest.mark.parametrize("dims", [{"m": 96, "k": 64, "n": 128}, {"m": 37, "k": 45, "n": 29}],
                         ids=["aligned", "ragged"])
@pytest.mark.parametrize("name", ["matmul", "gemm_bias_gelu"])
def test_tma_and_persistent(name: str, dims: dict) -> None:
    """Tensor descriptors (where strides allow) and persistent programs give the same answer."""
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(2), dims, np.float16)
    ref = mod.reference(*args)
    for tma in (False, True):
        for persistent in (False, True):
            config = td.Config((32, 32, 16), 4, 3, group_m=4, tma=tma, persistent=persistent)
            out = kernel_of(name).run(*args, backend=BACKEND, config=config)
            td.testing.assert_close(out, ref, np.float16)
    text = kernel_of(name).source(*args, target="triton", config=td.Config(
        (32, 32, 16), 4, 3, group_m=4, tma=True, persistent=True))
    assert "tl.range(tl.program_id(0)" in text
    assert ("a_desc.load" in text) == (dims["k"] * 2 % 16 == 0)  # 16-byte aligned rows only


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_sampled_configs(name: str) -> None:
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(1), SMALL[name], np.float32)
    space = kernel_of(name).config_space(*args, backend=BACKEND)
    for config in space.sample(3, seed=7):
        run_and_check(name, np.float32, config)


@pytest.mark.parametrize("dims", [{"m": 300, "k": 48, "n": 5}, {"m": 3, "k": 48, "n": 40},
                                  {"m": 1, "k": 7, "n": 1}], ids=["n=5", "m=3", "gemv-like"])
@pytest.mark.parametrize("name", ["matmul", "gemm_bias_gelu"])
def test_dims_below_the_dot_minimum_run_in_one_masked_block(name: str, dims: dict) -> None:
    """tl.dot needs blocks of 16 or more: a shorter dimension gets one masked block of 16
    (the space was empty before), under every knob the space samples."""
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(3), dims, np.float16)
    ref = mod.reference(*fresh(args))
    space = kernel_of(name).config_space(*args, backend=BACKEND)
    configs = [space.default(), *space.sample(3, seed=5)]
    for config in configs:
        assert min(config.block_sizes) >= 16
        out = kernel_of(name).run(*fresh(args), backend=BACKEND, config=config)
        td.testing.assert_close(out, ref, np.float16)
    for config in configs[:2]:  # and it compiles for Hopper without spills
        assert all(r.problem is None for r in kernel_of(name).compile(*args, config=config))


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("name", ["softmax", "layer_norm", "rms_norm"])
def test_reductions_over_rows_shorter_than_16(name: str, n: int) -> None:
    """Triton pads a constant dimension to at least 16: a row of 2, 4 or 8 must be masked
    before it is reduced (softmax and layer norm were silently wrong there)."""
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(4), {"m": 5, "n": n}, np.float32)
    ref = mod.reference(*fresh(args))
    space = kernel_of(name).config_space(*args, backend=BACKEND)
    for config in [space.default(), *space.sample(2, seed=3)]:
        out = kernel_of(name).run(*fresh(args), backend=BACKEND, config=config)
        td.testing.assert_close(out, ref, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_a_whole_dimension_of_one_under_a_dot_multiplies_and_sums(dtype: type) -> None:
    """A constant dimension of 1 stays 1 (it broadcasts), so it cannot feed tl.dot (which needs
    16): attention with a head dimension of 1 multiplies and sums instead, and compiles."""
    mod = example("attention")
    args = mod.make_inputs(np.random.default_rng(0), {"batch": 2, "seq": 37, "d": 1}, dtype)
    ref = mod.reference(*fresh(args))
    k = kernel_of("attention")
    space = k.config_space(*args, backend=BACKEND)
    for config in [space.default(), *space.sample(2, seed=1)]:
        td.testing.assert_close(k.run(*fresh(args), backend=BACKEND, config=config), ref, dtype)
    assert "tl.sum(" in k.source(*args, target="triton")
    assert all(r.problem is None for r in k.compile(*args, arch="sm_90"))


def test_the_interpreter_poisons_masked_off_lanes() -> None:
    """A GPU leaves the lanes a masked load skips undefined, and Triton's interpreter fills them
    with zeros, which hid a kernel reading them (attention over a head dimension of 8, held in
    16 lanes then, before the masking pass covered it). Under the interpreter the generator
    fills them with NaN: here a head dimension of 12, held in 16 lanes."""
    from lowering.backends.triton.codegen import generate
    from lowering.backends.triton.interpret import strides_of, to_torch
    args = example("attention").make_inputs(np.random.default_rng(0),
                                            {"batch": 1, "seq": 37, "d": 12}, np.float16)
    k = kernel_of("attention")
    fn = k.traced(*args).lowered
    config = k.config_space(*args, backend=BACKEND).default().replace(tma=False)  # loads
    strides = strides_of(fn, [to_torch(a) for a in args])
    gpu, interpreted = (generate(fn, config, strides, interpret=i).source for i in (False, True))
    def k_load(source: str) -> str:
        return next(line for line in source.splitlines() if "k_tile = tl.load(" in line)
    assert "other=" not in k_load(gpu)  # never read: the pass masks k before the dot
    assert k_load(interpreted).endswith(', other=float("nan"))')


@td.tile_kernel
def host_arithmetic(x, alpha, k: int):
    """Scalars computed outside the tile loop: each program of the Triton kernel computes them."""
    n, = x.shape
    out = td.empty((n,), dtype=x.dtype)
    scale = alpha * 2.0 + 1.0
    shift = k * 3 - 1
    for t in td.tile(n):
        out[t] = x[t] * scale + shift
    return out


def test_host_arithmetic_on_scalar_arguments() -> None:
    x = np.random.default_rng(2).standard_normal(77).astype(np.float32)
    ref = x.astype(np.float64) * 7.5 + 11
    for config in host_arithmetic.config_space(x, 3.25, 4).sample(2, seed=0):
        out = host_arithmetic.run(x, 3.25, 4, backend=BACKEND, config=config)
        td.testing.assert_close(out, ref, np.float32)
    (report,) = host_arithmetic.compile(x, 3.25, 4, arch="sm_90")
    assert report.problem is None


def test_attention_loads_k_and_v_through_tensor_descriptors() -> None:
    """`k[b, tk, :]` takes a TMA box at the batch-head's index: the scalar index refused
    descriptors before, so tma=True generated pointer loads (LDGSTS, no UTMALDG) for q, k, v and
    the output. The key tiles before the diagonal are whole, so the batch index folds into
    their row of a (batch*seq, d) descriptor (boxes.py); the ragged query tile keeps a
    (1, BLOCK, d) box of the rank-3 tensor, which reads zeros past seq and stores nothing there.
    The tiles along the diagonal stay pointer loads: the loop's runtime stop cuts them, and
    a box would read the keys past it, which the IR reads as zeros."""
    mod = example("attention")
    args = mod.make_inputs(np.random.default_rng(2), {"batch": 2, "seq": 37, "d": 32},
                           np.float16)
    config = td.Config((16, 16), 4, 2, group_m=1, tma=True)
    source = kernel_of("attention").source(*args, target="triton", config=config)
    assert source.count("k_desc.load([begin_bh * 37 + begin_tk, 0])") == 1  # off the diagonal
    assert "out_desc.store([begin_bh, begin_tq, 0], tl.reshape(" in source
    out = kernel_of("attention").run(*args, backend=BACKEND, config=config)
    td.testing.assert_close(out, mod.reference(*args), np.float16)
