"""Compile jobs carry array layouts, not data (autotune/precompile.py)."""

from __future__ import annotations

import pickle
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from autotune.precompile import ArrayLayout, Precompiler
from support import example, kernel_of


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    base = rng.random((37, 53))
    readonly = rng.random(19)
    readonly.flags.writeable = False
    return [base, base.T, base[::-2, 3:], base[5:, ::-3].T, np.broadcast_to(rng.random(7), (5, 7)),
            base.astype(np.float16)[:, 1:], base.astype(ml_dtypes.bfloat16), readonly,
            np.empty((0, 4), np.float32), base.astype(np.int8)[:, ::-1]]


@pytest.mark.parametrize("a", _arrays(), ids=lambda a: f"{a.dtype}{a.shape}{a.strides}")
def test_a_layout_stands_up_an_array_laid_out_as_the_original(a: np.ndarray) -> None:
    layout = pickle.loads(pickle.dumps(ArrayLayout.of(a)))
    b = layout.array()
    assert (b.shape, b.dtype, b.strides) == (a.shape, a.dtype, a.strides)
    assert b.flags.writeable == a.flags.writeable
    assert not np.shares_memory(a, b)


@pytest.mark.parametrize("value", [3, 2.5, True, np.float32(1.5), np.array(7.0), None, "x"])
def test_scalars_and_0d_arrays_travel_as_they_are(value: Any) -> None:
    assert ArrayLayout.of(value) is value


def test_a_compile_job_does_not_carry_the_arrays_data() -> None:
    k = kernel_of("matmul")
    a, b = example("matmul").make_inputs(np.random.default_rng(0),
                                         {"m": 1024, "k": 1024, "n": 512}, np.float16)
    pre = Precompiler(k.file, k.name, [a, b], workers=1)
    try:
        job = pickle.dumps(pre.job)
    finally:
        pre.close()
    assert a.nbytes + b.nbytes > 3_000_000 and len(job) < 5_000


def test_a_compile_from_layouts_is_the_compile_of_the_arrays(tmp_path: Any,
                                                             monkeypatch: Any) -> None:
    """The kernel compiled from the layouts is the one the real arrays look up in the cache
    (strided and transposed operands included, where the specialization differs)."""
    triton = pytest.importorskip("triton")
    from autotune.precompile import compile_config
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path))
    k = kernel_of("matmul")
    a, b = example("matmul").make_inputs(np.random.default_rng(1), {"m": 48, "k": 40, "n": 72},
                                         np.float16)
    a = np.ascontiguousarray(a.T).T  # column-major
    config = td.Config((32, 32, 32), 4, 2, group_m=1, tma=False, persistent=False)
    why, _ = compile_config(k.file, k.name, [ArrayLayout.of(a), ArrayLayout.of(b)],
                            config.to_dict(), "aot", "sm_90", None)
    assert why is None

    def no_compiling(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("compiled again")
    monkeypatch.setattr(triton, "compile", no_compiling)
    (report,) = k.compile(a, b, config=config, arch="sm_90")  # served from the disk cache
    assert report.registers > 0
