"""Every example kernel in examples/ matches its float64 NumPy reference on the NumPy backend.

Each example is checked in several input dtypes with the default config, under sampled configs,
and on a second set of ragged dims (primes and size-1 dimensions) chosen per example.
"""

from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from support import EXAMPLES_DIR, example, fresh


# A second set of ragged dims per example: primes and size-1 dimensions.
OTHER_DIMS: dict[str, list[dict[str, int]]] = {
    "vector_add": [{"n": 1}, {"n": 257}],
    "axpby": [{"m": 1, "n": 53}, {"m": 37, "n": 2}],
    "row_sum": [{"m": 37, "n": 1}, {"m": 1, "n": 131}],
    "long_sum": [{"m": 37, "n": 1}, {"m": 1, "n": 131}],
    "row_argmax": [{"m": 37, "n": 1}, {"m": 1, "n": 131}],
    "row_cumsum": [{"m": 37, "n": 1}, {"m": 1, "n": 131}],
    "center_columns": [{"m": 1, "n": 53}, {"m": 67, "n": 1}],
    "matmul": [{"m": 37, "k": 1, "n": 53}, {"m": 1, "k": 67, "n": 2}],
    "batched_matmul": [
        {"batch": 1, "m": 37, "k": 23, "n": 2},
        {"batch": 2, "m": 1, "k": 1, "n": 19},
    ],
    "gemm_bias_gelu": [{"m": 37, "k": 1, "n": 53}, {"m": 2, "k": 67, "n": 1}],
    "softmax": [{"m": 37, "n": 1}, {"m": 1, "n": 131}],
    "layer_norm": [{"m": 37, "n": 2}, {"m": 1, "n": 131}],
    "layer_norm_bwd": [{"m": 37, "n": 3}, {"m": 1, "n": 131}],  # n = 2: its dx is 0
    "rms_norm": [{"m": 37, "n": 1}, {"m": 1, "n": 131}],
    "attention": [{"batch": 1, "seq": 37, "d": 1}, {"batch": 2, "seq": 1, "d": 19}],
    "window_attention": [{"batch": 1, "seq": 37, "d": 1}, {"batch": 2, "seq": 1, "d": 19}],
    "bmm": [{"batch": 1, "m": 37, "k": 23, "n": 2}, {"batch": 7, "m": 1, "k": 1, "n": 19}],
    "rope": [
        {"batch": 1, "q_heads": 1, "k_heads": 1, "seq": 37, "d": 2},
        {"batch": 3, "q_heads": 3, "k_heads": 1, "seq": 1, "d": 6},
    ],
    "kl_div": [{"bt": 37, "v": 1}, {"bt": 1, "v": 131}],
    "matmul_epilogue": [{"m": 37, "k": 1, "n": 53}, {"m": 1, "k": 67, "n": 2}],
    "grouped_gemm": [{"groups": 1, "m": 37, "k": 1, "n": 53}, {"groups": 2, "m": 1, "k": 67, "n": 2}],
    "persistent_matmul": [{"m": 37, "k": 1, "n": 53}, {"m": 1, "k": 67, "n": 2}],
    "embedding": [{"batch": 1, "n": 37, "vocab": 1, "dim": 19},
                  {"batch": 5, "n": 1, "vocab": 53, "dim": 2}],
    "cross_entropy": [{"n": 37, "v": 1}, {"n": 1, "v": 131}],
    "jagged_sum": [{"rows": 1, "m": 19, "max_len": 3}, {"rows": 23, "m": 1, "max_len": 1}],
    "jagged_softmax": [{"rows": 1, "m": 19, "max_len": 3}, {"rows": 23, "m": 1, "max_len": 1}],
    "jsd": [{"bt": 37, "v": 1}, {"bt": 1, "v": 131}],
    "segment_reduction": [{"nodes": 1, "elements": 37, "features": 19},
                          {"nodes": 53, "elements": 1, "features": 2}],
    "concatenate": [{"m": 1, "n1": 1, "n2": 53}, {"m": 37, "n1": 17, "n2": 1}],
    "conv2d": [
        {"batch": 1, "h": 1, "w": 17, "cin": 1, "cout": 3, "kh": 3, "kw": 3},
        {"batch": 2, "h": 7, "w": 1, "cin": 19, "cout": 1, "kh": 5, "kw": 1},
    ],
    "laplacian": [{"m": 1, "n": 53}, {"m": 37, "n": 1}],
    "matmul_split_k": [{"m": 37, "k": 1, "n": 53}, {"m": 1, "k": 263, "n": 2}],
    "histogram": [{"n": 1, "bins": 1}, {"n": 257, "bins": 7}],
    "int4_gemm": [{"m": 37, "kp": 1, "n": 53}, {"m": 1, "kp": 67, "n": 1}],
    "seeded_dropout": [{"n": 1}, {"n": 257}],
    "low_mem_dropout": [{"m": 1, "n": 257}, {"m": 37, "n": 1}],
    "fp8_gemm": [{"m": 37, "k": 1, "n": 53}, {"m": 1, "k": 67, "n": 2}],
    "block_scaled_matmul": [{"m": 37, "k": 1, "n": 53}, {"m": 1, "k": 67, "n": 2}],
    "topk_sampling": [{"m": 37, "vocab": 3}, {"m": 1, "vocab": 131}],
}
EXAMPLES = sorted(OTHER_DIMS)

DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float64": np.float64,
}


def test_every_example_is_covered() -> None:
    assert sorted(p.stem for p in EXAMPLES_DIR.glob("*.py")) == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_file_convention(name: str) -> None:
    mod = example(name)
    assert mod.__doc__ and mod.__doc__.strip()
    kernels = [v for v in vars(mod).values() if isinstance(v, type(getattr(mod, name)))]
    assert len(kernels) == 1, "exactly one tile kernel per example file"
    for attr in ("DIMS", "make_inputs", "reference", "baseline", "main"):
        assert hasattr(mod, attr), attr
    assert all(1 <= v <= 300 for v in mod.DIMS.values())


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_baseline_computes_the_reference(name: str, dtype: type) -> None:
    """`baseline(xp, *args)` is what the tuner times as the NumPy / CuPy (cuBLAS) baseline."""
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(9), dtype=dtype)
    out = mod.baseline(np, *fresh(args))
    ref = mod.reference(*fresh(args))
    for o, r in zip(td.testing.as_tuple(out), td.testing.as_tuple(ref)):  # (grouped_gemm: tuples)
        assert o.dtype == dtype if r.dtype.kind == "f" else o.dtype.kind == "i"  # positions
    td.testing.assert_close(out, ref, dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", EXAMPLES)
def test_default_config(name: str, dtype: str) -> None:
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(0), mod.DIMS, DTYPES[dtype])
    out = getattr(mod, name)(*args)
    td.testing.assert_close(out, mod.reference(*args), DTYPES[dtype])


@pytest.mark.parametrize("name", EXAMPLES)
def test_sampled_configs(name: str) -> None:
    mod = example(name)
    kernel = getattr(mod, name)
    args = mod.make_inputs(np.random.default_rng(1), mod.DIMS, np.float32)
    ref = mod.reference(*args)
    configs = kernel.config_space(*args).sample(4, seed=0)
    assert len(configs) >= 1
    for cfg in configs:
        out = kernel.run(*args, backend="numpy", config=cfg)
        try:
            td.testing.assert_close(out, ref, np.float32)
        except AssertionError as e:
            raise AssertionError(f"config {cfg}: {e}") from None


@pytest.mark.parametrize(
    "name, dims",
    [(name, dims) for name in EXAMPLES for dims in OTHER_DIMS[name]],
    ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}{n}" for k, n in v.items()),
)
def test_other_dims(name: str, dims: dict[str, int]) -> None:
    mod = example(name)
    assert set(dims) == set(mod.DIMS)
    kernel = getattr(mod, name)
    for seed, dtype in enumerate((np.float32, np.float64)):
        args = mod.make_inputs(np.random.default_rng(seed), dims, dtype)
        ref = mod.reference(*args)
        td.testing.assert_close(kernel(*args), ref, dtype)
        cfg = kernel.config_space(*args).sample(1, seed=seed)[0]
        td.testing.assert_close(kernel.run(*args, backend="numpy", config=cfg), ref, dtype)
