"""Triton's names for what a tiledsl kernel already says, so a ported `@triton.jit` body keeps
its lines: the compiler hints `td.multiple_of`, `td.max_contiguous` and `td.max_constancy`
(tiledsl derives alignment and contiguity from the index expressions it generates, so a hint
returns its value unchanged), `td.debug_barrier()` (tiledsl places the barriers a program's
stores need itself: lowering/backends/triton/barriers.py), `td.static_assert`, `td.trans`,
`td.expand_dims` and `td.ravel`; on tiles and tensors, torch's `v.t()`. None adds an op.

`td.math.fma(a, b, c)` is Triton's `tl.math.fma`: `td.math` holds td's functions under the
names `tl.math` and libdevice give them (`td.math.tanh`). `td.cast(x, dtype)` is `tl.cast`.

A tiledsl kernel names its programs with a grid loop (`for pid in td.grid(n)`): `td.program_id`
(`tl.program_id`) is a program's index only in the body of a Triton kernel a host-code launch
runs (`kernel[grid](...)`, frontend/launches.py); elsewhere its error says to write the grid
loop. `td.num_programs(axis)` inside the grid is its size along that axis.
"""

from __future__ import annotations

from typing import Any

from tiledsl import dtypes
from tiledsl.errors import ShapeError, TraceError
from tiledsl.frontend.choices import Choice
from tiledsl.frontend.loops import Carried
from tiledsl.frontend.pointers import Pointer, PointerType
from tiledsl.frontend.td_names import FUNCTIONS, TRITON_ONLY
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import Tensor, TileValue, to_value
from tiledsl.ir.types import RangeType
from tiledsl.lang.views import flatten, permute, unsqueeze

# Triton's names a module-level lookup answers with where tiledsl says it (tiledsl/__init__.py)
MISSING = {
    "device_print": "run the kernel on the NumPy backend (`k.run(..., backend=\"numpy\")`) and "
                    "print there; values are NumPy arrays between ops",
}


class PropagateNan:
    """Triton's `tl.PropagateNan` (`propagate_nan=` of `tl.maximum`, `tl.minimum`, `tl.clamp`):
    in tiledsl a NaN wins on every backend, which is `ALL`. Under `NONE` (Triton's default)
    a GPU may return the other operand instead, so only NaN inputs can differ."""
    NONE = "NONE"
    ALL = "ALL"


def topk(x: Any, k: int, dim: Any = None) -> TileValue:
    """Triton's `tl.topk(x, k)` in a @triton.jit body: the k largest values along the last
    axis, largest first (td.topk, as torch's, also returns their positions)."""
    from tiledsl.lang.scans import topk as td_topk
    return td_topk(x, k, -1 if dim is None else dim)[0]


TRITON_ONLY["topk"] = topk  # (frontend/td_names.py)


def _hint(x: Any, values: Any, what: str) -> Any:
    """A hint's value unchanged: a tile, or a pointer (the grouped GEMM tutorial's
    `tl.multiple_of(a_ptrs, [16, 16])`)."""
    current(f"td.{what}()")
    return x if isinstance(x, (Pointer, Choice, Carried)) else to_value(x)


def multiple_of(x: Any, values: Any) -> TileValue:
    """`tl.multiple_of`: `x` unchanged (a hint that tiledsl's generated code does not need)."""
    return _hint(x, values, "multiple_of")


def fdiv(x: Any, y: Any, ieee_rounding: bool = False) -> TileValue:
    """Triton's `tl.fdiv(x, y)` (and `tl.math.div_rn`): `x / y`, correctly rounded on every
    backend (Triton's own `ieee_rounding=False` may round the last bit differently)."""
    current("td.fdiv()")
    return to_value(x) / y


def max_contiguous(x: Any, values: Any) -> TileValue:
    """`tl.max_contiguous`: `x` unchanged (see `multiple_of`)."""
    return _hint(x, values, "max_contiguous")


def max_constancy(x: Any, values: Any) -> TileValue:
    """`tl.max_constancy`: `x` unchanged (see `multiple_of`)."""
    return _hint(x, values, "max_constancy")


def cast(x: Any, dtype: Any, fp_downcast_rounding: str | None = None,
         bitcast: bool = False) -> TileValue:
    """`tl.cast(x, dtype)`: `x.to(dtype)` (the IEEE round to nearest even, Triton's default;
    `fp_downcast_rounding="rtz"` rounds a narrowing float cast toward zero); with
    `bitcast=True`, `td.bitcast(x, dtype)`. To `tl.pointer_type(T)`, an address is the pointer
    there (frontend/pointer_tables.py)."""
    current("td.cast()")
    if isinstance(dtype, PointerType):
        return x.to(dtype)
    return to_value(x).to(dtype, fp_downcast_rounding=fp_downcast_rounding,  # type: ignore[call-arg]
                          bitcast=bitcast)


