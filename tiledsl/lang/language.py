"""The functions a kernel body calls: td.tile, td.grid, allocation, math and reductions."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tiledsl import dtypes
from tiledsl.frontend.host_scalars import HostScalar
from tiledsl.frontend.block_sizes import BlockSize, shape_dim, tile_block
from tiledsl.dtypes import DType
from tiledsl.errors import DTypeError, Loc, ShapeError, TraceError, user_loc
from tiledsl.ir.bounds import interval
from tiledsl.ir.types import UNBOUNDED, Dim, TensorType
from tiledsl.frontend.choices import choose as choose_tensor, options_of
from tiledsl.frontend.numpy_scalars import numpy_scalar_result, strong
from tiledsl.frontend.porting_hints import HELION_TILE
from tiledsl.frontend.sites import Site, call_site
from tiledsl.frontend.symdims import SymDim
from tiledsl.frontend.tracer import current
from tiledsl.frontend.tensor_names import tensor_name
from tiledsl.frontend.values import (
    Tensor, Tile, TileValue, as_dtype, binary, broadcast_to, cast, need_static, reduce, to_value,
    torch_axis, unary,
)
from tiledsl.frontend.values import cumsum as _cumsum
from tiledsl.frontend.values import dot as _dot
from tiledsl.frontend.values import where as _where
from tiledsl.lang import fp8
from tiledsl.lang.torch_names import addmm


@dataclass(frozen=True)
class TileRange:
    """What `td.tile(...)` / `td.grid(...)` return: consumed by a `for` statement in a kernel."""

    sizes: tuple[int, ...]
    block_sizes: tuple[int | None, ...]
    kind: str  # "tile" or "grid"
    loc: Loc | None
    stop: TileValue | None = None  # a runtime stop (`td.tile(tq.end)`); `sizes` holds its bound
    start: TileValue | None = None  # a runtime start (`td.tile(tq.end, start=...)`)
    site: Site | None = None  # where the call is written: its traces share block sizes
    first: TileValue | None = None  # a strided loop's first tile (`td.tile(m, n)[p::P]`)
    stride: int | None = None  # and its step, in tiles
    seq: bool = False  # sizes given as one list/tuple (`td.tile([m, n])`): tiles come as a tuple
    stops: tuple[TileValue | None, ...] = ()  # runtime sizes among several (`td.tile(m_g, n)`)
    jagged: TileValue | None = None  # td.jagged_tile's lengths (frontend/jagged.py)
    counted: Counted | None = None  # td.range over ints: the loop as a counted one (loops.py)

    def __getitem__(self, key: Any) -> TileRange:
        """`td.tile(m, n)[p::P]`: every P-th tile from tile p, the tiles numbered row-major
        (a persistent loop, `tiledsl/lang/persistent.py`)."""
        from tiledsl.lang.persistent import strided
        return strided(self, key)

    def __iter__(self) -> Any:
        current().fail(TraceError, f"td.{self.kind}(...) can only be iterated by a `for` statement "
                       "of the kernel or of a function it calls", loc=self.loc,
                       hint="tile loops are rewritten from the source of the kernel and of the "
                            "functions it calls; a comprehension, a generator, or a function "
                            "reached another way (passed to map(), called through a library) "
                            "is not: write the loop as a `for` statement there")


def _sizes(kind: str, sizes: tuple[Any, ...]) -> tuple[int, ...]:
    tr = current(f"td.{kind}()")
    if not sizes:
        tr.fail(TraceError, f"td.{kind}() needs at least one size")
    out = []
    helion = f"; {HELION_TILE}" if kind == "tile" and len(sizes) > 1 else ""
    for s in sizes:
        if isinstance(s, TileValue):
            need_static(s)
            tr.fail(TraceError, f"td.{kind}() sizes must be known when tracing (ints from "
                    "shapes), got a runtime value",
                    hint="only td.tile() with one size takes a runtime value, as a loop's stop "
                         "inside the grid (td.tile(tq.end), or td.tile(n, stop=s))"
                         + helion)
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            tr.fail(TraceError, f"td.{kind}() sizes must be ints, got {type(s).__name__} {s!r}")
        if s < (0 if tr.depth == "host" else 1):  # a grid over 0 programs runs none
            tr.fail(ShapeError, f"td.{kind}() over an empty dimension (size {int(s)})",
                    hint="tiled dimensions must have at least one element" + helion)
        out.append(s if isinstance(s, SymDim) else int(s))
    return tuple(out)


def _unpack(sizes: tuple[Any, ...]) -> tuple[tuple[Any, ...], bool]:
    """`td.tile([m, n])`, `td.tile((m, n))` and `td.tile(x.shape)` are `td.tile(m, n)`, as Helion
    writes `hl.tile([m, n])`; like Helion, the loop then yields a tuple of tiles even for one
    size (`for (t,) in td.tile([n])`)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0]), True
    return sizes, False


