"""torch's matrix product of whole tensors in host code: `a @ b`, `a.mm(b)`, `torch.mm`,
`torch.matmul` of two 2-D tensors (and `torch.einsum` of one or two, made of them), as Liger's fused linear cross entropy projects each chunk of
hidden states onto the vocabulary, `logits_chunk = _input_chunk @ weight.t()`, then its
gradient back, `grad_logits_chunk @ weight`.

It is a GEMM grid of its own over tiles of the result (block sizes tunable, as any grid's):
each program accumulates `td.dot` of the operands' tiles along the inner dimension in float32
(int64 for ints) and writes the result in the operands' dtype, as torch computes it. The
operands must share a dtype (torch's rule for mm). Inside the grid a tensor is memory: load
tiles, then `x[tm, tk] @ y[tk, tn]`.
"""

from __future__ import annotations

import math
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


def einsum(equation: str, *operands: Any) -> Tensor:
    """torch's `torch.einsum(equation, a, b)` in host code (flash-attn's layer-norm-linear
    backward: `torch.einsum("bo,bi->oi", dout, y)`): an index only one operand has and the
    output lacks is summed first; the rest is one `matmul` of the operands permuted and
    reshaped to (free of a, contracted) and (contracted, free of b), its result viewed and
    permuted to the output's order; an index of both operands that the output keeps (a
    batch) makes it a broadcast product, summed (`_batched`). One operand: a permute and
    sums."""
    tr = current("torch.einsum()")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])  # torch.einsum(eq, [a, b])
    eq = equation.replace(" ", "")
    ins, arrow, out = eq.partition("->")
    names = ins.split(",")
    if "." in eq or not arrow or len(names) != len(operands) or len(operands) not in (1, 2) \
            or any(len(n) != len(set(n)) or len(n) != getattr(t, "ndim", -1)
                   for n, t in zip(names, operands)) or len(out) != len(set(out)) or \
            not set(out) <= set("".join(names)):
        tr.fail(ShapeError, f"torch.einsum({equation!r}) of {len(operands)} tensor(s): host "
                "code takes one or two tensors, an explicit '->' output, each index once per "
                "operand (no '...', no diagonals), one index per dimension",
                hint="write the product as host matmul (a @ b) of views, or a grid of td.dot")
    ts = [_summed(t, n, set(out) | set("".join(names[:i] + names[i + 1:])))
          for i, (t, n) in enumerate(zip(operands, names))]
    names = [n2 for _, n2 in ts]
    ts = [t2 for t2, _ in ts]
    if len(ts) == 1:
        return ts[0].permute(*[names[0].index(c) for c in out])  # type: ignore[attr-defined]
    (a, b), (na, nb) = ts, names
    size = dict(zip(na, a.shape)) | dict(zip(nb, b.shape))
    if any(dict(zip(na, a.shape))[c] != dict(zip(nb, b.shape))[c] for c in na if c in nb):
        tr.fail(ShapeError, f"torch.einsum({equation!r}): shapes {a.shape} and {b.shape} "
                "differ along an index they share")
    if any(c in na and c in nb for c in out):  # a batch: a broadcast product, summed
        return _batched(a, na, b, nb, out, size)
    free_a, free_b = [c for c in na if c in out], [c for c in nb if c in out]
    inner = [c for c in na if c in nb]
    k = math.prod(size[c] for c in inner)
    a2 = a.permute(*[na.index(c) for c in free_a + inner]).contiguous()  # type: ignore
    b2 = b.permute(*[nb.index(c) for c in inner + free_b]).contiguous()  # type: ignore
    product = matmul(a2.reshape(-1, k), b2.reshape(k, -1))  # type: ignore[attr-defined]
    got = free_a + free_b
    product = product.reshape(*[size[c] for c in got])  # type: ignore[attr-defined]
    return product.permute(*[got.index(c) for c in out])  # type: ignore[attr-defined]


def _batched(a: Tensor, na: str, b: Tensor, nb: str, out: str, size: dict) -> Tensor:
    """An einsum whose output keeps an index of both operands (`"bij,bjk->bik"`): each operand
    permuted to the order (output's indices, contracted ones) and broadcast along the indices
    it lacks, multiplied elementwise (in float32 for 16-bit floats) and summed over the
    contracted ones: a tensor of every product, made in memory."""
    order = list(out) + [c for c in na if c in nb and c not in out]
    wide = dtypes.float32 if a.dtype.short in ("f16", "bf16") else a.dtype

    def spread(t: Tensor, names: str) -> Tensor:
        t = t.permute(*[names.index(c) for c in order if c in names])  # type: ignore
        t = t.contiguous().reshape(*[size[c] if c in names else 1 for c in order])  # type: ignore
        return t if t.dtype == wide else t.to(wide)  # type: ignore[attr-defined]
    product = spread(a, na) * spread(b, nb)
    if len(order) > len(out):
        product = product.sum(dim=tuple(range(len(out), len(order))))  # type: ignore
    return product if product.dtype == a.dtype else product.to(a.dtype)  # type: ignore


def _summed(t: Tensor, names: str, kept: set[str]) -> tuple[Tensor, str]:
    """`t` with the dimensions whose index is in `kept` alone (the others summed), and their
    indices."""
    for d in reversed(range(len(names))):
        if names[d] not in kept:
            t, names = t.sum(dim=d), names[:d] + names[d + 1:]  # type: ignore[attr-defined]
    return t, names


Tensor.__matmul__ = Tensor.matmul = Tensor.mm = matmul  # type: ignore[attr-defined]
