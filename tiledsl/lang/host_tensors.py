"""Tensors made in host code from numbers and from other tensors, as torch's wrappers make them:
`torch.tensor([0, 1], dtype=torch.int32)` (`td.tensor`, `x.new_tensor([0])`),
`torch.arange(start, end, step)` and
`torch.cat([a, b], dim)` (flash-linear-attention's varlen preparation,
`torch.cat([cu_seqlens.new_tensor([0]), counts]).cumsum(-1)`).

`td.tensor` takes a flat list of up to MAX_NUMBERS numbers (the kernel's constants: one grid
selects each lane's number); `torch.cat` is a grid per input that copies it into its slice of
the result, in the dtype torch's promotion gives.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl import dtypes
from tiledsl.errors import DTypeError, ShapeError, TraceError, user_loc
from tiledsl.frontend import pointer_tables
from tiledsl.frontend.data_ptrs import DataPtr
from tiledsl.frontend.td_names import FUNCTIONS
from tiledsl.frontend.loops import loop
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, TileValue, as_dtype, cast, need_static, to_value
from tiledsl.lang import language as lang
from tiledsl.lang.host_stores import tensor_assign

MAX_NUMBERS = 64  # lanes of td.tensor: each is a select in the one grid that writes them


def tensor(data: Any, dtype: Any = None, **torch: Any) -> Any:
    """A 1-D tensor of the numbers in `data` (host code), as `torch.tensor(data, dtype=)`:
    ints give int64, floats float32, bools bool by default; of one number (FlagGems' where
    wraps a scalar operand as `torch.tensor(s)`), a 0-d tensor. A number may be a scalar
    argument's runtime value."""
    tr = current("td.tensor()")
    if tr.depth != "host":
        tr.fail(TraceError, "td.tensor() allocates a tensor, in host code",
                hint="inside the grid, make a tile: td.full, td.arange, td.where")
    if _number(data):
        return tensor([data], dtype).reshape(())  # type: ignore[attr-defined]
    numbers = list(data) if isinstance(data, (list, tuple, range)) else None
    if numbers and any(isinstance(n, DataPtr) for n in numbers):  # (pointer_tables.py)
        width = None if dtype is None else as_dtype(dtype, "td.tensor")
        if len(numbers) > MAX_NUMBERS:
            tr.fail(TraceError, f"a table of {len(numbers)} data_ptr()s: tiledsl takes up to "
                    f"{MAX_NUMBERS}")
        positions = tensor(list(range(len(numbers))), dtypes.int32)
        positions.value.hint = positions.value.hint or "data_ptr_table"  # (its errors' name)
        return pointer_tables.table(numbers, width, positions)
    if numbers is None or not numbers or len(numbers) > MAX_NUMBERS or \
            not all(_number(n) for n in numbers):
        tr.fail(TraceError, f"td.tensor() takes a number or a flat list of 1 to {MAX_NUMBERS} "
                f"numbers, got {data!r}", hint="pass larger or computed data as an argument")
    kinds = [n.dtype.kind if isinstance(n, TileValue) else
             "b" if isinstance(n, (bool, np.bool_)) else
             "i" if isinstance(n, (int, np.integer)) else "f" for n in numbers]
    kind = bool if set(kinds) == {"b"} else int if set(kinds) <= {"i", "u"} else float
    default = {bool: dtypes.bool_, int: dtypes.int64, float: dtypes.float32}[kind]
    result = default if dtype is None else as_dtype(dtype, "td.tensor")
    out = lang.empty((len(numbers),), result)

    def body(t: Any, env: dict) -> dict:
        lanes = t.index
        v = cast(to_value(numbers[-1]), result)
        for i in range(len(numbers) - 2, -1, -1):
            v = lang.where(lanes == i, cast(to_value(numbers[i]), result), v)
        out[t] = v
        return {}

    loop(lang.tile(len(numbers)), body, {}, (), None, _line())
    if not any(isinstance(n, TileValue) for n in numbers):  # (torch functions of it: torch's)
        tr.constants[out.value] = np.array(numbers, dtype=result.np)
    return out


def _number(n: Any) -> bool:
    """A number known when tracing, or a scalar argument's runtime value."""
    return isinstance(n, (bool, int, float, np.number)) or \
        isinstance(n, TileValue) and n.shape == () and not n.dtype.is_fp8


def arange_tensor(start_or_end: Any, end: Any, step: Any, dtype: Any) -> Tensor:
    """torch's `torch.arange(start, end, step)` in host code (FlagGems' radix sort's index
    tensor): a new 1-D tensor, int64 from ints and float32 from floats unless `dtype`, filled
    by a grid. The bounds are numbers known when tracing (int arguments become static)."""
    tr = current("torch.arange()")
    start, stop = (0, start_or_end) if end is None else (start_or_end, end)
    for n in (start, stop, step):
        need_static(n)
        if isinstance(n, bool) or not isinstance(n, (int, float, np.integer, np.floating)):
            tr.fail(TraceError, f"torch.arange({start!r}, {stop!r}, {step!r}) in host code "
                    "takes numbers known when tracing")
    if step == 0 or (stop - start) * step <= 0:
        tr.fail(ShapeError, f"torch.arange({start}, {stop}, {step}) is empty or endless",
                hint="a tensor here has at least one element")
    count = int(np.ceil((stop - start) / step))
    ints = all(isinstance(n, (int, np.integer)) for n in (start, stop, step))
    result = (dtypes.int64 if ints else dtypes.float32) if dtype is None else \
        as_dtype(dtype, "torch.arange")
    out = lang.empty((count,), result)

    def body(t: Any, env: dict) -> dict:
        index = t.index.to(dtypes.int64 if ints else dtypes.float64)
        out[t] = cast(index * step + start, result)
        return {}

    loop(lang.tile(count), body, {}, (), None, _line())
    return out