def _runtime_stop(stop: TileValue) -> int:
    """The static bound of a runtime loop stop (`td.tile(tq.end)`), which becomes its extent:
    `UNBOUNDED` where tracing cannot bound it (a loaded length, Helion's `hl.tile(m_g)`)."""
    tr = current()
    if stop.shape != () or not stop.dtype.is_int:
        tr.fail(TraceError, f"td.tile(): a runtime size must be an integer scalar, got "
                f"{stop.dtype}{tr.describe_shape(stop.shape)}")
    bound = interval(stop.value)
    if bound is None:
        need_static(stop)  # computed from int arguments: the kernel traces it as an int
        return UNBOUNDED
    if bound[1] < 1:
        tr.fail(ShapeError, f"td.tile(): this runtime size is at most {bound[1]}, so the loop "
                "never runs")
    return bound[1]


def tile(*sizes: int | TileValue,
         block_size: int | BlockSize | tuple[int | BlockSize | None, ...] | None = None,
         stop: Any = None, start: Any = None) -> TileRange:
    """Cut each size into tiles. The outermost tile loop is the parallel grid, inner ones loop.

    Block sizes come from the config unless `block_size` fixes them (an int for every size, or
    a tuple with None where the config decides).

    An inner loop may stop at a runtime value: `td.tile(n, stop=s)` covers the tiles of
    `[0, s)` (s clipped to [0, n]) for each program's own `s`, a scalar such as a loaded
    length (`lens[b]`, jagged rows) or a scalar argument; the lanes at or past `s` are out of
    range like those past any other edge. `td.tile(tq.end)` (causal attention) is the same
    with `n` inferred: the static bound of a stop computed from outer tiles.

    A runtime size with no static bound (a loaded `m_g`, in `td.tile(m_g)` or `td.tile(m_g, n)`:
    Helion's `hl.tile([m_g, n])`) has extent `UNBOUNDED`; several sizes make nested loops.

    `start=s` (a scalar, clipped to [0, stop]) skips what comes before it: the loop covers the
    tiles that meet `[s, stop)`, and lanes before `s` are out of range too. Tiles stay aligned
    to the block (they begin at multiples of it), as in a sliding-window attention's
    `td.tile(tq.end, start=td.maximum(tq.begin - window, 0))`.
    """
    tr = current("td.tile()")
    sizes, seq = _unpack(sizes)
    names, tr.loop_targets = tr.loop_targets, None  # how many the `for` target binds
    if len(sizes) == 2 and not seq and start is None and stop is None and \
            (_begin_end(*sizes) or names == 1 and isinstance(sizes[0], TileValue)
             and not isinstance(block_size, (tuple, list))):
        # Helion's `hl.tile(t.begin, t.end)`, that tile's span, or `for t in hl.tile(begin,
        # end)` from a runtime begin (one loop variable: a 2-D tile binds two)
        return tile(sizes[1], block_size=block_size, start=sizes[0])
    if len(sizes) == 2 and not seq and start is None and stop is None and \
            type(sizes[0]) in (int, np.int32, np.int64) and sizes[0] == 0 and \
            not isinstance(block_size, (tuple, list)):  # Helion's `hl.tile(0, n)`: `[0, n)`
        return tile(sizes[1], block_size=block_size)  # (a size of 0 is no tile loop)
    runtime = [v for v in (*sizes, stop, start) if isinstance(v, TileValue)]
    for v in (*sizes, block_size) if tr.depth == "host" else (block_size,):
        need_static(v)  # int arguments as the grid's sizes or as a block size
    if (runtime or stop is not None or start is not None) and tr.depth == "host":
        tr.fail(TraceError, "td.tile(): the grid's sizes must be known when tracing (ints "
                "from shapes), got a runtime value",
                hint="a runtime value can only be the stop of a loop inside the grid, "
                     "as in td.tile(tq.end)")
    if stop is not None:
        if len(sizes) != 1 or isinstance(sizes[0], TileValue):
            tr.fail(TraceError, "td.tile(n, stop=s) takes one static size n (the bound of s)",
                    hint="td.tile(tq.end) infers n from tiles; td.tile(n, stop=lens[b]) gives it")
        stop = to_value(stop)
        if stop.shape != () or not stop.dtype.is_int:
            tr.fail(TraceError, f"td.tile(): stop= must be an integer scalar, got "
                    f"{stop.dtype}{tr.describe_shape(stop.shape)}")
    elif len(sizes) == 1 and isinstance(sizes[0], TileValue):
        stop = sizes[0]
        sizes = (_runtime_stop(stop),)
    elif runtime and start is None:  # `td.tile(m_g, n)`: nested loops, one per size (loops.py)
        stops = tuple(s if isinstance(s, TileValue) else None for s in sizes)
        sizes = tuple(_runtime_stop(s) if isinstance(s, TileValue) else s for s in sizes)
        ranged = tile(*sizes, block_size=block_size)
        return TileRange(ranged.sizes, ranged.block_sizes, "tile", ranged.loc,
                         site=call_site(), seq=seq, stops=stops)
    if start is not None:
        if len(sizes) != 1:
            tr.fail(TraceError, "td.tile(..., start=s) takes one size")
        start = to_value(start)
        if start.shape != () or not start.dtype.is_int:
            tr.fail(TraceError, f"td.tile(): start= must be an integer scalar, got "
                    f"{start.dtype}{tr.describe_shape(start.shape)}")
        if stop is None:  # the loop runs to its static size
            stop = to_value(sizes[0])
    ns = _sizes("tile", sizes)
    if block_size is None or isinstance(block_size, (int, np.integer, BlockSize)):
        blocks: tuple[int | None, ...] = (block_size,) * len(ns)  # type: ignore[assignment]
    else:
        blocks = tuple(block_size)
    if len(blocks) != len(ns):
        tr.fail(TraceError, f"td.tile(): {len(blocks)} block sizes for {len(ns)} sizes")
    for b in blocks:
        if isinstance(b, BlockSize):  # td.register_block_size's: checked by tile_block below
            continue
        if b is not None and (not isinstance(b, (int, np.integer)) or b < 1 or b & (b - 1)):
            tr.fail(TraceError, f"td.tile(): block_size must be a power of two, got {b!r}")
    return TileRange(ns, tuple(None if b is None else tile_block(b, n) if isinstance(b, BlockSize)
                               else int(b) for b, n in zip(blocks, ns)), "tile", user_loc(),
                     stop, start, call_site(), seq=seq)


