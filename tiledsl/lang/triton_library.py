"""More of Triton's language, written with td's ops as Triton's own standard library writes
them, so a ported `@triton.jit` body keeps its lines: `td.interleave`, `td.cat`, `td.flip`,
`td.xor_sum`, `td.umulhi`, `td.swizzle2d`, `td.histogram`, `td.view`, `td.sqrt_rn`, and the hints and
compile-time helpers `td.assume` (a promise about values: nothing to compute),
`td.static_print` (prints while the kernel traces, as Triton's prints while it compiles) and
`td.constexpr_function` (a plain Python helper is already computed while tracing). None adds an
op: each lowers through the ops it is made of.
"""

from __future__ import annotations

from typing import Any, Callable

from tiledsl import dtypes
from tiledsl.errors import DTypeError, ShapeError
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue, to_value
from tiledsl.lang.bits import _to
from tiledsl.lang.views import join, permute, reshape


def assume(cond: Any) -> None:
    """`tl.assume(cond)`: the author's promise that `cond` holds, a hint for Triton's
    optimizer that changes no value (tiledsl derives what it needs from the index math)."""
    current("td.assume()")


def static_print(*values: Any, sep: str = " ", end: str = "\n", file: Any = None,
                 flush: bool = False) -> None:
    """`tl.static_print(...)`: printed while the kernel traces (Triton's, while it compiles)."""
    print(*values, sep=sep, end=end, file=file, flush=flush)


def constexpr_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`@tl.constexpr_function`: a helper computing compile-time values; in tiledsl every
    Python helper already runs while the kernel traces."""
    return fn


def view(x: Any, *shape: Any) -> TileValue:
    """`tl.view(x, shape)`: `td.reshape` (Triton's older name)."""
    return reshape(x, *shape)


def sqrt_rn(x: Any) -> TileValue:
    """`tl.sqrt_rn(x)`: the square root rounded to nearest, as td.sqrt's NumPy semantics."""
    from tiledsl.lang.language import sqrt
    return sqrt(x)


def interleave(a: Any, b: Any) -> TileValue:
    """`tl.interleave(a, b)`: the lanes of a and b alternating along the last axis."""
    c = join(a, b)
    return reshape(c, (*c.shape[:-2], 2 * c.shape[-2]))


def cat(a: Any, b: Any, can_reorder: bool = False) -> TileValue:
    """`tl.cat(a, b, can_reorder=True)`: a then b along the first axis (Triton may reorder the
    lanes; tiledsl keeps them in order, one of the orders Triton allows)."""
    c = join(a, b)
    rank = len(c.shape)
    first = permute(c, (rank - 1, *range(rank - 1)))  # (2, n, ...): a's lanes, then b's
    return reshape(first, (2 * c.shape[0], *c.shape[1:-1]))


def xor_sum(x: Any, axis: Any = None, keep_dims: bool = False) -> TileValue:
    """`tl.xor_sum(x, axis)`: the exclusive or of the lanes along `axis` (of all when None)."""
    from tiledsl.lang.scans import reduce
    v = to_value(x)
    if not (v.dtype.is_int or v.dtype.is_bool):
        current().fail(DTypeError, f"td.xor_sum of a {v.dtype} tile: it takes integers")
    return reduce(v, axis, lambda a, b: a ^ b, keep_dims)


def flip(x: Any, dim: Any = None) -> TileValue:
    """`tl.flip(x, dim)`: the lanes along `dim` (the last when None) in reverse order, by
    Triton's own construction: the axis as axes of 2, each pair's lanes swapped by `^` with
    their xor (the axis is a power of two, as Triton's)."""
    v = to_value(x)
    rank = len(v.shape)
    d = rank - 1 if dim is None else dim + rank if dim < 0 else dim
    n = v.shape[d] if 0 <= d < rank else None
    if not isinstance(n, int) or n < 1 or n & (n - 1):
        current().fail(ShapeError, f"td.flip: axis {dim} of a tile of shape {v.shape} is not "
                       "a constant power of two")
    steps = n.bit_length() - 1
    ints = {8: dtypes.int8, 16: dtypes.int16, 32: dtypes.int32, 64: dtypes.int64}
    bits = 8 if v.dtype.is_bool else v.dtype.bits
    y = _to(v, ints[bits], bitcast=not v.dtype.is_bool)
    y = reshape(y, (*v.shape[:d], *([2] * steps), *v.shape[d + 1:]))
    for i in range(steps):
        y = y ^ xor_sum(y, d + i, True)
    y = reshape(y, v.shape)
    return _to(y, v.dtype, bitcast=not v.dtype.is_bool)


def umulhi(x: Any, y: Any) -> TileValue:
    """`tl.umulhi(x, y)`: the high 32 bits of the 64-bit product of two 32-bit ints."""
    a, b = to_value(x), to_value(y)
    d = a.dtype if not a.weak else b.dtype
    if d not in (dtypes.int32, dtypes.uint32):
        current().fail(DTypeError, f"td.umulhi takes int32 or uint32 tiles, got {d}")
    wide = dtypes.uint64 if d is dtypes.uint32 else dtypes.int64
    return _to((_to(a, wide) * _to(b, wide)) >> 32, d)


def swizzle2d(i: Any, j: Any, size_i: Any, size_j: Any, size_g: Any) -> tuple[Any, Any]:
    """`tl.swizzle2d(i, j, size_i, size_j, size_g)`: row-major (i, j) in a grid of
    size_i x size_j as the index in groups of size_g rows, column-major within a group
    (Triton's standard library's arithmetic)."""
    from tiledsl.lang.language import minimum
    ij = i * size_j + j
    size_gj = size_g * size_j
    group_id = ij // size_gj
    off_i = group_id * size_g
    rows = size_i - off_i
    size_g = min(rows, size_g) if not isinstance(rows, TileValue) and \
        not isinstance(size_g, TileValue) else minimum(rows, size_g)
    ij = ij % size_gj
    return off_i + ij % size_g, ij // size_g


def histogram(x: Any, num_bins: Any, mask: Any = None) -> TileValue:
    """`tl.histogram(x, num_bins, mask=None)`: int32 counts of the lanes of 1-D int tile `x`
    equal to 0, 1, ..., num_bins - 1 (bins of width 1 from 0; lanes outside them, and those
    `mask` leaves out, are not counted), as one comparison of every lane with every bin."""
    from tiledsl.lang.arange import arange
    from tiledsl.lang.language import sum as td_sum, where
    v = to_value(x)
    if not isinstance(num_bins, int) or num_bins < 1:
        current().fail(ShapeError, f"td.histogram: num_bins must be a positive int known while "
                       f"tracing, got {num_bins!r}")
    if len(v.shape) != 1 or not v.dtype.is_int:
        current().fail(DTypeError, f"td.histogram takes a 1-D int tile, got a {v.dtype} tile of "
                       f"shape {v.shape}")
    hits = v[:, None] == arange(0, num_bins)[None, :]
    if mask is not None:
        hits = hits & to_value(mask)[:, None]
    return _to(td_sum(where(hits, 1, 0), axis=0), dtypes.int32)


__all__ = ["assume", "cat", "constexpr_function", "flip", "histogram", "interleave", "sqrt_rn",
           "static_print", "swizzle2d", "umulhi", "view", "xor_sum"]
