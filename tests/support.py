"""Helpers shared by the test modules: loading the example files, copying arguments, and a
kernel several modules compare with."""

from __future__ import annotations

import importlib.util
import math
from functools import cache
from pathlib import Path
import types
from types import ModuleType
from typing import Any

import numpy as np

import tiledsl as td
from tiledsl.runtime import returns

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT / "examples"
EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.py"))
# Examples that take a list of arrays or a function (tiledsl/frontend/static_args.py): a torch custom op's
# schema and the DLPack interop tests hold arrays and numbers only (tests/frontend/test_static_args.py
# checks how td.torch_op refuses them)
ARRAY_ARG_EXAMPLES = [n for n in EXAMPLE_NAMES if n not in ("grouped_gemm", "matmul_epilogue")]
# ... and kl_div divides by a size (its mean), a float the shape function cannot follow,
# rope's reshapes split the head dimension into constant halves (each head size its own trace),
# as int4_gemm's view of its activations in pairs does, jsd and layer_norm_bwd return tuples
# (the torch.compile test takes one output), and segment_reduction's output size is its int argument
# num_nodes, a compile-time int (each value its own trace), as histogram's is its bins
SHAPE_FUNCTION_EXAMPLES = [n for n in ARRAY_ARG_EXAMPLES if n not in (
    "kl_div", "rope", "int4_gemm", "jsd", "segment_reduction", "histogram", "layer_norm_bwd")]

# Small ragged sizes per example for the suites that run every example on the slow backends
# (the interpreter runs programs one by one; the mapper maps each config quickly).
SMALL_DIMS: dict[str, dict[str, int]] = {
    "vector_add": {"n": 77}, "long_sum": {"m": 5, "n": 131}, "axpby": {"m": 19, "n": 37},
    "row_sum": {"m": 21, "n": 45},
    "row_argmax": {"m": 21, "n": 45}, "row_cumsum": {"m": 21, "n": 45},
    "center_columns": {"m": 45, "n": 21},
    "matmul": {"m": 37, "k": 45, "n": 29}, "matmul_split_k": {"m": 19, "k": 131, "n": 21},
    "histogram": {"n": 97, "bins": 7}, "batched_matmul": {"batch": 2, "m": 19, "k": 33, "n": 21},
    "gemm_bias_gelu": {"m": 37, "k": 40, "n": 29}, "softmax": {"m": 19, "n": 45},
    "layer_norm": {"m": 19, "n": 45}, "layer_norm_bwd": {"m": 19, "n": 45}, "rms_norm": {"m": 19, "n": 45},
    "attention": {"batch": 2, "seq": 37, "d": 24},
    "window_attention": {"batch": 2, "seq": 70, "d": 24},  # longer than its window of 48
    "kl_div": {"bt": 19, "v": 45}, "matmul_epilogue": {"m": 37, "k": 45, "n": 29},
    "grouped_gemm": {"groups": 2, "m": 37, "k": 45, "n": 29},
    "bmm": {"batch": 3, "m": 19, "k": 33, "n": 21},
    "rope": {"batch": 2, "q_heads": 3, "k_heads": 1, "seq": 37, "d": 16},
    "persistent_matmul": {"m": 37, "k": 45, "n": 29},
    "embedding": {"batch": 2, "n": 19, "vocab": 11, "dim": 21}, "cross_entropy": {"n": 19, "v": 45},
    "jagged_sum": {"rows": 7, "m": 21, "max_len": 9},
    "jagged_softmax": {"rows": 7, "m": 21, "max_len": 9},
    "jsd": {"bt": 5, "v": 19}, "segment_reduction": {"nodes": 11, "elements": 45, "features": 21},
    "concatenate": {"m": 19, "n1": 7, "n2": 13}, "laplacian": {"m": 19, "n": 45},
    "conv2d": {"batch": 1, "h": 5, "w": 9, "cin": 6, "cout": 5, "kh": 3, "kw": 3},
    "int4_gemm": {"m": 37, "kp": 23, "n": 29},
    "seeded_dropout": {"n": 77}, "low_mem_dropout": {"m": 7, "n": 11},
    "fp8_gemm": {"m": 37, "k": 45, "n": 29}, "topk_sampling": {"m": 19, "vocab": 45},
    "block_scaled_matmul": {"m": 37, "k": 45, "n": 29},
}


@cache
@cache
def example(name: str) -> ModuleType:
    """Import examples/<name>.py by path (examples/ is not a package); once per session, so the
    tests share its kernel's traces, spaces and compiles."""
    path = EXAMPLES_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"tiledsl_example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pythonpath(*paths: Path) -> str:
    """PYTHONPATH for a child process: `paths`, then the caller's own (which may hold an install
    made with `pip install --target`)."""
    import os
    return os.pathsep.join([*map(str, paths), *filter(None, [os.environ.get("PYTHONPATH")])])


def kernel_of(name: str) -> Any:
    return getattr(example(name), name)


def fresh(args: tuple) -> tuple:
    """Copies of array arguments, for kernels that write into them."""
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


@cache
def has_gpu() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch
    return torch.cuda.is_available()


def gpu_backend() -> Any:
    """The "triton-gpu" test backend as a parameter: the Triton backend on CUDA tensors, marked
    `gpu` and skipped without one (`run_on` moves NumPy arguments there and results back)."""
    import pytest
    return pytest.param("triton-gpu", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not has_gpu(), reason="needs an NVIDIA GPU")])


