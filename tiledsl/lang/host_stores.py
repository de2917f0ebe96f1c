"""Stores in host code: `grad[:, -1, :] = 0` or `out[1:] = x` before or after the tile loops, as
torch (and Helion's host code) writes them.

Each is a grid of its own over the part it writes (a view: lang/views.py `tensor_index`),
traced as if the user had written `for t in td.tile(part.shape): part[t] = value`. The value is
a number, a scalar (an argument), or a tensor of the part's shape, which is copied. Its block
sizes are tunable as any grid's are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl.errors import ShapeError, TraceError, user_loc
from tiledsl.frontend.captured import capture, is_foreign_tensor
from tiledsl.frontend.host_scalars import HostScalar
from tiledsl.frontend.loops import loop
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, TileValue, to_value
from tiledsl.ir.same import same_value
from tiledsl.frontend.zero_d_memory import zero_d_hint
from tiledsl.lang.language import tile
from tiledsl.lang.like import alloc_like
from tiledsl.lang.views import tensor_index


def tensor_assign(t: Tensor, idx: Any, value: Any) -> None:
    """`t[idx] = value` in host code: a grid that writes `value` into the indexed part."""
    tr = current(f"{t.name}[...] = ...")
    if is_foreign_tensor(value, zero_d=True):  # a torch tensor of the user's (computed from a
        value = capture(value, "tensor")  # valued argument's values: vLLM's causal conv)
    part = tensor_index(t, idx)
    if isinstance(value, Tensor) and same_value(value.value, part.value):
        return  # the part itself (Liger's `loss_1d[a:b] = loss_1d_slice`): torch copies nothing
    if part.shape == ():  # one element (`t[i] = 5.0`): its one-element view
        part = part.reshape(1)  # type: ignore[attr-defined]
        if isinstance(value, Tensor) and value.shape == ():
            value = value.reshape(1)  # type: ignore[attr-defined]
    if isinstance(value, Tensor):
        if value.shape != part.shape:
            tr.fail(ShapeError, f"{part.name} = {value.name}: a part of shape {part.shape} "
                    f"cannot take a tensor of shape {value.shape}",
                    hint="copy a tensor of the part's own shape (index or view it to match)")
    elif isinstance(value, HostScalar):
        pass  # x.item(): each program loads it (host_scalars.py)
    elif not isinstance(value, (TileValue, bool, int, float, np.number)) or \
            to_value(value).shape != ():
        tr.fail(TraceError, f"{part.name} = ...: in host code a part of a tensor takes a "
                f"number, a scalar argument or a tensor, got {type(value).__name__}",
                hint="compute tiles inside a td.tile loop and store them there")

    def body(tiles: Any, env: dict) -> dict:
        part[tiles] = value[tiles] if isinstance(value, Tensor) else value
        return {}

    loc = user_loc()
    loop(tile(*part.shape), body, {}, (), None, loc.line if loc is not None else 0)


Tensor.host_store = tensor_assign


def tensor_fill(t: Tensor, value: Any) -> Tensor:
    """torch's `x.fill_(v)` and `torch.fill(x, v)` in host code: `x[...] = v`; returns x."""
    tensor_assign(t, Ellipsis, value)
    return t


def tensor_clone(t: Tensor, memory_format: Any = None) -> Tensor:
    """torch's `x.clone()` in host code: a grid that copies x into a new tensor, laid out as x
    is (torch's `preserve_format`; `memory_format="contiguous"` or torch's: row-major)."""
    current(f"{t.name}.clone()")
    out = alloc_like(t, None, t.dtype, memory_format)
    tensor_assign(out, Ellipsis, t)
    return out


Tensor.fill_ = tensor_fill  # type: ignore[attr-defined]
Tensor.zero_ = lambda self: tensor_fill(self, 0)  # type: ignore[attr-defined] (vLLM's lora)
Tensor.fill = tensor_fill  # type: ignore[attr-defined] (torch.fill reaches it)
Tensor.clone = tensor_clone  # type: ignore[attr-defined]


def tensor_copy(t: Tensor, src: Any, non_blocking: bool = False) -> Tensor:
    """torch's `x.copy_(src)` in host code: `x[...] = src` (a view's too: flash-attn's
    `out[..., rotary_dim:].copy_(x[..., rotary_dim:])`); returns x."""
    tensor_assign(t, Ellipsis, src)
    return t


Tensor.copy_ = tensor_copy  # type: ignore[attr-defined]


def _scalar_fill(x: TileValue, value: Any = 0) -> None:
    """`out.fill_(v)` / `out.zero_()` of a runtime scalar: a 0-d array argument becomes memory
    (zero_d_hint stops the trace), anything else is an error."""
    current("fill_()").fail(TraceError, f"fill_() of a runtime scalar ({x.dtype.name})",
                            hint=zero_d_hint(x))


TileValue.fill_ = _scalar_fill  # type: ignore[attr-defined]
TileValue.zero_ = _scalar_fill  # type: ignore[attr-defined]