def _begin_end(a: Any, b: Any) -> bool:
    """Whether `a` and `b` are `t.begin` and `t.end` (`t.begin + t.size`) of one tile `t`."""
    if not isinstance(a, TileValue) or not isinstance(b, TileValue):
        return False
    first, end = a.value.owner, b.value.owner
    if first is None or first.name != "tile.begin" or end is None or end.name != "add":
        return False
    begin, size = (o.owner for o in end.operands)
    return begin is not None and size is not None and begin.name == "tile.begin" and \
        size.name == "tile.size" and \
        begin.operands[0] is size.operands[0] is first.operands[0]


@dataclass(frozen=True)
class Counted:
    """`td.grid(s)` inside the grid, with a runtime count `s` (an integer scalar such as a loaded
    length): a sequential loop over the indices 0..s-1, each program its own count, as
    Helion's `hl.grid(n)` in device code. `range(start, stop, step)` over runtime bounds is one
    too (Triton's `for i in range(lo, hi)`; the step is a static int). It needs no static
    bound: it runs as a `while` loop (frontend/loops.py). `tuning` holds `td.range`'s keywords
    (`num_stages=`...), which the Triton code passes on to `tl.range`."""

    stop: TileValue | int
    loc: Loc | None
    start: TileValue | int = 0
    step: int = 1
    tuning: tuple[tuple[str, Any], ...] = ()

    def __iter__(self) -> Any:
        current().fail(TraceError, "td.grid(...) can only be iterated by a `for` statement",
                       loc=self.loc)


