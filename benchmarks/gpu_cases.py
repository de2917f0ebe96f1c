"""The cases the GPU kernel benchmark times (benchmarks/gpu_kernels.py), each with torch's
float32 reference and the baseline it is held against.

gemm: fp16 and bf16 GEMM at 4096^3, 8192^3 and two LLM shapes (m, n, k = 4096, 4096, 14336 and
8192, 1024, 8192) against cuBLAS (torch.matmul), and GEMM+bias+GELU at 4096^3 fp16 against
cuBLAS GEMM with the bias folded in (torch.addmm) followed by torch's GELU, a separate kernel.
rows: softmax, layer norm and RMS norm at 4096^2 and 8192^2 in fp16 and bf16 against torch (and
the copy ceiling), and causal attention forward (batch 4 x 32 heads, seq 4096, d 64 and 128,
fp16) against torch's scaled_dot_product_attention.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support import example as example_module  # noqa: E402

BF16 = ml_dtypes.bfloat16
Changes = tuple[tuple[str, Any], ...]
GEMM_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 14336), (8192, 1024, 8192))
# What the cost model prices the same as the default (issue 30): measured beside it.
TMA_VARIANTS: tuple[Changes, ...] = ((("tma", True),), (("tma", True), ("persistent", True)))
ATTENTION_HEADS = (4, 32)  # batch, heads: q, k, v are (batch * heads, seq, d)
# The tutorial's tiles at 4 and 8 warps (issue 30 asks which), with and without TMA.
ATTENTION_VARIANTS: tuple[Changes, ...] = (
    (("tma", True),),
    *((("block_sizes", tiles), ("num_warps", warps), ("tma", tma))
      for tiles, warps in (((128, 64), 8), ((128, 64), 4), ((128, 128), 8))
      for tma in (False, True)))


@dataclass(frozen=True)
class Case:
    name: str
    example: str  # examples/<example>.py, kernel <example>
    dims: dict[str, int]
    dtype: Any
    flops: float = 0.0  # the useful work: the rate is TFLOP/s
    bytes: float = 0.0  # the fewest bytes moved (read once, written once): the rate is GB/s
    top: int = 8  # the cost model's favourites timed besides the default
    variants: tuple[Changes, ...] = ()  # changes to the default config, also timed


def gemm_cases(quick: bool = False) -> list[Case]:
    shapes = GEMM_SHAPES[:1] if quick else GEMM_SHAPES
    out = [Case(f"gemm {label} {m}x{n}x{k}", "matmul", {"m": m, "k": k, "n": n}, dtype,
                flops=2.0 * m * n * k, variants=TMA_VARIANTS)
           for label, dtype in (("fp16", np.float16), ("bf16", BF16)) for m, n, k in shapes]
    out.append(Case("gemm+bias+gelu fp16 4096x4096x4096", "gemm_bias_gelu",
                    {"m": 4096, "k": 4096, "n": 4096}, np.float16, flops=2.0 * 4096**3,
                    variants=TMA_VARIANTS))
    return out


def row_cases(quick: bool = False) -> list[Case]:
    sizes = (4096,) if quick else (4096, 8192)
    out = [Case(f"{name} {label} {n}x{n}", name, {"m": n, "n": n}, dtype, bytes=2.0 * 2 * n * n,
                top=4)
           for name in ("softmax", "layer_norm", "rms_norm")
           for label, dtype in (("fp16", np.float16), ("bf16", BF16)) for n in sizes]
    batch, heads = ATTENTION_HEADS
    for d in (64,) if quick else (64, 128):
        out.append(Case(f"causal attention fwd fp16 {batch}x{heads}x4096 d{d}", "attention",
                        {"batch": batch * heads, "seq": 4096, "d": d}, np.float16,
                        flops=4.0 * batch * heads * 4096 * 4096 * d / 2, top=4,
                        variants=ATTENTION_VARIANTS))
    return out


PARTS: dict[str, Callable[[bool], list[Case]]] = {"gemm": gemm_cases, "rows": row_cases}


class Float32Normal:
    """A generator whose standard_normal draws float32: the examples' make_inputs draw float64,
    seconds at 8192^2, and cast to 16 bits anyway. Anything else is NumPy's generator's."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def standard_normal(self, size: Any = None) -> Any:
        return self.rng.standard_normal(size, dtype=np.float32)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rng, name)


