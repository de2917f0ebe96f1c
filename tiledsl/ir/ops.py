"""Every op of the tile IR with its typing rule, in one table.

A rule takes the operand types, the attributes and (for ops whose result type is written out,
such as `cast` or `const`) the declared result types, and returns the result types or raises.
The tracer builds ops through these rules and the verifier re-checks them, so an op's meaning
is defined once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tiledsl import dtypes
from tiledsl.dtypes import DType
from tiledsl.errors import DTypeError, IRError, ShapeError
from tiledsl.ir.gathers import is_index_tile, layout
from tiledsl.ir.slices import check as check_slices, slices_of
from tiledsl.ir.types import Dim, RangeType, TensorType, TileType, Type

Rule = Callable[[Sequence[Type], dict, Sequence[Type] | None], list[Type]]
# Where the axes of an op's first operand go in its result: {operand axis: result axis}, an
# axis left out is consumed (reduced, merged). Passes that follow the lanes of a range through
# values (lanes.py) read it, so an op that moves axes says how once, here.
AxisMap = Callable[[dict, "TileType", "TileType"], dict[int, int]]

# Traits: what passes may assume of an op without knowing its name.
ELEMENTWISE = "elementwise"  # result has its operands' shape; lane i depends on lane i only
VIEW = "view"  # rearranges elements, computes nothing (cost models price it as free)
MIXES_LANES = "mixes-lanes"  # combines lanes along an axis (reductions, scans, dots)
WRITES = "writes"  # writes its first operand, a tensor (stores, atomics)
RANDOM = "random"  # a counter-based random function of (seed, offsets): pure, and costly
ISOLATED = "isolated"  # its region sees only its own arguments (MLIR's IsolatedFromAbove)


@dataclass(frozen=True)
class OpDef:
    name: str
    rule: Rule
    explicit_type: bool = False  # result types are written by the producer, the rule checks them
    pure: bool = True  # no effect beyond its results (DCE may remove it when unused)
    cse: bool = True  # two equal ops compute the same value (false for allocations)
    regions: int = 0
    terminator: bool = False
    traits: frozenset[str] = frozenset()
    axes: AxisMap | None = None  # for ops that move axes (VIEW ops): see AxisMap


OPS: dict[str, OpDef] = {}


def _def(name: str, *, explicit_type: bool = False, pure: bool = True, cse: bool = True,
         regions: int = 0, terminator: bool = False, traits: tuple[str, ...] = (),
         axes: AxisMap | None = None) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        OPS[name] = OpDef(name, rule, explicit_type, pure, cse, regions, terminator,
                          frozenset(traits), axes)
        return rule
    return register


def same_axes(attrs: dict, src: TileType, dst: TileType) -> dict[int, int]:
    """The axis map of an op whose result has its operand's axes."""
    return {a: a for a in range(src.rank)}


def has_trait(name: str, trait: str) -> bool:
    """Whether op `name` declares `trait` (unknown ops have none)."""
    opdef = OPS.get(name)
    return opdef is not None and trait in opdef.traits


def tile(t: Type, what: str) -> TileType:
    if not isinstance(t, TileType):
        raise IRError(f"{what} must be a tile value, got {t}")
    return t


def _same(ts: Sequence[Type], name: str) -> TileType:
    first = tile(ts[0], f"{name} operand")
    for t in ts[1:]:
        if t != first:
            raise IRError(f"{name}: operand types differ: {first} vs {t}")
    return first


def _arity(ts: Sequence[Type], n: int, name: str) -> None:
    if len(ts) != n:
        raise IRError(f"{name} takes {n} operands, got {len(ts)}")


SHIFTS = ("shl", "shr")  # `<<`, `>>` (arithmetic on signed ints, logical on unsigned)
BINARY = ("add", "sub", "mul", "div", "floordiv", "mod", "pow", "maximum", "minimum",
          "and", "or", "xor") + SHIFTS + ("atan2", "hypot", "copysign", "fmod")
# The math library's binary functions (libdevice's): float operands, a float result
MATH_BINARY = ("atan2", "hypot", "copysign", "fmod")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
# The math library (libdevice's functions on a GPU): float -> float, as the functions above
MATH_UNARY = ("log2", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
              "cosh", "asinh", "acosh", "atanh", "log10", "cbrt")