def grid(*sizes: int | TileValue) -> TileRange | Counted:
    """Scalar indices over each size (block size 1), e.g. for a batch dimension. Sizes may come
    as one list or tuple (`td.grid(x.shape)`), as for `td.tile`. Inside the grid, one runtime
    size counts a sequential loop (`Counted`)."""
    sizes, seq = _unpack(sizes)
    tr = current("td.grid()")
    if tr.depth != "host" and len(sizes) == 1 and isinstance(sizes[0], TileValue) and not seq:
        need_static(sizes[0])  # computed from int arguments: the kernel traces it as an int
        count = sizes[0]
        if count.shape != () or not count.dtype.is_int:
            tr.fail(TraceError, f"td.grid(): a runtime count must be an integer scalar, got "
                    f"{count.dtype}{tr.describe_shape(count.shape)}")
        return Counted(count, user_loc())
    ns = _sizes("grid", sizes)
    return TileRange(ns, (1,) * len(ns), "grid", user_loc(), seq=seq)


def _dtype_arg(dtype: Any, what: str) -> DType:
    return dtypes.float32 if dtype is None else as_dtype(dtype, what)


def _host_shape(shape: Any, what: str) -> tuple[int, ...]:
    tr = current()
    items = shape if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for s in items:
        if isinstance(s, Tile):
            tr.fail(TraceError, f"{what}: tile '{s.label}' in the shape of a tensor allocated "
                    "outside the tile loops", hint="allocate tensors with int sizes (from shapes)")
        if isinstance(s, BlockSize):  # the config's value (block_sizes.py)
            s = int(s)
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            need_static(s)
            if isinstance(s, HostScalar):  # x.item()
                s.fail(f"as a size in {what}")
            tr.fail(TraceError, f"{what}: shape entries must be ints, got {s!r}")
        if s < 0:
            tr.fail(ShapeError, f"{what}: negative dimension {int(s)} in shape {tuple(items)}")
        out.append(s if isinstance(s, SymDim) else int(s))  # a SymDim keeps its expression
    return tuple(out)