def reference(example: str, args: list[Any]) -> Any:
    """The case's result in float32, computed by torch on the GPU."""
    import torch
    import torch.nn.functional as F
    x = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
    if example == "matmul":
        return x[0] @ x[1]
    if example == "gemm_bias_gelu":
        return F.gelu(torch.addmm(x[2], x[0], x[1]))
    if example == "softmax":
        return torch.softmax(x[0], dim=-1)
    if example == "layer_norm":
        return F.layer_norm(x[0], x[0].shape[-1:], x[1], x[2], x[3])
    if example == "rms_norm":
        return F.rms_norm(x[0], x[0].shape[-1:], x[1], eps=example_module("rms_norm").EPS)
    if example == "attention":
        return F.scaled_dot_product_attention(*(heads(t) for t in x[:3]),
                                              is_causal=True).flatten(0, 1)
    raise KeyError(example)


def heads(t: Any) -> Any:
    """(batch * heads, seq, d) as (batch, heads, seq, d), the layout SDPA's fast paths take."""
    return t.unflatten(0, ATTENTION_HEADS)


def baseline(example: str, args: list[Any]) -> tuple[str, Callable[[], Any]]:
    """What the case is held against: its name and a call that runs it on `args`."""
    import torch
    import torch.nn.functional as F
    if example == "matmul":
        a, b = args
        return "cuBLAS (torch.matmul)", lambda: torch.matmul(a, b)
    if example == "gemm_bias_gelu":
        a, b, bias = args
        return ("cuBLAS GEMM+bias (torch.addmm), then torch GELU",
                lambda: F.gelu(torch.addmm(bias, a, b)))
    if example == "softmax":
        return "torch.softmax", lambda: torch.softmax(args[0], dim=-1)
    if example == "layer_norm":
        x, w, b, eps = args
        return "torch layer_norm", lambda: F.layer_norm(x, x.shape[-1:], w, b, eps)
    if example == "rms_norm":
        x, w = args
        eps = example_module("rms_norm").EPS
        return "torch rms_norm", lambda: F.rms_norm(x, x.shape[-1:], w, eps=eps)
    if example == "attention":
        q, k, v = (heads(t) for t in args)
        return ("torch scaled_dot_product_attention",
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    raise KeyError(example)


def relative_error(out: Any, ref: Any) -> float:
    """||out - ref|| / ||ref|| in float32 (NaN when out holds NaN: never passes a check)."""
    return float((out.float() - ref).norm() / ref.norm())


TOLERANCE = {"float16": 5e-3, "bfloat16": 3e-2, "float32": 1e-3}


def within(err: float, dtype: Any) -> bool:
    return bool(err <= TOLERANCE[np.dtype(dtype).name])



def reference_launches(example: str, args: list[Any], config: Any) -> list[tuple[str, Any]]:
    """Hand-written Triton kernels (benchmarks/reference_kernels) under the same `config`:
    (label, a `Launch` whose `run()` runs it on `args`). What tiledsl's code is held against."""
    from reference_kernels import load
    name = {"matmul": "gemm", "gemm_bias_gelu": "gemm"}.get(example, example)
    ref = load(name, interpret=False)
    if example in ("matmul", "gemm_bias_gelu"):
        bias = args[2] if example == "gemm_bias_gelu" else None
        return [(label, ref.bind(args[0], args[1], config, bias, **options))
                for label, options in (("triton", {}), ("triton TMA", {"tma": True}),
                                       ("triton TMA persistent", {"persistent": True}))]
    if example == "attention":
        return [(label, ref.bind(*args[:3], config, tma=tma))
                for label, tma in (("triton", False), ("triton TMA", True))]
    if example == "rms_norm":
        return [("triton", ref.bind(args[0], args[1], config))]
    return [("triton", ref.bind(*args, config))]