FLOAT_UNARY = ("exp", "exp2", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf") + MATH_UNARY
ROUNDING = ("floor", "ceil", "round", "trunc")  # float -> float (an int is its own rounding)
UNARY = ("neg", "abs", "not", "sign") + FLOAT_UNARY + ROUNDING
FLOAT_TESTS = ("isnan", "isinf")  # float -> bool
REDUCTIONS = ("sum", "max", "min", "mean", "argmax", "argmin")
ARG_REDUCTIONS = ("argmax", "argmin")  # the position of the max/min along one axis


def storage_only(d: DType, what: str) -> None:
    """fp8 tiles are loaded, stored, cast and multiplied with `@`; other math is refused (as in
    Triton, whose fp8 types have no arithmetic)."""
    if d.is_fp8:
        raise DTypeError(f"'{what}' is not defined on {d} tiles (fp8 is a storage type: it is "
                         "loaded, stored, cast and multiplied with '@')",
                         hint="cast to float32 first: x.astype(td.float32)")


def _binary_rule(name: str) -> Rule:
    def rule(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
        _arity(ts, 2, name)
        t = _same(ts, name)
        storage_only(t.dtype, name)
        if name in ("and", "or", "xor") and t.dtype.is_float:
            raise DTypeError(f"bitwise '{name}' needs integer or bool operands, got {t.dtype}")
        if name in ("div", "pow") + MATH_BINARY and not t.dtype.is_float:
            raise DTypeError(f"'{name}' needs float operands, got {t.dtype}")
        if name in SHIFTS and not t.dtype.is_int:
            raise DTypeError(f"'{name}' needs integer operands, got {t.dtype}")
        if name in ("add", "sub", "mul", "floordiv", "mod") and t.dtype.is_bool:
            raise DTypeError(f"'{name}' is not defined on bool tiles; cast with .astype first")
        return [t]
    return rule


def _compare_rule(name: str) -> Rule:
    def rule(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
        _arity(ts, 2, name)
        storage_only(_same(ts, name).dtype, name)
        return [_same(ts, name).with_dtype(dtypes.bool_)]
    return rule


def _unary_rule(name: str) -> Rule:
    def rule(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
        _arity(ts, 1, name)
        t = tile(ts[0], name)
        storage_only(t.dtype, name)
        if name in FLOAT_UNARY + ROUNDING and not t.dtype.is_float:
            raise DTypeError(f"'{name}' needs a float operand, got {t.dtype}")
        if name == "not" and t.dtype.is_float:
            raise DTypeError(f"'~' needs an integer or bool operand, got {t.dtype}")
        if name in ("neg", "abs", "sign") and t.dtype.is_bool:
            raise DTypeError(f"'{name}' is not defined on bool tiles")
        return [t]
    return rule


for _n in BINARY:
    _def(_n, traits=(ELEMENTWISE,))(_binary_rule(_n))
for _n in COMPARE:
    _def(_n, traits=(ELEMENTWISE,))(_compare_rule(_n))
for _n in UNARY:
    _def(_n, traits=(ELEMENTWISE,))(_unary_rule(_n))


def _float_test_rule(name: str) -> Rule:
    def rule(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
        _arity(ts, 1, name)
        t = tile(ts[0], name)
        if not t.dtype.is_float:
            raise DTypeError(f"'{name}' needs a float operand, got {t.dtype}")
        return [t.with_dtype(dtypes.bool_)]
    return rule


for _n in FLOAT_TESTS:
    _def(_n, traits=(ELEMENTWISE,))(_float_test_rule(_n))


@_def("fma", traits=(ELEMENTWISE,))
def _fma(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """x * y + z rounded once."""
    _arity(ts, 3, "fma")
    t = _same(ts, "fma")
    if not t.dtype.is_float:
        raise DTypeError(f"'fma' needs float operands, got {t.dtype}")
    return [t]


@_def("where", traits=(ELEMENTWISE,))
def _where(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 3, "where")
    c, x, y = (tile(t, "where operand") for t in ts)
    if not c.dtype.is_bool:
        raise DTypeError(f"where: condition must be bool, got {c.dtype}")
    if x != y or c.shape != x.shape:
        raise IRError(f"where: operand types differ: {c}, {x}, {y}")
    return [x]


@_def("const", explicit_type=True)
def _const(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 0, "const")
    if res is None or len(res) != 1 or tile(res[0], "const").shape != ():
        raise IRError("const produces one scalar")
    if not isinstance(attrs.get("value"), (bool, int, float)):
        raise IRError("const needs a numeric 'value' attribute")
    return list(res)


def _same_shape(ts: Sequence[Type], res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 1, "cast")
    src = tile(ts[0], "cast operand")
    if res is None or len(res) != 1 or tile(res[0], "cast result").shape != src.shape:
        raise IRError("cast keeps the shape")
    return list(res)


@_def("cast", explicit_type=True, traits=(ELEMENTWISE,))
def _cast(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None) -> list[Type]:
    out = _same_shape(ts, res)
    src, dst = tile(ts[0], "cast operand").dtype, tile(out[0], "cast result").dtype
    if dst.short == "f8e8m0" and src != dst:  # (tiledsl/lang/fp8.py)
        raise DTypeError(f"a conversion from {src} to float8_e8m0fnu: its rounding is not "
                         "defined", hint="make the biased exponent as a uint8 and view it "
                         "(`bits.to(td.float8_e8m0fnu, bitcast=True)`, "
                         "`t.view(torch.float8_e8m0fnu)`), as torchao's MX kernels do")
    return out


@_def("bitcast", explicit_type=True, traits=(ELEMENTWISE,))
def _bitcast(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None) -> list[Type]:
    """The same bits read as another dtype of the same width (NumPy's `view`): a cast that
    keeps the width."""
    out = _same_shape(ts, res)
    src, dst = tile(ts[0], "bitcast operand").dtype, tile(out[0], "bitcast result").dtype
    if dst.bits != src.bits or dst.is_bool or src.is_bool:
        raise DTypeError(f"bitcast from {src} to {dst}: the widths differ")
    return out


def broadcastable(src: tuple[Dim, ...], dst: tuple[Dim, ...]) -> bool:
    if not src:
        return True
    return len(src) == len(dst) and all(s == d or s == 1 for s, d in zip(src, dst))


def _broadcast_axes(attrs: dict, src: TileType, dst: TileType) -> dict[int, int]:
    shift = dst.rank - src.rank  # a broadcast axis of 1 holds no lanes
    return {a: a + shift for a in range(src.rank) if src.shape[a] != 1}


@_def("broadcast", explicit_type=True, traits=(VIEW,), axes=_broadcast_axes)
def _broadcast(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 1, "broadcast")
    src = tile(ts[0], "broadcast operand")
    if res is None or len(res) != 1:
        raise IRError("broadcast produces one tile")
    dst = tile(res[0], "broadcast result")
    if dst.dtype != src.dtype or not broadcastable(src.shape, dst.shape):
        raise IRError(f"cannot broadcast {src} to {dst}")
    return [dst]


@_def("expand_dims", traits=(VIEW,),
      axes=lambda attrs, src, dst: {a: a + (a >= attrs["axis"]) for a in range(src.rank)})
def _expand_dims(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 1, "expand_dims")
    t = tile(ts[0], "expand_dims operand")
    axis = attrs["axis"]
    if not 0 <= axis <= t.rank:
        raise IRError(f"expand_dims: axis {axis} out of range for {t}")
    return [TileType(t.shape[:axis] + (1,) + t.shape[axis:], t.dtype)]


@_def("transpose", traits=(VIEW,),
      axes=lambda attrs, src, dst: {p: i for i, p in enumerate(attrs["perm"])})
def _transpose(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 1, "transpose")
    t = tile(ts[0], "transpose operand")
    perm = tuple(attrs["perm"])
    if sorted(perm) != list(range(t.rank)):
        raise IRError(f"transpose: {perm} is not a permutation of {t.rank} axes")
    return [TileType(tuple(t.shape[p] for p in perm), t.dtype)]


def reshape_groups(src: tuple[Dim, ...], dst: tuple[Dim, ...]
                   ) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """How a reshape regroups axes: (source axes, result axes) pairs, in order, each a
    block-size axis alone or a run of constant axes with equal products; None when the shapes
    do not line up (the block sizes are not known until a config is chosen, so each must keep
    its own axis)."""
    def runs(shape: tuple[Dim, ...]) -> list[tuple[int, ...] | int]:
        out: list[tuple[int, ...] | int] = []
        run: list[int] = []
        for i, d in enumerate(shape):
            if isinstance(d, str):
                out += [tuple(run), i]
                run = []
            else:
                run.append(i)
        return out + [tuple(run)]
    a, b = runs(src), runs(dst)
    if len(a) != len(b):
        return None
    groups = []
    for x, y in zip(a, b):
        if isinstance(x, int) or isinstance(y, int):
            if not (isinstance(x, int) and isinstance(y, int)) or src[x] != dst[y]:
                return None
            groups.append(((x,), (y,)))
        else:
            if math.prod(src[i] for i in x) != math.prod(dst[i] for i in y):  # type: ignore[misc]
                return None
            groups.append((x, y))
    return groups


def _reshape_axes(attrs: dict, src: TileType, dst: TileType) -> dict[int, int]:
    """Axes a reshape keeps whole (a group of one axis on each side); merged or split ones are
    consumed."""
    groups = reshape_groups(src.shape, tuple(attrs["shape"])) or []
    kept = {}
    for x, y in groups:  # axes of 1 added or dropped move the others whole: (1, 1, m, n) -> (m, n)
        xs = [i for i in x if src.shape[i] != 1]
        ys = [j for j in y if dst.shape[j] != 1]
        if [src.shape[i] for i in xs] == [dst.shape[j] for j in ys]:
            kept.update(zip(xs, ys))
    return kept


@_def("reshape", traits=(VIEW,), axes=_reshape_axes)
def _reshape(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """The elements of a tile in row-major order, laid out in a new shape."""
    _arity(ts, 1, "reshape")
    t = tile(ts[0], "reshape operand")
    shape = tuple(attrs["shape"])
    if reshape_groups(t.shape, shape) is None:
        raise ShapeError(f"cannot reshape {t} to shape {shape}")
    return [TileType(shape, t.dtype)]


@_def("join", traits=(VIEW,), axes=same_axes)
def _join(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """Two tiles of one type side by side along a new last axis of 2 (tl.join)."""
    _arity(ts, 2, "join")
    t = _same(ts, "join")
    return [TileType(t.shape + (2,), t.dtype)]


@_def("split", traits=(VIEW,), axes=lambda attrs, src, dst: {a: a for a in range(src.rank - 1)})
def _split(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """The two halves of a tile whose last axis is 2 (tl.split): join's inverse."""
    _arity(ts, 1, "split")
    t = tile(ts[0], "split operand")
    if not t.shape or t.shape[-1] != 2:
        raise ShapeError(f"split needs a last axis of 2, got {t}")
    half = TileType(t.shape[:-1], t.dtype)
    return [half, half]


@_def("gather", traits=(MIXES_LANES,))
def _gather(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """`out[..., i, ...] = src[..., index[..., i, ...], ...]` along `axis` (tl.gather): the
    index tile's shape, the source's dtype; the other axes equal."""
    _arity(ts, 2, "gather")
    src, index = tile(ts[0], "gather source"), tile(ts[1], "gather index")
    axis = attrs["axis"]
    if src.rank != index.rank or not 0 <= axis < src.rank:
        raise ShapeError(f"gather along axis {axis} needs a source and an index of one rank, got "
                         f"{src} and {index}")
    if any(a != b for d, (a, b) in enumerate(zip(src.shape, index.shape)) if d != axis):
        raise ShapeError(f"gather along axis {axis}: the other axes of {src} and {index} differ")
    if not index.dtype.is_int:
        raise DTypeError(f"gather's index is an integer tile, got {index}")
    return [TileType(index.shape, src.dtype)]


@_def("dot", traits=(MIXES_LANES,))
def _dot(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 2, "dot")
    a, b = tile(ts[0], "dot lhs"), tile(ts[1], "dot rhs")
    if a.rank != b.rank or a.rank not in (2, 3):
        raise ShapeError(f"'@' needs two 2-D or two 3-D tiles, got {a.rank}-D and {b.rank}-D")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"'@' contraction dimensions differ: {a} @ {b}")
    if a.shape[:-2] != b.shape[:-2]:
        raise ShapeError(f"'@' batch dimensions differ: {a} @ {b}")
    if a.dtype != b.dtype:
        raise DTypeError(f"'@' operand dtypes differ: {a.dtype} @ {b.dtype}; cast one with .astype")
    if a.dtype.is_bool:
        raise DTypeError("'@' is not defined on bool tiles")
    return [TileType(a.shape[:-1] + b.shape[-1:], dtypes.accumulator(a.dtype))]


def reduce_dtype(kind: str, d: DType) -> DType:
    """A sum of 16-bit floats is float32, and of ints or bools int64, of unsigned ints uint64
    (as NumPy: it never wraps at the input's width); a mean of ints is float32; a position is int32 (as Triton's and
    JAX's argmax)."""
    if kind in ARG_REDUCTIONS:
        return dtypes.int32
    if kind == "sum":
        if d.is_unsigned:
            return dtypes.uint64
        return dtypes.accumulator(d) if d.is_float else dtypes.int64
    if kind == "mean":
        return dtypes.accumulator(d) if d.is_float else dtypes.float32
    return d


def _reduce_axes(attrs: dict, src: TileType, dst: TileType) -> dict[int, int]:
    axis, keep = attrs["axis"], attrs["keepdims"]
    return {a: a - (a > axis and not keep) for a in range(src.rank) if a != axis}


@_def("reduce", traits=(MIXES_LANES,), axes=_reduce_axes)
def _reduce(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 1, "reduce")
    t = tile(ts[0], "reduce operand")
    kind, axis, keep = attrs["kind"], attrs["axis"], attrs["keepdims"]
    if kind not in REDUCTIONS:
        raise IRError(f"unknown reduction {kind!r}")
    storage_only(t.dtype, kind)
    if not 0 <= axis < t.rank:
        raise IRError(f"reduce: axis {axis} out of range for {t}")
    shape = t.shape[:axis] + ((1,) if keep else ()) + t.shape[axis + 1:]
    return [TileType(shape, reduce_dtype(kind, t.dtype))]


@_def("cumsum", traits=(MIXES_LANES,), axes=same_axes)
def _cumsum(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """Inclusive prefix sums along `axis`, in the dtype a sum has (reduce_dtype)."""
    _arity(ts, 1, "cumsum")
    t = tile(ts[0], "cumsum operand")
    storage_only(t.dtype, "cumsum")
    if not 0 <= attrs["axis"] < t.rank:
        raise IRError(f"cumsum: axis {attrs['axis']} out of range for {t}")
    return [t.with_dtype(reduce_dtype("sum", t.dtype))]


# Triton's Philox family (tl.rand, ...): op name -> (result dtype, number of results).
# randint's words are int32 with the bits of Triton's uint32.
RANDOM_OPS = {"rand": (dtypes.float32, 1), "randn": (dtypes.float32, 1),
              "randint": (dtypes.int32, 1), "rand4x": (dtypes.float32, 4),
              "randn4x": (dtypes.float32, 4), "randint4x": (dtypes.int32, 4)}


def _random_rule(name: str) -> Rule:
    """(integer seed: a scalar, or a tile of the offsets' shape, integer offsets) -> random
    tiles of the offsets' shape, lane i a function of its seed and offset i only."""
    dtype, count = RANDOM_OPS[name]

    def rule(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
        _arity(ts, 2, name)
        seed, offsets = tile(ts[0], f"{name} seed"), tile(ts[1], f"{name} offsets")
        if seed.shape not in ((), offsets.shape) or not seed.dtype.is_int:
            raise DTypeError(f"{name}: the seed must be an integer scalar or a tile of the "
                             f"offsets' shape, got {seed}")
        if not offsets.dtype.is_int:
            raise DTypeError(f"{name}: offsets must be integers, got {offsets.dtype}")
        return [offsets.with_dtype(dtype)] * count
    return rule


for _n in RANDOM_OPS:
    _def(_n, traits=(ELEMENTWISE, RANDOM))(_random_rule(_n))


@_def("philox", traits=(ELEMENTWISE, RANDOM))
def _philox(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """Triton's `tl.philox`: (integer scalar seed, four uint32 counter tiles of one shape) ->
    Philox's four uint32 words, `n_rounds` rounds (attr)."""
    _arity(ts, 5, "philox")
    seed = tile(ts[0], "philox seed")
    if seed.shape != () or not seed.dtype.is_int:
        raise DTypeError(f"philox: the seed must be an integer scalar, got {seed}")
    counter = _same(ts[1:], "philox")
    if counter.dtype != dtypes.uint32:
        raise DTypeError(f"philox: the counters are uint32, got {counter.dtype}")
    if not isinstance(attrs.get("n_rounds"), int) or attrs["n_rounds"] < 0:
        raise IRError(f"philox: n_rounds is a non-negative int, got {attrs.get('n_rounds')!r}")
    return [counter] * 4


@_def("inline_asm", traits=(ELEMENTWISE,))
def _inline_asm(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """Triton's `tl.inline_asm_elementwise`: operand tiles of one shape (or none) -> one tile
    of that shape per dtype in `dtypes` (attr, short names); `asm`, `constraints` (strings)
    and `pack` (elements per instance) are passed to the GPU as they are."""
    shapes = {tile(t, "inline_asm operand").shape for t in ts}
    if len(shapes) > 1:
        raise ShapeError(f"inline_asm: operands of shapes {sorted(map(str, shapes))}")
    shape = shapes.pop() if shapes else ()
    names = attrs.get("dtypes")
    if not isinstance(names, (tuple, list)) or not names or \
            any(n not in dtypes.BY_SHORT for n in names):
        raise IRError(f"inline_asm: dtypes is a list of dtype names, got {names!r}")
    if not isinstance(attrs.get("asm"), str) or not isinstance(attrs.get("constraints"), str):
        raise IRError("inline_asm: asm and constraints are strings")
    if not isinstance(attrs.get("pack"), int) or attrs["pack"] < 1:
        raise IRError(f"inline_asm: pack is a positive int, got {attrs.get('pack')!r}")
    return [TileType(shape, dtypes.BY_SHORT[n]) for n in names]


def _along(ts: Sequence[Type], attrs: dict, name: str, n: int) -> TileType:
    """The common type of the first `n` operands of a scan or sort, and its axis checked; a
    `masked` op has one more operand: which lanes are in range (ragged.py adds it, and
    lang/scans.py for a jagged tile's rows)."""
    if len(ts) != n + bool(attrs.get("masked")) or n < 1:
        raise IRError(f"{name}: {len(ts)} operands for {n} tiles")
    t = tile(ts[0], f"{name} operand")
    for other in ts[1:n]:
        if tile(other, f"{name} operand").shape != t.shape:
            raise IRError(f"{name}: operand shapes differ: {t} vs {other}")
    if attrs.get("masked") and ts[n] != t.with_dtype(dtypes.bool_):
        raise IRError(f"{name}: the in-range lanes must be a bool tile of {t.shape}")
    if not 0 <= attrs["axis"] < t.rank:
        raise IRError(f"{name}: axis {attrs['axis']} out of range for {t}")
    return t


@_def("scan", regions=1, traits=(MIXES_LANES, ISOLATED), axes=same_axes)
def _scan(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """An inclusive scan of `n` tiles along `axis` (from the last lane with `reverse`) with the
    combine function in its region: 2n scalar arguments (the running values, then the lane's),
    yielding n scalars of the operands' dtypes (tl.associative_scan)."""
    n = attrs["n"]
    _along(ts, attrs, "scan", n)
    for t in ts[:n]:
        storage_only(tile(t, "scan operand").dtype, "associative_scan")
    return [tile(t, "scan operand") for t in ts[:n]]


@_def("fold", regions=1, traits=(MIXES_LANES, ISOLATED), axes=_reduce_axes)
def _fold(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """A reduction of `n` tiles along `axis` by the combine function in its region (as a
    scan's), `keepdims` as `reduce`'s: tl.reduce. Lanes out of range (the `masked` operand)
    take no part; a row with none in range gives `empty` (one Python scalar per tile)."""
    n, axis = attrs["n"], attrs["axis"]
    t = _along(ts, attrs, "fold", n)
    if len(attrs["empty"]) != n:
        raise IRError(f"fold: {len(attrs['empty'])} empty-row values for {n} tiles")
    shape = t.shape[:axis] + ((1,) if attrs["keepdims"] else ()) + t.shape[axis + 1:]
    for u in ts[:n]:
        storage_only(tile(u, "fold operand").dtype, "reduce")
    return [TileType(shape, tile(u, "fold operand").dtype) for u in ts[:n]]


def _sort_axes(attrs: dict, src: TileType, dst: TileType) -> dict[int, int]:
    return {a: a for a in range(src.rank) if a != attrs["axis"] or attrs.get("k") is None}


@_def("sort", traits=(MIXES_LANES,), axes=_sort_axes)
def _sort(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """The lanes of a tile ordered along `axis` (ascending, or `descending`), stable, NaN after
    every number (before, descending); with `k` only the first k; with `positions` also each
    value's lane (int32, from the tile's first lane). Out-of-range lanes (the `masked`
    operand) never come before in-range ones: where fewer than k are in range, the rest are
    position -1 (see tiledsl/lang/scans.py)."""
    t = _along(ts, attrs, "sort", 1)
    storage_only(t.dtype, "sort")
    k = attrs.get("k")
    shape = list(t.shape)
    if k is not None:
        if not isinstance(k, int) or k < 1 or (isinstance(shape[attrs["axis"]], int) and
                                                 k > shape[attrs["axis"]]):
            raise ShapeError(f"sort: k={k} must be in 1..{shape[attrs['axis']]}")
        shape[attrs["axis"]] = k
    out = TileType(tuple(shape), t.dtype)
    return [out, out.with_dtype(dtypes.int32)] if attrs.get("positions") else [out]


@_def("mask", traits=(ELEMENTWISE,))
def _mask(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    t = tile(ts[0], "mask operand")
    axes = tuple(attrs["axes"])
    ranges = list(ts[1:])
    symbolic = [a for a in axes if isinstance(t.shape[a], str)]
    if len(ranges) != len(symbolic):
        raise IRError(f"mask: needs one range per symbolic axis {symbolic}, got {len(ranges)}")
    for a, r in zip(symbolic, ranges):
        if not isinstance(r, RangeType) or r.block != t.shape[a]:
            raise IRError(f"mask: axis {a} of {t} is not cut by {r}")
    return [t]


def _range(t: Type, what: str) -> RangeType:
    if not isinstance(t, RangeType):
        raise IRError(f"{what} must be a range, got {t}")
    return t


@_def("tile.index")
def _tile_index(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 1, "tile.index")
    r = _range(ts[0], "tile.index operand")
    return [TileType((r.block,), dtypes.index_dtype(r.extent))]


@_def("arange", explicit_type=True)
def _arange(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None) -> list[Type]:
    """`start, start + 1, ...` along one axis (`td.arange`): its length is the result's one
    dimension, a static power of two or a block-size symbol."""
    _arity(ts, 0, "arange")
    if res is None or len(res) != 1 or tile(res[0], "arange").rank != 1 \
            or not res[0].dtype.is_int:  # type: ignore[union-attr]
        raise IRError("arange produces one integer vector")
    if not isinstance(attrs.get("start"), int):
        raise IRError("arange needs an int 'start' attribute")
    return list(res)


def _scalar_of_range(name: str) -> Rule:
    def rule(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
        _arity(ts, 1, name)
        r = _range(ts[0], f"{name} operand")
        return [TileType((), dtypes.index_dtype(r.extent))]
    return rule


_def("tile.begin")(_scalar_of_range("tile.begin"))
_def("tile.size")(_scalar_of_range("tile.size"))
_def("tile.id")(_scalar_of_range("tile.id"))  # begin // block: the tile's index along its loop
_def("tile.block_size")(_scalar_of_range("tile.block_size"))  # the range's block size


@_def("tile.shift")
def _tile_shift(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """A range moved by an integer scalar (`x[tm + 1]`): the same lanes, each indexing the
    element `shift` further on; it may index a dimension of any size (lanes outside it are
    masked, as are the lanes past the range's own extent)."""
    _arity(ts, 2, "tile.shift")
    r = _range(ts[0], "tile.shift operand")
    if r.shifted:
        raise IRError("tile.shift: shift the unshifted range (add the offsets)")
    s = ts[1]
    if not (isinstance(s, TileType) and s.shape == () and s.dtype.is_int):
        raise IRError(f"tile.shift: the shift must be an integer scalar, got {s}")
    return [RangeType(r.extent, r.block, r.stop, shifted=True)]


def indexed_shape(tensor: TensorType, indices: Sequence[Type], full: Sequence[int],
                  slices: Sequence[tuple[int, int, int, int]] = (),
                  reading: bool = False) -> tuple[Dim, ...]:
    """The tile shape of `tensor[indices]`: ranges keep a block, scalars drop the dim, `:` keeps it
    (a bounded or stepped slice, see slices.py, keeps its size; `reading`: for a load, whose
    ranges may read offsets, RangeType.indexes)."""
    if len(indices) + len(full) != len(tensor.shape):
        raise IRError(f"{len(indices) + len(full)} indices for a {len(tensor.shape)}-D tensor")
    sliced = slices_of({"slices": slices})
    check_slices(sliced, full, tensor.shape)
    if sliced and any(is_index_tile(i) for i in indices):
        raise ShapeError("an access with both index tiles and bounded slices is not supported "
                         "yet: index the sliced dimension with a shifted tile instead")
    shape: list[Dim] = []
    it = iter(indices)
    for d, extent in enumerate(tensor.shape):
        if d in full:
            shape.append(sliced[d].size if d in sliced else extent)
            continue
        idx = next(it)
        if isinstance(idx, RangeType):
            if not idx.indexes(extent, reading and tensor.dtype.is_int):
                raise ShapeError(f"a range over {idx.extent} indexes dimension {d} of size {extent}")
            shape.append(idx.block)
        elif not (isinstance(idx, TileType) and idx.dtype.is_int):  # a scalar, or a gather's
            raise IRError(f"index {idx} must be a range, an integer scalar or an integer tile")
    if any(is_index_tile(i) for i in indices):  # a gather: see gathers.py
        return layout(tensor, indices, full).shape
    return tuple(shape)


def _tensor(t: Type, what: str) -> TensorType:
    if not isinstance(t, TensorType):
        raise IRError(f"{what} must be a tensor, got {t}")
    return t


def _access_mask(ts: Sequence[Type], attrs: dict, shape: tuple[Dim, ...]) -> None:
    """A masked load's or store's mask (the operand after its indices) covers its tile."""
    if attrs.get("mask") and ts[-1] != TileType(shape, dtypes.bool_):
        raise IRError(f"the mask of an access of shape {shape} has type {ts[-1]}")


@_def("load")
def _load(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    tensor = _tensor(ts[0], "load source")
    indices = ts[1:-1] if attrs.get("mask") else ts[1:]
    shape = indexed_shape(tensor, indices, attrs.get("full", ()), attrs.get("slices", ()),
                          reading=True)
    _access_mask(ts, attrs, shape)
    return [TileType(shape, tensor.dtype)]


@_def("store", pure=False, traits=(WRITES,))
def _store(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    tensor = _tensor(ts[0], "store target")
    indices = ts[1:-2] if attrs.get("mask") else ts[1:-1]
    shape = indexed_shape(tensor, indices, attrs.get("full", ()), attrs.get("slices", ()))
    _access_mask(ts[:-1], attrs, shape)
    value = tile(ts[-1], "stored value")
    if value != TileType(shape, tensor.dtype):
        raise IRError(f"store of {value} into a region of type {TileType(shape, tensor.dtype)}")
    return []


@_def("assert", pure=False, cse=False)
def _assert(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """A runtime check that every lane of a bool tile (or a bool scalar) holds; `msg` says
    what failed (tl.device_assert). Out-of-range lanes are set to true before it (ragged.py)."""
    _arity(ts, 1, "assert")
    if tile(ts[0], "assert condition").dtype != dtypes.bool_:
        raise DTypeError(f"assert: the condition must be bool, got {ts[0]}")
    if not isinstance(attrs.get("msg"), str):
        raise IRError("assert: msg must be a string")
    return []


ATOMICS = ("add", "max", "min", "and", "or", "xor", "xchg", "cas")
BITWISE_ATOMICS = ("and", "or", "xor")  # integer tensors only, as Triton's
# what every backend's atomics take (Triton's)
ATOMIC_DTYPES = ("i32", "i64", "u32", "u64", "f32", "f64")
HALF_ATOMICS = ("f16", "bf16")  # atomic add only: Triton's red.add.f16 (sm_70), .bf16 (sm_90;
# a compare-and-swap loop before)


def atomic_values(kind: str) -> int:
    """How many value operands end an atomic: cas has the compared value, then the new one."""
    return 2 if kind == "cas" else 1


@_def("atomic", pure=False, cse=False, traits=(WRITES,))
def _atomic(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """A read-modify-write of `tensor[indices]` (operands as a store's, then the value, or for
    cas the compared value and the new one), element by element, atomic between programs:
    `kind` add, max, min, and, or, xor (ints only), xchg or cas, with a memory order `sem` and a
    `scope`. Its result is the old values (the access's shape and the tensor's dtype)."""
    tensor = _tensor(ts[0], "atomic target")
    kind = attrs["kind"]
    if kind not in ATOMICS:
        raise IRError(f"unknown atomic {kind!r}")
    n = atomic_values(kind)
    indices = ts[1:len(ts) - n - bool(attrs.get("mask"))]
    shape = indexed_shape(tensor, indices, attrs.get("full", ()), attrs.get("slices", ()))
    _access_mask(ts[:len(ts) - n], attrs, shape)
    if tensor.dtype.short not in ATOMIC_DTYPES and not (
            kind == "add" and tensor.dtype.short in HALF_ATOMICS):
        raise DTypeError(f"atomic {kind} on a {tensor.dtype} tensor: atomics take int32, int64, "
                         "uint32, uint64, float32 and float64 tensors (and add float16 and "
                         "bfloat16 ones)")
    if kind in BITWISE_ATOMICS and not tensor.dtype.is_int:
        raise DTypeError(f"atomic {kind} on a {tensor.dtype} tensor: bitwise atomics take "
                         "integer tensors")
    for v in ts[len(ts) - n:]:
        if tile(v, "atomic value") != TileType(shape, tensor.dtype):
            raise IRError(f"atomic {kind} of {v} into a region of type "
                          f"{TileType(shape, tensor.dtype)}")
    return [TileType(shape, tensor.dtype)]


@_def("tensor.reshape", traits=(VIEW,))
def _tensor_reshape(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """A tensor's elements in row-major order seen with another shape (no copy: a backend
    refuses a layout that cannot be viewed so, as torch's `view`)."""
    _arity(ts, 1, "tensor.reshape")
    t = _tensor(ts[0], "tensor.reshape operand")
    shape = tuple(attrs["shape"])
    if math.prod(shape) != math.prod(t.shape) or not all(isinstance(d, int) and d >= 0
                                                       for d in shape):
        raise ShapeError(f"cannot view {t} as shape {shape}")
    return [TensorType(shape, t.dtype)]


@_def("tensor.permute", traits=(VIEW,))
def _tensor_permute(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """A tensor with its dimensions reordered: result dimension i is operand dimension
    perm[i]."""
    _arity(ts, 1, "tensor.permute")
    t = _tensor(ts[0], "tensor.permute operand")
    perm = tuple(attrs["perm"])
    if sorted(perm) != list(range(len(t.shape))):
        raise ShapeError(f"{perm} is not a permutation of the {len(t.shape)} dimensions of {t}")
    return [TensorType(tuple(t.shape[p] for p in perm), t.dtype)]


@_def("tensor.expand", traits=(VIEW,))
def _tensor_expand(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """A tensor broadcast to `shape` (torch's `expand`): its dimensions of 1, and new leading
    ones, repeat its elements (stride 0; no copy, and nothing may be stored through it)."""
    _arity(ts, 1, "tensor.expand")
    t = _tensor(ts[0], "tensor.expand operand")
    shape = tuple(attrs["shape"])
    lead = len(shape) - len(t.shape)
    if lead < 0 or any(n not in (1, m) for n, m in zip(t.shape, shape[lead:])) or \
            not all(isinstance(d, int) and d >= 1 for d in shape):
        raise ShapeError(f"cannot expand {t} to shape {shape}")
    return [TensorType(shape, t.dtype)]


@_def("tensor.bitcast", traits=(VIEW,))
def _tensor_bitcast(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """A tensor's bits read as another dtype of the same width (torch's `x.view(dtype)`: vLLM's
    uint8 KV cache seen as float8); no copy."""
    _arity(ts, 1, "tensor.bitcast")
    t = _tensor(ts[0], "tensor.bitcast operand")
    d = dtypes.BY_SHORT.get(attrs["dtype"])
    if d is None or d.bits != t.dtype.bits or d.is_bool != t.dtype.is_bool:
        raise DTypeError(f"tensor.bitcast: {t} cannot be read as {attrs['dtype']}")
    return [TensorType(t.shape, d)]


@_def("tensor.memory", traits=(VIEW,))
def _tensor_memory(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """An argument laid out with `strides` (elements, none negative) seen as its memory from
    its first element to its last: a 1-D tensor whose element i lies i elements on (torch's
    `x.as_strided((size,), (1,))`). Triton's pointer arithmetic on an argument that is not
    row-major (a slice of a fused qkv, a transpose) addresses this memory."""
    _arity(ts, 1, "tensor.memory")
    t = _tensor(ts[0], "tensor.memory operand")
    strides = tuple(attrs["strides"])
    if len(strides) != len(t.shape) or not all(isinstance(s, int) and s >= 0 for s in strides):
        raise ShapeError(f"tensor.memory: strides {strides} do not lay out {t}")
    size = 1 + sum((n - 1) * s for n, s in zip(t.shape, strides))
    return [TensorType((size,), t.dtype)]


@_def("tensor.slice", traits=(VIEW,))
def _tensor_slice(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    """Part of a tensor, `x[:, :-1, ::2]` in host code: its `slices` (ir/slices.py) pick
    `size` elements from `start` in steps of `step` along their dimensions (no copy)."""
    _arity(ts, 1, "tensor.slice")
    t = _tensor(ts[0], "tensor.slice operand")
    parts = slices_of(attrs)
    check_slices(parts, tuple(parts), t.shape)
    return [TensorType(tuple(parts[d].size if d in parts else n for d, n in enumerate(t.shape)),
                       t.dtype)]


@_def("tensor.empty", explicit_type=True, cse=False)
def _tensor_empty(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 0, "tensor.empty")
    if res is None or len(res) != 1:
        raise IRError("tensor.empty produces one tensor")
    return [_tensor(res[0], "tensor.empty result")]


@_def("tensor.full", explicit_type=True, cse=False)
def _tensor_full(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 1, "tensor.full")
    if res is None or len(res) != 1:
        raise IRError("tensor.full produces one tensor")
    out = _tensor(res[0], "tensor.full result")
    if tile(ts[0], "tensor.full value") != TileType((), out.dtype):
        raise IRError("tensor.full takes a scalar of the tensor's dtype")
    return [out]


# Host random tensors (`torch.randint(2**32, (m,))` in a wrapper: flash-attn's dropout seeds),
# drawn on every call from the generator of the arrays' library (torch's `random_`,
# `uniform_`, `normal_`, which torch.randint / rand / randn call). attrs: kind, and randint's
# [low, high); "pyrandint" is Python's `random.randrange(low, high)` (attorch's dropout seed,
# `randint(0, 65535)`), drawn from Python's generator, so `random.seed` holds.
HOST_RANDOM = ("randint", "rand", "randn", "pyrandint")
ALLOCATIONS = ("tensor.empty", "tensor.full", "tensor.random")  # host ops making a tensor


@_def("tensor.random", explicit_type=True, cse=False)
def _tensor_random(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None
                   ) -> list[Type]:
    _arity(ts, 0, "tensor.random")
    if res is None or len(res) != 1:
        raise IRError("tensor.random produces one tensor")
    out = _tensor(res[0], "tensor.random result")
    kind = attrs.get("kind")
    if kind not in HOST_RANDOM:
        raise IRError(f"tensor.random: kind {kind!r} is not one of {HOST_RANDOM}")
    if kind in ("randint", "pyrandint"):
        low, high = attrs.get("low"), attrs.get("high")
        if not (isinstance(low, int) and isinstance(high, int) and low < high):
            raise IRError(f"tensor.random randint takes int bounds low < high, got {low}, "
                          f"{high}")
    elif not out.dtype.is_float:
        raise IRError(f"tensor.random {kind} makes floats, not {out.dtype.name}")
    return [out]


@_def("grid", pure=False, regions=1)
def _grid(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    _arity(ts, 0, "grid")
    return []


@_def("for", explicit_type=True, pure=False, regions=1)
def _for(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None) -> list[Type]:
    """A sequential loop over the tiles of a range (its region's first argument), or with
    `stride` (and `ranges` = k) over the tiles of k ranges numbered row-major, from the first
    operand's tile in steps of `stride` (a persistent loop); the values it carries follow."""
    bounds = bool(attrs.get("stop")) + bool(attrs.get("start"))  # runtime stop, start lead
    if attrs.get("start") and not attrs.get("stop"):
        raise IRError("for: a runtime start needs a runtime stop")
    if "stride" in attrs:
        if bounds or not (isinstance(attrs["stride"], int) and attrs["stride"] >= 1):
            raise IRError("for: a stride is a positive int, without a runtime stop or start")
        bounds = 1  # the first tile leads
    elif attrs.get("ranges", 1) != 1:
        raise IRError("for: only a strided loop iterates several ranges")
    for t in ts[:bounds]:
        if not (isinstance(t, TileType) and t.shape == () and t.dtype.is_int):
            raise IRError("for: a runtime stop, start or first tile must be an integer scalar")
    if len(ts) < bounds:
        raise IRError("for: missing its runtime stop or start")
    ts = ts[bounds:]
    if res is None or list(res) != list(ts):
        raise IRError("for: results must have the types of the initial values")
    return list(res)


@_def("if", explicit_type=True, pure=False, regions=2)
def _if(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None) -> list[Type]:
    """A conditional region (MLIR's scf.if): region 0 runs where the bool scalar condition
    holds, region 1 (the else branch) where it does not; each ends in a `yield` of the values
    the op results in."""
    _arity(ts, 1, "if")
    c = ts[0]
    if not (isinstance(c, TileType) and c.shape == () and c.dtype.is_bool):
        raise IRError(f"if: the condition must be a bool scalar, got {c}")
    return list(res or [])


@_def("while", explicit_type=True, pure=False, regions=1)
def _while(ts: Sequence[Type], attrs: dict, res: Sequence[Type] | None) -> list[Type]:
    """A loop on a runtime condition: the first operand (a bool scalar) says whether the first
    trip runs, the others are the carried values' initial values; the region takes the carried
    values and yields whether to run another trip, then their new values:
    `go, v = cond, init; while go: go, v = body(v)`. The results are the last values."""
    if not ts or not (isinstance(ts[0], TileType) and ts[0].shape == () and ts[0].dtype.is_bool):
        raise IRError("while: the first operand must be a bool scalar (whether the first trip "
                      "runs)")
    if res is None or list(res) != list(ts[1:]):
        raise IRError("while: results must have the types of the initial values")
    return list(res)


@_def("yield", pure=False, terminator=True)
def _yield(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    return []


@_def("return", pure=False, terminator=True)
def _return(ts: Sequence[Type], attrs: dict, _res: Sequence[Type] | None) -> list[Type]:
    for t in ts:
        _tensor(t, "returned value")
    return []


def result_types(name: str, operand_types: Sequence[Type], attrs: dict,
                 declared: Sequence[Type] | None = None) -> list[Type]:
    """Apply `name`'s rule; raises for unknown ops and ill-typed uses."""
    opdef = OPS.get(name)
    if opdef is None:
        raise IRError(f"unknown op '{name}'")
    return opdef.rule(operand_types, attrs, declared if opdef.explicit_type else None)


def attr_key(attrs: dict[str, Any]) -> tuple:
    """A hashable, order-independent form of an attribute dict (for CSE)."""
    return tuple(sorted((k, repr(v)) for k, v in attrs.items()))
