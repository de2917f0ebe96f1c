"""torch's matrix product of whole tensors in host code: `a @ b`, `a.mm(b)`, `torch.mm`,
`torch.matmul` of two 2-D tensors, as Liger's fused linear cross entropy projects each chunk of
hidden states onto the vocabulary, `logits_chunk = _input_chunk @ weight.t()`, then its
gradient back, `grad_logits_chunk @ weight`.

It is a GEMM grid of its own over tiles of the result (block sizes tunable, as any grid's):
each program accumulates `td.dot` of the operands' tiles along the inner dimension in float32
(int64 for ints) and writes the result in the operands' dtype, as torch computes it. The
operands must share a dtype (torch's rule for mm). Inside the grid a tensor is memory: load
tiles, then `x[tm, tk] @ y[tk, tn]`.
"""

from __future__ import annotations

from typing import Any

from tiledsl import dtypes
from tiledsl.errors import DTypeError, ShapeError, user_loc
from tiledsl.frontend.loops import loop
from tiledsl.frontend.captured import capture, is_foreign_tensor
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, cast, no_math
from tiledsl.lang import language as lang


def matmul(a: Tensor, b: Any) -> Tensor:
    """`a @ b` of two 2-D tensors in host code (see the module's docstring)."""
    tr = current(f"{a.name} @ ...")
    if tr.depth != "host":
        no_math(a, f"{a.name}[tm, tk] @ y[tk, tn]")
    if not isinstance(b, Tensor):
        tr.fail(ShapeError, f"{a.name} @ {type(b).__name__}: host code multiplies two tensors")
    if a.ndim != 2 or b.ndim != 2:
        tr.fail(ShapeError, f"{a.name} @ {b.name}: shapes {a.shape} and {b.shape}; host code "
                "multiplies 2-D tensors", hint="reshape to 2-D first (x.view(-1, k)), or "
                "write the batched product as a grid over td.dot")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        tr.fail(ShapeError, f"{a.name} @ {b.name}: shapes {a.shape} and {b.shape} do not "
                "multiply (inner dimensions differ)")
    if a.dtype != b.dtype:
        tr.fail(DTypeError, f"{a.name} @ {b.name}: {a.dtype} and {b.dtype}; torch multiplies "
                "tensors of one dtype", hint="cast one first: a @ b.to(a.dtype)")
    acc_dtype = dtypes.int64 if a.dtype.is_int else dtypes.float32
    if a.dtype.is_bool:
        tr.fail(DTypeError, f"{a.name} @ {b.name}: a product of bool tensors")
    out = lang.empty((m, n), a.dtype)
    line = user_loc().line if user_loc() is not None else 0  # type: ignore[union-attr]

    def body(tiles: Any, env: dict) -> dict:
        tm, tn = tiles

        def step(tk: Any, e: dict) -> dict:
            return {"acc": e["acc"] + cast(a[tm, tk] @ b[tk, tn], acc_dtype)}
        first = lang.full((tm, tn), 0, acc_dtype)
        acc = loop(lang.tile(k), step, {"acc": first}, ("acc",), None, line)["acc"]
        out[tm, tn] = cast(acc, a.dtype)
        return {}

    loop(lang.tile(m, n), body, {}, (), None, line)
    return out


def linear(x: Tensor, weight: Any, bias: Any = None) -> Tensor:
    """torch's `F.linear(x, weight, bias)` in host code (`nn.Linear` in a module's forward:
    Liger's SwiGLU MLP): `x @ weight.T + bias` over x's last dimension. A weight or bias the
    kernel does not take as an argument (the module's own) is a hidden argument."""
    w = capture(weight, "weight") if is_foreign_tensor(weight) else weight
    b = capture(bias, "bias") if is_foreign_tensor(bias) else bias
    if not isinstance(w, Tensor) or w.ndim != 2:
        current().fail(ShapeError, "F.linear: the weight is a 2-D tensor (out_features, "
                       f"in_features), got {type(weight).__name__}")
    lead = x.shape[:-1]
    out = matmul(x.reshape(-1, x.shape[-1]), w.transpose(0, 1))  # type: ignore[attr-defined]
    if b is not None:
        out = out + b
    return out.reshape(*lead, w.shape[0])  # type: ignore[attr-defined]


Tensor.__matmul__ = Tensor.matmul = Tensor.mm = matmul  # type: ignore[attr-defined]