def _tile_shape(shape: Any, what: str) -> tuple[Dim, ...]:
    tr = current()
    items = shape if isinstance(shape, (tuple, list)) else (shape,)
    out: list[Dim] = []
    for s in items:
        if isinstance(s, Tile):
            out.append(s.range.block)
        elif isinstance(s, BlockSize):  # td.register_block_size's symbol
            out.append(shape_dim(s))
        elif isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 1:
            out.append(s if isinstance(s, SymDim) else int(s))
        elif isinstance(s, str) and s in tr.symbols:  # an entry of a tile value's `.shape`
            out.append(s)
        elif isinstance(s, TileValue) and s.value.owner is not None and \
                s.value.owner.name == "tile.block_size":  # Helion's `tile.block_size`
            out.append(s.value.owner.operands[0].type.block)  # type: ignore[union-attr]
        else:
            need_static(s)
            tr.fail(ShapeError, f"{what}: shape entries must be tiles, a tile value's .shape "
                    f"entries or positive ints, got {s!r}")
    return tuple(out)


def _check_fill(value: Any, dtype: DType, what: str) -> None:
    """A Python number filling an integer tile or tensor must be one the dtype holds: NumPy 2's
    `np.full` raises OverflowError for an int out of range; NaN or infinity has no integer."""
    if not dtype.is_int or isinstance(value, (bool, np.bool_)):
        return
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            current().fail(DTypeError, f"td.{what}: cannot fill a {dtype} tile with {value!r}")
        n = int(value)
    elif isinstance(value, (int, np.integer)):
        n = int(value)
    else:
        return  # a tile value: converted like .astype
    info = np.iinfo(dtype.np)
    if not int(info.min) <= n <= int(info.max):
        current().fail(DTypeError, f"td.{what}: the fill value {value!r} is out of range for "
                       f"{dtype} ({info.min} to {info.max}); NumPy raises OverflowError",
                       hint="choose a wider dtype, e.g. td.int32")


def _new_tensor(shape: Any, dtype: DType, what: str, fill: Any) -> Tensor:
    tr = current(f"td.{what}()")
    t = TensorType(_host_shape(shape, f"td.{what}"), dtype)
    if fill is None:
        v = tr.emit("tensor.empty", [], types=[t])[0]
    else:
        scalar = cast(to_value(fill), dtype)
        if scalar.shape != ():
            tr.fail(ShapeError, f"td.{what}: the fill value must be a scalar")
        v = tr.emit("tensor.full", [scalar.value], types=[t])[0]
    return Tensor(v, tensor_name(user_loc(), what))


def _shape_and_dtype(shape: Any, more: tuple, dtype: Any, what: str, size: Any = None
                     ) -> tuple[Any, Any]:
    """(shape, dtype) of `td.zeros(shape, dtype)` (Triton's order) or of torch's
    `td.zeros(m, n, dtype=...)` and `torch.empty(size=(m, n))`: sizes after the first make the
    shape, unless the one thing after it is a dtype."""
    if size is not None:  # torch's keyword
        if shape is not None or more:
            current().fail(TraceError, f"{what}() got its shape twice: positional and size=")
        return size, dtype
    if shape is None:
        current().fail(TraceError, f"{what}() takes a shape")
    if not more:
        return shape, dtype
    if len(more) == 1 and (isinstance(more[0], str) or not isinstance(
            more[0], (int, np.integer, TileValue, BlockSize)) and dtypes.from_any(more[0])):
        if dtype is not None:
            current().fail(TraceError, f"{what}() got its dtype twice: {more[0]!r} and "
                           f"dtype={dtype!r}")
        return shape, more[0]
    if isinstance(shape, (tuple, list)):
        current().fail(TraceError, f"{what}(): a shape is a tuple or its sizes one by one, "
                       f"got {shape!r} and then {more!r}")
    return (shape, *more), dtype


def empty(shape: Any = None, *more: Any, dtype: Any = None, device: Any = None,
          size: Any = None) -> Tensor:
    """A new output tensor in global memory (outside the tile loops): `td.empty((m, n),
    dtype)` or torch's `td.empty(m, n, dtype=...)`. `device=` (torch's) is accepted: outputs
    live on the inputs' device."""
    tr = current("td.empty()")
    if tr.depth != "host":
        tr.fail(TraceError, "td.empty() allocates a tensor and cannot be used inside a tile loop",
                hint="use td.zeros(...) or td.full(...) for a tile")
    shape, dtype = _shape_and_dtype(shape, more, dtype, "td.empty", size)
    return _new_tensor(shape, _dtype_arg(dtype, "td.empty"), "empty", None)