def debug_barrier() -> None:
    """`tl.debug_barrier()`: nothing to do. A program's ops run in order on every backend; on
    Triton, tiledsl puts a barrier between a store and a later access of the same elements by
    other threads of the program (barriers.py)."""
    current("td.debug_barrier()")


class _Programs(int):
    """`tl.num_programs(axis)`: an int, which Triton's code converts as a tensor
    (`tl.num_programs(0).to(tl.int64)`, FlagGems' `tle.num_programs`)."""

    def to(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        """An int again for an integer dtype (the count stays known: `range(pid, n,
        tl.num_programs(0).to(tl.int64))`), else the converted scalar."""
        from tiledsl import dtypes
        if (d := dtypes.from_any(dtype)) is not None and d.is_int and not args and not kwargs:
            return self
        return to_value(int(self)).to(dtype, *args, **kwargs)  # type: ignore[attr-defined]


def num_programs(axis: int = 0) -> int:
    """`tl.num_programs(axis)` inside a grid: how many programs the enclosing grid runs along
    `axis` (a Python int: grid sizes are known when the kernel traces)."""
    tr = current("td.num_programs()")
    if tr.depth == "host" or len(tr.depths) < 2 or tr.depths[1] != "grid":
        tr.fail(TraceError, "td.num_programs() is called outside a grid",
                hint="call it inside `for pid in td.grid(n): ...`; outside, the size is n")
    ranges = [a.type for a in tr.blocks[1].args if isinstance(a.type, RangeType)]
    if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < len(ranges):
        tr.fail(TraceError, f"td.num_programs({axis!r}): the grid has {len(ranges)} axes")
    r = ranges[axis]
    if not isinstance(r.block, int):
        tr.fail(TraceError, f"td.num_programs({axis}): a grid of tiles whose block size the "
                "config chooses", hint="register the block size (bs = "
                "td.register_block_size(n)) and count with td.cdiv(n, bs)")
    return _Programs(-(-r.extent // r.block))


def static_assert(cond: Any, msg: str = "") -> None:
    """`tl.static_assert`: a condition known while tracing, which must hold."""
    tr = current("td.static_assert()")
    if isinstance(cond, TileValue):
        tr.fail(TraceError, "td.static_assert: the condition is a runtime value",
                hint="assert on shapes, ints and compile-time arguments")
    if not cond:
        tr.fail(TraceError, f"td.static_assert failed{': ' + msg if msg else ''}")


def trans(x: Any, *dims: Any) -> TileValue:
    """`tl.trans`: the last two axes swapped (of a 2-D tile, its transpose), or the axes in the
    order `dims`."""
    v = to_value(x)
    if dims:
        return permute(v, *dims)
    if v.ndim < 2:
        current().fail(ShapeError, f"td.trans: a tile of {v.ndim} axis has nothing to swap")
    return permute(v, (*range(v.ndim - 2), v.ndim - 1, v.ndim - 2))


def expand_dims(x: Any, axis: int) -> TileValue:
    """`tl.expand_dims`: a new axis of 1 at `axis`."""
    return unsqueeze(x, axis)


def ravel(x: Any) -> TileValue:
    """`tl.ravel`: the tile's lanes in one axis."""
    return flatten(x)


def t(x: Any) -> Any:
    """torch's `v.t()` / `x.t()`: a 2-D value transposed; 0-D and 1-D ones as they are."""
    if x.ndim > 2:
        current().fail(ShapeError, f"t() expects a value of at most 2 axes, got {x.ndim}",
                       hint="use .permute(...) or .transpose(a, b)")
    return x if x.ndim < 2 else x.permute(1, 0)


TileValue.t = t  # type: ignore[attr-defined]
Tensor.t = t  # type: ignore[attr-defined]


def round_half_away(x: Any) -> TileValue:
    """libdevice's `round` (`__nv_roundf`, C's roundf): to the nearest integer, halves away
    from zero (2.5 -> 3, -2.5 -> -3), where td.round (and libdevice's `rint`) go to even. The
    fraction `x - trunc(x)` is exact, so no sum rounds a value just under a half up."""
    current("td.math.round()")
    v = to_value(x)
    whole = FUNCTIONS["trunc"](v)
    return FUNCTIONS["where"](FUNCTIONS["abs"](v - whole) >= 0.5, whole + FUNCTIONS["sign"](v),
                              whole)


class _Math:
    """`td.math`, Triton's `tl.math`: td's functions of the same names (FUNCTIONS, filled by
    tiledsl/__init__.py)."""

    NAMES = ("abs", "ceil", "cos", "erf", "exp", "exp2", "floor", "fma", "log", "log2",
             "rsqrt", "sin", "sqrt", "cdiv")

    # libdevice's and tl.math's other names for td's functions
    ALIASES = {"finitef": "isfinite", "isfinited": "isfinite", "div_rn": "fdiv", "rint": "round",
               "isnanf": "isnan", "isinff": "isinf", "isnand": "isnan", "isinfd": "isinf",
               "nearbyint": "round"}

    def __getattr__(self, name: str) -> Any:
        if name == "round":  # libdevice's roundf: half away from zero (td.round's is to even)
            return round_half_away
        if name in ("llrint", "lrint", "llround", "lround"):  # to int64 (a C long is 64 bits)
            rounding = FUNCTIONS["round"] if "rint" in name else round_half_away
            return lambda x: rounding(x).to(dtypes.int64)
        if name in self.NAMES or name in FUNCTIONS:  # and libdevice's (tanh, log1p, pow, ...)
            return FUNCTIONS[name]
        if name in self.ALIASES:
            return FUNCTIONS[self.ALIASES[name]]
        raise AttributeError(
            f"td.math has no {name!r}: it holds Triton's tl.math functions that tiledsl has ("
            + ", ".join(self.NAMES) + ") and td's other math functions (td.tanh, td.log1p, "
            "...); division is `/`")

    def __dir__(self) -> list[str]:
        return list(self.NAMES)


math = _Math()


class _Extra:
    """Triton's `tl.extra` in a @triton.jit body: `tl.extra.cuda.libdevice.round` (SGLang's
    int8 quantization) and `tl.extra.libdevice` are `td.math`, as `from
    triton.language.extra import libdevice` is."""

    def __init__(self, depth: int = 0) -> None:
        self.depth = depth

    def __getattr__(self, name: str) -> Any:
        if name == "libdevice":
            return math
        if name in ("cuda", "hip") and self.depth == 0:
            return _Extra(1)
        raise AttributeError(f"tl.extra has no {name!r} in tiledsl: its libdevice functions are "
                             "td.math's (tl.extra.cuda.libdevice.round is td.math.round)")


TRITON_ONLY["extra"] = _Extra()  # (frontend/td_names.py)


TileValue.trans = trans  # type: ignore[attr-defined] (Triton's `v.trans(1, 0)`)


def _logical(op: str) -> Any:
    """Triton's `x.logical_and(y)` / `x.logical_or(y)` (FlagGems' `x.to(tl.int1).logical_and(
    y.to(tl.int1))`): `&` / `|` of the two as bools (nonzero is True)."""
    def method(self: TileValue, other: Any) -> TileValue:
        a, b = (v if v.dtype.is_bool else v != 0 for v in (to_value(self), to_value(other)))
        return a & b if op == "and" else a | b
    method.__name__ = f"logical_{op}"
    return method


TileValue.logical_and = _logical("and")  # type: ignore[attr-defined]
TileValue.logical_or = _logical("or")  # type: ignore[attr-defined]


def program_id(axis: int = 0) -> Any:
    """Triton's `tl.program_id(axis)` in the body of a Triton kernel that a host-code launch
    runs (`kernel[grid](...)`), or that a grid's body calls: the program's index along `axis`
    (a `td.tile` grid's: its tile's number, `t.id`)."""
    tr = current("td.program_id()")
    ids = tr.program_ids
    if ids is None:
        tr.fail(TraceError, "td.program_id(): a tiledsl kernel names its programs with a grid "
                "loop", hint="`for pid in td.grid(n_programs): ...` (pid is tl.program_id(0); "
                "td.grid(m, n) gives two axes), or launch the Triton kernel as its wrapper "
                "does: kernel[grid](...)")
    if not isinstance(axis, int) or not 0 <= axis < 3:
        tr.fail(TraceError, f"td.program_id({axis!r}): the axis is 0, 1 or 2")
    if axis >= len(ids):
        return to_value(0)
    return ids[axis] if isinstance(ids[axis], TileValue) else ids[axis].id  # (a grid's tile)