def on_cuda(value: Any) -> Any:
    """`value` with its NumPy arrays as CUDA torch tensors: an array, the arrays in a list or
    tuple, and those a function captures (a copy of the function over converted cells)."""
    from lowering.backends.triton.interpret import to_torch
    if isinstance(value, np.ndarray):
        return to_torch(value).cuda()
    if isinstance(value, (list, tuple)):
        return type(value)(on_cuda(v) for v in value)
    if isinstance(value, types.FunctionType) and value.__closure__:
        cells = tuple(types.CellType(on_cuda(c.cell_contents)) for c in value.__closure__)
        return types.FunctionType(value.__code__, value.__globals__, value.__name__,
                                  value.__defaults__, cells)
    return value


def run_on(kernel: Any, args: tuple, backend: str, **kw: Any) -> Any:
    """`kernel.run(*args, backend=backend)`; on "triton-gpu", with the arrays as CUDA tensors
    and the results back as NumPy arrays, and what the kernel wrote into its array arguments
    copied back into them (kernels that write in place, as Triton's do)."""
    if backend != "triton-gpu":
        return kernel.run(*args, backend=backend, **kw)
    from lowering.backends.triton.interpret import to_numpy
    on_device = on_cuda(args)
    out = kernel.run(*on_device, backend="triton", **kw)
    for a, t in zip(args, on_device):
        if isinstance(a, np.ndarray) and a.flags.writeable:
            a[...] = to_numpy(t.cpu())
    return returns.map_tensors(out, lambda o: to_numpy(o.cpu()))  # (None, numbers: as they are)


def under_configs(kernel: Any, args: tuple, backend: str, samples: int = 2,
                  seed: int = 0) -> Any:
    """(config, outputs) of `kernel` on `backend` under the space's default config and
    `samples` sampled ones; skips when the backend's libraries are missing."""
    import pytest
    if backend.startswith("triton"):
        pytest.importorskip("torch")
        pytest.importorskip("triton")
    space = kernel.config_space(*args, backend=backend.removesuffix("-gpu"))
    for config in (space.default(), *space.sample(samples, seed=seed)):
        yield config, run_on(kernel, args, backend, config=config)


@td.tile_kernel
def plus_k(x, k: int):
    """A vector plus an int scalar argument (the torch op and GPU launch tests)."""
    (n,) = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for t in td.tile(n):
        out[t] = x[t] + k
    return out


@td.tile_kernel
def full_attention(q, k, v):
    """examples/attention.py before its key loop stopped at the query tile (`td.tile(seq)`):
    every key tile, the keys after the query masked by `where`."""
    batch, seq, d = q.shape
    scale = 1.0 / math.sqrt(d)
    out = td.empty((batch, seq, d), dtype=q.dtype)
    for bh, tq in td.tile(batch, seq, block_size=(1, None)):
        b = bh.begin
        qt = q[b, tq, :]
        m_i = td.full((tq,), -float("inf"), dtype=td.float32)
        l_i = td.zeros((tq,), dtype=td.float32)
        acc = td.zeros((tq, d), dtype=td.float32)
        for tk in td.tile(seq):
            s = (qt @ k[b, tk, :].T) * scale
            s = td.where(tq.index[:, None] >= tk.index[None, :], s, -float("inf"))
            m_new = td.maximum(m_i, td.max(s, axis=1))
            alpha = td.exp(m_i - m_new)
            p = td.exp(s - m_new[:, None])
            l_i = l_i * alpha + td.sum(p, axis=1)
            acc = acc * alpha[:, None] + p.astype(v.dtype) @ v[b, tk, :]
            m_i = m_new
        out[b, tq, :] = acc / l_i[:, None]
    return out


@td.tile_kernel
def scaled_rows(x, scale: float, keep_sums: bool = False):
    """flash-linear-attention's wrapper shape: an output and an optional final state, None
    unless asked for (`return o, ht`), which the call returns in its place."""
    m, n = x.shape
    o = td.empty_like(x)
    sums = td.empty((m,), dtype=td.float32) if keep_sums else None
    for t in td.tile(m):
        v = x[t, :].astype(td.float32)
        o[t, :] = (v * scale).astype(x.dtype)
        if keep_sums:
            sums[t] = td.sum(v, axis=1)
    return o, sums


@td.tile_kernel
def sized_rows(x):
    """Liger's forward shape: the output and the numbers its backward reuses (`return y, x,
    rstd, BLOCK_SIZE, num_warps`), which the call returns as they are."""
    m, n = x.shape
    block = 1 << (n - 1).bit_length()
    o = td.empty_like(x)
    for t in td.tile(m):
        o[t, :] = x[t, :] + 1
    return o, block, n / 4, n > 16


def torch_from_numpy(a: Any) -> Any:
    """A NumPy array as a torch tensor (other values as they are), ml_dtypes' bfloat16 and fp8
    included, which torch.from_numpy refuses: viewed as ints of their width, then as torch's."""
    import torch
    if not isinstance(a, np.ndarray):
        return a
    name = {"bfloat16": "bfloat16", "float8_e4m3fn": "float8_e4m3fn",
            "float8_e5m2": "float8_e5m2"}.get(a.dtype.name)
    if name is None:
        return torch.from_numpy(a)
    bits = np.int16 if a.dtype.itemsize == 2 else np.uint8
    return torch.from_numpy(a.view(bits)).view(getattr(torch, name))