def full(shape: Any, value: Any, dtype: Any = None, *, what: str = "full", device: Any = None
         ) -> Tensor | TileValue:
    """A tile filled with `value` inside tile loops; a filled tensor outside them. (`what`: the
    td function the user called, for errors: td.zeros, td.ones_like, ...)"""
    tr = current(f"td.{what}()")
    v = to_value(value)
    d = v.dtype if dtype is None and not v.weak else _dtype_arg(dtype, f"td.{what}")
    _check_fill(value, d, what)
    if d.short == "f8e8m0" and not isinstance(value, TileValue):  # its bits, as torch's
        bits = full(shape, fp8.e8m0_bits(float(value)), dtypes.uint8, what=what)
        if isinstance(bits, Tensor):  # (torchao's `scales.new_zeros(...)`: fp8.py)
            return Tensor(tr.emit("tensor.bitcast", [bits.value], {"dtype": d.short})[0],
                          bits.name)
        return TileValue(tr.emit("bitcast", [bits.value], types=[bits.value.type.with_dtype(d)])[0])
    if tr.depth == "host":
        return _new_tensor(shape, d, what, v)
    if v.shape != ():
        tr.fail(ShapeError, f"td.{what}: the fill value must be a scalar")
    filled = broadcast_to(cast(v, d), _tile_shape(shape, f"td.{what}"))
    return TileValue(filled.value)  # of its dtype (strong), even when filled with a number


def zeros(shape: Any = None, *more: Any, dtype: Any = None, device: Any = None,
          size: Any = None) -> Tensor | TileValue:
    """A tile of zeros inside tile loops (float32 unless `dtype`); a zeroed tensor outside.
    The sizes may come one by one, as torch's (`td.zeros(m, n, dtype=...)`)."""
    current("td.zeros()")
    shape, dtype = _shape_and_dtype(shape, more, dtype, "td.zeros", size)
    return full(shape, 0, _dtype_arg(dtype, "td.zeros"), what="zeros")


def ones(shape: Any = None, *more: Any, dtype: Any = None, device: Any = None,
         size: Any = None) -> Tensor | TileValue:
    """torch's `ones`: a tile (or, outside the tile loops, a tensor) of ones, float32 unless
    `dtype`."""
    current("td.ones()")
    shape, dtype = _shape_and_dtype(shape, more, dtype, "td.ones", size)
    return full(shape, 1, _dtype_arg(dtype, "td.ones"), what="ones")


# td.where of tensors in host code (torch's whole-tensor select): host_math.py sets it
host_where: Callable[[Any, Any, Any], Any] | None = None
# td.associative_scan, for td.cumsum(..., reverse=True): scans.py sets it (it imports the
# frontend's rewrite, which imports this module's users)
associative_scan: Callable[..., TileValue] | None = None


def where(cond: Any, x: Any, y: Any) -> TileValue:
    """Elementwise select: x where cond is true, else y (broadcast like NumPy). Of a mask and
    two Python numbers, the result is as weak as the numbers (JAX's rule, and Triton's and
    torch's outcome): `qk + td.where(mask, 0, -1.0e6)` keeps qk's float32, where NumPy's
    `np.where` would make it float64. Of numbers only, it is a typed scalar, as NumPy's. Of
    tensors in host code, a grid that writes a new tensor (`host_where`)."""
    tr = current("td.where()")
    if tr.depth == "host" and host_where is not None and \
            any(type(a) is Tensor for a in (cond, x, y)):
        return host_where(cond, x, y)
    if options_of(x) is not None or options_of(y) is not None:  # a tensor chosen per program
        c = to_value(cond)
        if c.shape != () or options_of(x) is None or options_of(y) is None:
            tr.fail(TraceError, "td.where(cond, x_ptr, y_ptr) chooses between tensors (or "
                    "pointers) by a scalar condition", hint="select values, not tensors, per "
                    "lane: td.where(mask, td.load(x_ptr + offs), td.load(y_ptr + offs))")
        return choose_tensor(c if c.dtype.is_bool else c != 0, x, y)
    out = _where(cond, x, y)
    numbers = not isinstance(cond, TileValue) or cond.weak
    return strong(out) if out.weak and numbers else out