def new_tensor(t: Tensor, data: Any, dtype: Any = None, **torch: Any) -> Tensor:
    """torch's `x.new_tensor(data)`: `td.tensor(data)` in x's dtype."""
    return tensor(data, t.dtype if dtype is None else dtype)


def cat(tensors: Any, dim: int = 0) -> Tensor:
    """torch's `torch.cat(tensors, dim)` in host code: a new tensor, each input copied into its
    slice (a grid each), in the inputs' promoted dtype."""
    tr = current("torch.cat()")
    parts = list(tensors) if isinstance(tensors, (list, tuple)) else []
    if not parts or not all(isinstance(p, Tensor) for p in parts):
        tr.fail(TraceError, "torch.cat in host code takes a list of the kernel's tensors",
                hint="make a small one from numbers with x.new_tensor([...])")
    ndim = parts[0].ndim
    need_static(dim)  # an int argument: traced as that int
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or \
            not -ndim <= dim < ndim:
        tr.fail(TraceError, f"torch.cat: dim must be one axis of the tensors' {ndim}, got "
                f"{dim!r}")
    d = int(dim) % ndim
    rest = {p.shape[:d] + p.shape[d + 1:] for p in parts}
    if any(p.ndim != ndim for p in parts) or len(rest) > 1:
        tr.fail(ShapeError, "torch.cat: shapes " + ", ".join(str(p.shape) for p in parts)
                + f" differ outside dimension {d}")
    result: Any = parts[0].dtype
    for p in parts[1:]:
        result = result and dtypes.promote(result, p.dtype)
    if result is None:
        tr.fail(DTypeError, "torch.cat: " + ", ".join(str(p.dtype) for p in parts)
                + " have no common dtype", hint="cast them first: x.to(dtype)")
    shape = list(parts[0].shape)
    shape[d] = sum(p.shape[d] for p in parts)
    out = lang.empty(tuple(shape), result)
    start = 0
    for p in parts:
        index = (slice(None),) * d + (slice(start, start + p.shape[d]),)
        tensor_assign(out, index, p if p.dtype == result else p.to(result))  # type: ignore[attr-defined]
        start += p.shape[d]
    return out


def flip(t: Tensor, *dims: Any) -> Tensor:
    """torch's `x.flip(dims)` (`torch.flip(x, dims)`) in host code: a new tensor, a grid over its
    tiles each loading x at the mirrored positions along `dims` (mamba's SSD backward:
    `ddA.flip([-1]).cumsum(dim=-1).flip([-1])`, a reversed cumulative sum)."""
    tr = current(f"{t.name}.flip()")
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    for d in dims:
        need_static(d)
    if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or
           not -t.ndim <= d < max(t.ndim, 1) for d in dims) or \
            len({int(d) % max(t.ndim, 1) for d in dims}) < len(dims):
        tr.fail(TraceError, f"{t.name}.flip(): dims must be distinct axes of the tensor's "
                f"{t.ndim}, got {dims!r}")
    flipped = {int(d) % t.ndim for d in dims} if t.ndim else set()
    out = lang.empty(t.shape, t.dtype)
    if not flipped:
        tensor_assign(out, Ellipsis, t)
        return out

    def body(tiles: Any, env: dict) -> dict:
        tiles = tiles if isinstance(tiles, tuple) else (tiles,)
        index, mask = [], None
        for d, tile in enumerate(tiles):
            at = tile.index if d not in flipped else (t.shape[d] - 1) - tile.index
            at = at[(None,) * d + (slice(None),) + (None,) * (t.ndim - d - 1)]
            if d in flipped:  # (past the end: a mirrored position below 0)
                mask = at >= 0 if mask is None else mask & (at >= 0)
            index.append(at)
        out[tiles] = FUNCTIONS["load"](t, index, mask=mask)
        return {}
    loop(lang.tile(*t.shape), body, {}, (), None, _line())
    return out


def empty_strided(size: Any, stride: Any, *, dtype: Any = None, **torch: Any) -> Tensor:
    """torch's `empty_strided(size, stride, dtype=)` in host code (FlagGems allocates outputs in
    its inputs' layout): a new tensor in the layout the strides describe, a permutation of a
    row-major one, made as `td.empty` of the permuted shape and viewed back (dimensions of
    size 1 take any stride). `device=`, `layout=` and `pin_memory=` change nothing."""
    tr = current("torch.empty_strided()")
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        tr.fail(ShapeError, f"torch.empty_strided: {len(size)} sizes and {len(stride)} strides")
    order = sorted(range(len(size)), key=lambda d: (-stride[d], d))  # outermost first
    expect = 1
    for d in reversed(order):
        if size[d] != 1 and stride[d] != expect:
            tr.fail(ShapeError, f"torch.empty_strided({size}, {stride}): strides that are no "
                    "permutation of a contiguous layout (gaps or overlaps)",
                    hint="allocate contiguously (torch.empty) and view it")
        expect *= size[d]
    out = lang.empty(tuple(size[d] for d in order), dtype=dtype)
    back = tuple(order.index(d) for d in range(len(size)))
    return out if back == tuple(range(len(size))) else out.permute(back)  # type: ignore[attr-defined]


def _line() -> int:
    loc = user_loc()
    return loc.line if loc is not None else 0


Tensor.new_tensor = new_tensor  # type: ignore[attr-defined]
Tensor.flip = flip  # type: ignore[attr-defined]