def dot(a: Any, b: Any, acc: Any = None, out_dtype: Any = None, *,
        input_precision: str | None = None, allow_tf32: bool | None = None,
        max_num_imprecise_acc: int | None = None, trans_a: bool = False,
        trans_b: bool = False) -> TileValue:
    """Matrix product of two 2-D tiles; 16-bit inputs accumulate and return float32. With
    `acc` (Triton's `tl.dot(a, b, acc)`), `acc + a @ b` in acc's dtype; `out_dtype` (Helion's
    `hl.dot`) casts the result. Triton's `input_precision=`, `allow_tf32=` and
    `max_num_imprecise_acc=` are taken and change nothing: float32 products are IEEE float32
    (NumPy's) on every backend. `trans_a=` / `trans_b=` are Triton's before 2.1 (flash-attn's
    `flash_attn_triton.py`: `tl.dot(q, k, trans_b=True)`): that operand transposed."""
    tr = current("td.dot()")
    if trans_a or trans_b:
        from tiledsl.frontend.td_names import FUNCTIONS
        a = FUNCTIONS["trans"](a) if trans_a else a
        b = FUNCTIONS["trans"](b) if trans_b else b
    if input_precision not in (None, "ieee", "tf32", "tf32x3", "bf16x3", "bf16x6") or \
            allow_tf32 not in (None, True, False):
        tr.fail(TraceError, f"td.dot: input_precision={input_precision!r}, "
                f"allow_tf32={allow_tf32!r} are not Triton's",
                hint="input_precision='ieee' (float32 products are IEEE float32 here anyway)")
    out = _dot(a, b) if acc is None else addmm(acc, a, b)
    return out if out_dtype is None else cast(out, _dtype_arg(out_dtype, "td.dot"))


def _unary(name: str) -> Any:
    @numpy_scalar_result
    def fn(x: Any) -> TileValue:
        current(f"td.{name}()")
        return unary(name, x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} (16-bit floats compute in float32)."
    return fn


exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
abs = _unary("abs")  # noqa: A001 (mirrors numpy.abs)


@numpy_scalar_result
def maximum(x: Any, y: Any, propagate_nan: Any = None) -> TileValue:
    """Elementwise maximum; a NaN wins, as in NumPy, on every backend (Triton's
    `propagate_nan=tl.PropagateNan.ALL`; the keyword is taken and changes nothing)."""
    current("td.maximum()")
    return binary("maximum", x, y)


@numpy_scalar_result
def minimum(x: Any, y: Any, propagate_nan: Any = None) -> TileValue:
    """Elementwise minimum; a NaN wins, as in NumPy, on every backend (Triton's
    `propagate_nan=tl.PropagateNan.ALL`; the keyword is taken and changes nothing)."""
    current("td.minimum()")
    return binary("minimum", x, y)


def _reduction(kind: str, doc: str) -> Any:
    def fn(x: Any, axis: Any = None, keepdims: bool = False, **torch: Any) -> Any:
        current(f"td.{kind}()")  # torch's dim= / keepdim= too (torch.sum(x, dim=1))
        indices = kind in ("max", "min") and torch.pop("return_indices", False)
        torch.pop("return_indices_tie_break_left", None)  # (the first lane wins: argmax's)
        dtype = torch.pop("dtype", None) if kind == "sum" else None
        axis, keep = torch_axis(f"td.{kind}", axis, keepdims, torch)
        if kind == "sum" and (d := sum_dtype(x, dtype, "td.sum")) is not None:
            return cast(reduce(kind, cast(to_value(x), d), axis, keep), d)
        out = reduce(kind, x, axis, keep)
        if indices:  # Triton's tl.max(x, axis, return_indices=True): (values, positions)
            return out, reduce("arg" + kind, x, axis, keep)
        return out
    fn.__name__ = fn.__qualname__ = kind
    fn.__doc__ = doc
    return fn


sum = _reduction("sum", "Sum over `axis` (all if None); 16-bit floats accumulate and return "  # noqa: A001
                 "float32.")
max = _reduction("max", "Maximum over `axis` (all if None); with Triton's "  # noqa: A001
                 "`return_indices=True`, (maximum, its first position).")
min = _reduction("min", "Minimum over `axis` (all if None); with Triton's "  # noqa: A001
                 "`return_indices=True`, (minimum, its first position).")
mean = _reduction("mean", "Mean over the elements in range (a partial tile divides by its true "
                  "size).")
argmax = _reduction("argmax", "The position of the maximum along one `axis`, as int32: the "
                    "first on ties, and the first NaN if there is one (as NumPy). Positions "
                    "count from the tile's first lane: add `t.begin` for the global index.")
argmin = _reduction("argmin", "The position of the minimum along one `axis` (see `argmax`).")


def sum_dtype(x: Any, dtype: Any, what: str) -> Any:
    """The dtype a sum is taken and returned in: `dtype=` (Triton's and torch's keyword); in a
    @triton.jit body, Triton's for integers (int32 below 32 bits, uint32 for unsigned ones and
    bools, else theirs: its sums wrap at that width); else None, tiledsl's (NumPy's: ints and
    bools int64)."""
    if dtype is not None:
        return as_dtype(dtype, what)
    v = to_value(x)
    if not current().triton_body or v.dtype.is_float:
        return None
    if v.dtype.bits >= 32 and not v.dtype.is_bool:
        return v.dtype
    return dtypes.uint32 if v.dtype.kind in "ub" else dtypes.int32


def cumsum(x: Any, axis: Any = None, reverse: bool = False, **torch: Any) -> TileValue:
    """Inclusive prefix sums along `axis` (required unless the tile is 1-D), in the dtype a sum
    has: 16-bit floats accumulate and return float32, ints and bools int64 (`dtype=` chooses;
    a @triton.jit body's take Triton's: `sum_dtype`). Sums start at the tile's first lane;
    carry the total of earlier tiles yourself (examples/row_cumsum.py). `reverse=True`
    (Triton's) sums from the last lane: a reversed scan (td.associative_scan)."""
    current("td.cumsum()")
    d = sum_dtype(x, torch.pop("dtype", None), "td.cumsum")
    axis = torch_axis("td.cumsum", axis, False, torch)[0]
    v = to_value(x) if d is None else cast(to_value(x), d)
    if not reverse:
        out = _cumsum(v, axis)
    else:
        v = cast(v, dtypes.float32) if v.dtype.is_float and v.dtype.bits < 32 else \
            v if v.dtype.is_float else cast(v, dtypes.int64)
        assert associative_scan is not None  # (set when tiledsl is imported)
        out = associative_scan(v, axis, lambda a, b: binary("add", a, b), True)
    return out if d is None else cast(out, d)


def astype(x: Any, dtype: Any) -> TileValue:
    current("td.astype()")
    return cast(to_value(x), as_dtype(dtype, "td.astype"))


__all__ = [
    "TileRange", "abs", "astype", "dot", "empty", "erf", "exp", "exp2", "full",
    "grid", "log", "max", "maximum", "mean", "min", "minimum", "rsqrt", "sigmoid", "sqrt", "sum",
    "tanh", "tile", "where", "zeros",
]
