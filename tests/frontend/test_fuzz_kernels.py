"""A kernel fuzzer: small random tile kernels drawn from a grammar, run on the NumPy backend and
the Triton interpreter, each checked element by element against a float64 reference.

The grammar (`Program`): one or two grids (a second one reads what the first stored, shifted or
gathered), each a 2-D tile grid, a `td.grid` of rows over column tiles, a persistent loop
(`td.tile(m, n)[p::P]`), a tile of whole rows (`x[tm, :]`) or a row tile walking column tiles
with carried values; each computes an expression (arithmetic, `td.where`, casts through
float16/bfloat16/float64/int32, math functions, divisions, clamps) of loaded tiles, shifted
tiles (`x[tm + 1, tn]`), gathers through an index tile (`x[idx[tm], tn]`), masked loads
(`td.load(x, [i, j], mask=..., other=...)`), a broadcast row vector and a runtime scalar
argument, and stores it, its row reductions, or its scans (`td.cumsum`,
`td.associative_scan`), or writes it in place into `x`. Inputs have ragged shapes (primes and
1), several dtypes and non-contiguous layouts (transposed, strided, offset, reversed), and each
backend runs a config drawn from its own space. Integer kernels (wrapping arithmetic, `//`,
`%`, bit operations and shifts) must match NumPy exactly.

For floats, the reference propagates a per-element bound on the rounding error with the
float64 values (each op's unit roundoff in the kernel's dtype, math functions' few ulps, sums'
n * u), so a failure is a real disagreement, not a tolerance: the message holds the kernel's
source, its inputs' layouts and the configs. Set TILEDSL_FUZZ_SHRINK=1 to shrink a failure to
a smaller kernel (slow: every step traces and runs a new one).

    python -m pytest -q tests/frontend/test_fuzz_kernels.py                             # CI: ~10 s
    TILEDSL_FUZZ_EXAMPLES=500 python -m pytest -q tests/frontend/test_fuzz_kernels.py   # ~3 min, random
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from fuzz_settings import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

# ---------------------------------------------------------------------------------------------
# The grammar
# ---------------------------------------------------------------------------------------------
# Leaves: "x" the stage's main operand, "y" a second input, "s" the main source shifted, "g" it
# gathered through the index tensor `idx`, "w" a row vector broadcast over rows, "m" a masked
# load of the source (`td.load(src, [i, j], mask=y > 0, other=0.5)`), "a" the runtime scalar
# argument `alpha`; and constants.
LEAVES = ("x", "y", "s", "g", "w", "m", "a")
UNARY = ("abs", "neg", "tanh", "exp", "sigmoid", "sin", "cos", "erf", "sqrt1", "log1", "clamp",
         "f16", "bf16", "f64")
LEAF_ONLY = ("floor4", "int4")  # discontinuous: only on exact values (an input leaf)
BINARY = ("+", "-", "*", "maximum", "minimum", "div", "where")


@dataclass(frozen=True)
class Leaf:
    name: str


@dataclass(frozen=True)
class Const:
    value: float


@dataclass(frozen=True)
class Unary:
    op: str
    arg: Any


@dataclass(frozen=True)
class Binary:
    op: str
    lhs: Any
    rhs: Any
    cond: tuple[str, float] = ("y", 0.0)  # where: `cond[0]v > cond[1]`


FORMS = ("map2d", "grid_rows", "row_full", "row_loop", "persistent")
KINDS = {"map2d": ("map",), "grid_rows": ("map",), "row_full": ("map", "reduce", "scan"),
         "row_loop": ("reduce", "scan"), "persistent": ("map",)}
REDUCES = ("sum", "max", "min", "mean")
SCANS = ("cumsum", "scan_add", "scan_max", "scan_min")


@dataclass(frozen=True)
class Stage:
    form: str
    kind: str  # "map", "reduce" or "scan"
    expr: Any
    op: str | None  # the reduction or scan
    shift: tuple[int, int]  # (axis, amount) of the "s" leaf


@dataclass(frozen=True)
class Program:
    """One stage writing `out` (or `x` in place), or two: the first stores `tmp`, which the
    second reads as its main operand (and shifts and gathers)."""

    stages: tuple[Stage, ...]
    inplace: bool
    dtype: str
    m: int
    n: int
    layouts: tuple[str, str, str]  # of x, y, w
    seed: int
    alpha: float = 1.5  # the runtime scalar argument
    programs: int = 2  # of a persistent loop (`td.grid(P)` over `td.tile(m, n)[p::P]`)
    shifts_read_x: bool = True  # stage 1's "s" and "g" leaves read x (else y)
    notes: list[str] = field(default_factory=list, compare=False, hash=False)


INT_DTYPES = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
              "uint8": np.uint8, "uint32": np.uint32}
DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
          "bfloat16": ml_dtypes.bfloat16, **INT_DTYPES}
TD_DTYPES = {name: f"td.{name}" for name in DTYPES}
RAGGED = (1, 2, 3, 5, 7, 11, 13, 17, 19, 31, 37)


def leaves_of(e: Any) -> set[str]:
    if isinstance(e, Leaf):
        return {e.name}
    if isinstance(e, Unary):
        return leaves_of(e.arg)
    if isinstance(e, Binary):
        extra = {e.cond[0]} if e.op == "where" else set()
        return leaves_of(e.lhs) | leaves_of(e.rhs) | extra
    return set()


def expressions(depth: int, exact: tuple[str, ...], consts: st.SearchStrategy[float]
                ) -> st.SearchStrategy[Any]:
    """Expression trees of depth <= `depth`; `exact` are the leaves that hold exact inputs (the
    discontinuous ops and where's conditions read only those)."""
    leaf = st.sampled_from(LEAVES).map(Leaf)
    base = st.one_of(leaf, leaf, consts.map(Const),
                     st.builds(Unary, st.sampled_from(LEAF_ONLY), st.sampled_from(exact).map(Leaf)))
    if depth == 0:
        return base
    sub = expressions(depth - 1, exact, consts)
    conds = st.tuples(st.sampled_from(exact), st.sampled_from([-0.5, 0.0, 0.5]))
    return st.one_of(base, st.builds(Unary, st.sampled_from(UNARY), sub),
                     st.builds(Binary, st.sampled_from(BINARY), sub, sub, conds))


def tiles_only(e: Any) -> Any:
    """`e` without the casts and erfs of constants (a leafless subtree): `.astype` needs a tile,
    and item 14 of issue 29 (`td.erf` of a constant crashes fold-constants) is fixed apart."""
    if isinstance(e, Unary):
        arg = tiles_only(e.arg)
        if e.op in ("f16", "bf16", "f64", "erf") and not leaves_of(arg):
            return arg
        return Unary(e.op, arg)
    if isinstance(e, Binary):
        return Binary(e.op, tiles_only(e.lhs), tiles_only(e.rhs), e.cond)
    return e


def rooted(e: Any) -> Any:
    """An expression that reads at least one whole tile (a constant alone has no tile shape,
    the row vector w has one row, alpha none)."""
    return e if leaves_of(e) & {"x", "y", "s", "g", "m"} else Binary("+", Leaf("x"), e)


@st.composite
def stages(draw: Any, dtype: str, exact: tuple[str, ...], forms: tuple[str, ...] = FORMS,
           kinds: tuple[str, ...] = ("map", "reduce", "scan")) -> Stage:
    kind = draw(st.sampled_from(kinds))
    form = draw(st.sampled_from([f for f in forms if kind in KINDS[f]]))
    quarter = st.integers(-12, 12).map(lambda i: i / 4)  # exact in every float dtype
    consts = quarter if dtype in ("float16", "bfloat16") else st.one_of(
        quarter, st.floats(-3.0, 3.0, width=32).filter(lambda v: abs(v) >= 0.01))
    depth = 2 if dtype in ("float16", "bfloat16") else 3  # 16-bit: no overflow
    expr = rooted(tiles_only(draw(expressions(depth, exact, consts))))
    op = draw(st.sampled_from(REDUCES if kind == "reduce" else SCANS)) if kind != "map" else None
    if form in ("map2d", "row_loop", "persistent"):
        axis = draw(st.sampled_from([0, 1]))
    else:
        axis = 1 if form == "grid_rows" else 0
    shift = (axis, draw(st.sampled_from([-2, -1, 1, 2])))
    return Stage(form, kind, expr, op, shift)


@st.composite
def programs(draw: Any) -> Program:
    dtype = draw(st.sampled_from(["float32", "float32", "float64", "float16", "bfloat16"]))
    dim = st.one_of(st.sampled_from(RAGGED), st.integers(1, 24))
    m, n = draw(dim), draw(dim)
    shape = draw(st.sampled_from(["out", "out", "inplace", "two", "two"]))
    layout = st.sampled_from(["c", "T", "strided", "offset", "reversed"])
    lx, ly = draw(layout), draw(layout)
    lw = draw(st.sampled_from(["c", "strided", "reversed"]))
    seed = draw(st.integers(0, 2**16))
    more = {"alpha": draw(st.integers(-12, 12)) / 4, "programs": draw(st.integers(1, 4))}
    if shape == "inplace":
        # Item 1 of issue 29 (races between programs of one grid): an in-place kernel reads x
        # only where it writes it; its shifted and gathered leaves read y.
        # Item 2 (writes into a negative-stride view are lost on triton-interpret): x is never
        # a reversed view when written in place.
        if lx == "reversed":
            lx = "c"
        st1 = draw(stages(dtype, ("x", "y", "w"), ("map2d", "grid_rows", "row_full",
                                                   "persistent"), ("map",)))
        return Program((st1,), True, dtype, m, n, (lx, ly, lw), seed, **more,
                       shifts_read_x=False)
    if shape == "out":
        st1 = draw(stages(dtype, ("x", "y", "s", "g", "w")))
        return Program((st1,), False, dtype, m, n, (lx, ly, lw), seed, **more)
    first = draw(stages(dtype, ("x", "y", "s", "g", "w"), ("map2d", "grid_rows", "persistent"),
                        ("map",)))
    second = draw(stages(dtype, ("y", "w")))  # reads tmp (inexact) as x, s and g
    if draw(st.booleans()):  # the first grid writes x in place, the second reads it back
        first = draw(stages(dtype, ("x", "y", "w"), ("map2d", "grid_rows", "persistent"),
                            ("map",)))  # (items 1 and 2 as above)
        return Program((first, second), True, dtype, m, n,
                       ("c" if lx == "reversed" else lx, ly, lw), seed, **more,
                       shifts_read_x=False)
    return Program((first, second), False, dtype, m, n, (lx, ly, lw), seed, **more)


# Integer kernels: exact, so both backends must give NumPy's values bit for bit. Divisors are
# odd (`b | 1`, never 0) and shift counts in [0, 7].
INT_UNARY = ("abs", "neg", "invert")
INT_BINARY = ("+", "-", "*", "maximum", "minimum", "where", "floordiv", "mod", "and", "or",
              "xor", "shl", "shr")
INT_RENDER = {"floordiv": "({a} // ({b} | 1))", "mod": "({a} % ({b} | 1))",
              "and": "({a} & {b})", "or": "({a} | {b})", "xor": "({a} ^ {b})",
              "shl": "({a} << ({b} & 7))", "shr": "({a} >> ({b} & 7))"}
INT_LEAVES = ("x", "y", "s", "g", "w", "m")


def int_expressions(depth: int, unsigned: bool) -> st.SearchStrategy[Any]:
    leaf = st.sampled_from(INT_LEAVES).map(Leaf)
    consts = st.integers(0 if unsigned else -8, 8).map(Const)
    if depth == 0:
        return st.one_of(leaf, leaf, consts)
    sub = int_expressions(depth - 1, unsigned)
    conds = st.tuples(st.sampled_from(["x", "y"]), st.sampled_from([0, 3]))
    return st.one_of(leaf, consts, st.builds(Unary, st.sampled_from(INT_UNARY), sub),
                     st.builds(Binary, st.sampled_from(INT_BINARY), sub, sub, conds))


@st.composite
def int_programs(draw: Any) -> Program:
    dtype = draw(st.sampled_from(sorted(INT_DTYPES)))
    dim = st.one_of(st.sampled_from(RAGGED), st.integers(1, 24))
    kind = draw(st.sampled_from(["map", "reduce", "scan"]))
    form = draw(st.sampled_from({"map": ["map2d", "grid_rows", "persistent", "row_full"],
                                 "reduce": ["row_full", "row_loop"],
                                 "scan": ["row_full", "row_loop"]}[kind]))
    op = {"map": None, "reduce": draw(st.sampled_from(["sum", "max", "min"])),
          "scan": draw(st.sampled_from(["cumsum", "scan_max", "scan_min"]))}[kind]
    if form == "row_loop":  # its carries start at 0 (and +-inf for max and min: floats)
        op = "sum" if kind == "reduce" else "cumsum"
    expr = rooted(int_fold(draw(int_expressions(3, dtype.startswith("u"))), dtype))
    axis = draw(st.sampled_from([0, 1])) if form in ("map2d", "row_loop", "persistent") else \
        (1 if form == "grid_rows" else 0)
    stage = Stage(form, kind, expr, op, (axis, draw(st.sampled_from([-2, -1, 1, 2]))))
    layout = st.sampled_from(["c", "T", "strided", "offset", "reversed"])
    return Program((stage,), False, dtype, draw(dim), draw(dim),
                   (draw(layout), draw(layout), draw(st.sampled_from(["c", "reversed"]))),
                   draw(st.integers(0, 2**16)), programs=draw(st.integers(1, 4)))


def int_fold(e: Any, dtype: str) -> Any:
    """Constant subtrees as one constant in the dtype's range (a td function of Python ints is
    an int64, as NumPy's `np.minimum(-7, 2)`, where this model computes in the tile's dtype)."""
    if isinstance(e, Unary):
        e = Unary(e.op, int_fold(e.arg, dtype))
    elif isinstance(e, Binary):
        e = Binary(e.op, int_fold(e.lhs, dtype), int_fold(e.rhs, dtype), e.cond)
    constant = isinstance(e, Unary) and isinstance(e.arg, Const) or isinstance(e, Binary) and \
        e.op != "where" and isinstance(e.lhs, Const) and isinstance(e.rhs, Const)
    if constant:
        with np.errstate(all="ignore"):
            value = int(int_evaluate(e, {}, np.int64))
        info = np.iinfo(INT_DTYPES[dtype])
        return Const(value if info.min <= value <= info.max else value % 8)
    return e


def int_evaluate(e: Any, env: dict[str, np.ndarray], dtype: Any) -> np.ndarray:
    """The expression in NumPy, in `dtype` (wrapping as NumPy wraps)."""
    if isinstance(e, Leaf):
        return env[e.name]
    if isinstance(e, Const):
        return np.asarray(e.value).astype(dtype)
    if isinstance(e, Unary):
        a = int_evaluate(e.arg, env, dtype)
        return {"abs": np.abs, "neg": np.negative, "invert": np.invert}[e.op](a)
    a, b = int_evaluate(e.lhs, env, dtype), int_evaluate(e.rhs, env, dtype)
    if e.op == "where":
        return np.where(env[e.cond[0]] > e.cond[1], a, b).astype(dtype)
    one, seven = np.asarray(1, dtype), np.asarray(7, dtype)
    f = {"+": np.add, "-": np.subtract, "*": np.multiply, "maximum": np.maximum,
         "minimum": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
         "xor": np.bitwise_xor,
         "floordiv": lambda a, b: np.floor_divide(a, b | one),
         "mod": lambda a, b: np.remainder(a, b | one),
         "shl": lambda a, b: np.left_shift(a, b & seven),
         "shr": lambda a, b: np.right_shift(a, b & seven)}[e.op]
    return f(a, b).astype(dtype)


def int_expected(p: Program, x: np.ndarray, y: np.ndarray, w: np.ndarray,
                 idx: np.ndarray) -> np.ndarray:
    stage, dtype = p.stages[0], INT_DTYPES[p.dtype]
    axis, k = stage.shift
    env = {"x": x, "y": y, "w": w[None, :], "s": shifted(x, axis, k), "g": x[idx],
           "m": np.where(y > 0, x, np.asarray(3).astype(dtype))}
    with np.errstate(all="ignore"):
        v = np.broadcast_to(int_evaluate(stage.expr, env, dtype), x.shape)
        if stage.op in ("sum", "cumsum"):
            wide = np.uint64 if p.dtype.startswith("u") else np.int64
            return getattr(v.astype(wide), stage.op)(axis=1)
        if stage.op in ("max", "min"):
            return getattr(v, stage.op)(axis=1)
        if stage.op in ("scan_max", "scan_min"):
            return (np.maximum if stage.op == "scan_max" else np.minimum).accumulate(v, axis=1)
        return v


# ---------------------------------------------------------------------------------------------
# Rendering: Python source of one tile kernel
# ---------------------------------------------------------------------------------------------
def render(e: Any, dt: str) -> str:
    if isinstance(e, Leaf):
        return "alpha" if e.name == "a" else f"{e.name}v"
    if isinstance(e, Const):
        return f"({e.value!r})"
    if isinstance(e, Unary):
        a = render(e.arg, dt)
        return {
            "abs": f"td.abs({a})", "neg": f"(-{a})", "tanh": f"td.tanh({a})",
            "exp": f"td.exp(td.tanh({a}))", "sigmoid": f"td.sigmoid({a})", "sin": f"td.sin({a})",
            "cos": f"td.cos({a})", "erf": f"td.erf({a})", "sqrt1": f"td.sqrt(td.abs({a}) + 1.0)",
            "log1": f"td.log(td.abs({a}) + 1.0)", "clamp": f"td.clamp({a}, -1.0, 1.0)",
            "f16": f"{a}.astype(td.float16).astype({dt})",
            "bf16": f"{a}.astype(td.bfloat16).astype({dt})",
            "f64": f"{a}.astype(td.float64).astype({dt})",
            "floor4": f"td.floor({a} * 4.0)", "invert": f"(~{a})",
            "int4": f"({a} * 4.0).astype(td.int32).astype({dt})",
        }[e.op]
    a, b = render(e.lhs, dt), render(e.rhs, dt)
    if e.op in INT_RENDER:
        return INT_RENDER[e.op].format(a=a, b=b)
    if e.op in ("maximum", "minimum"):
        return f"td.{e.op}({a}, {b})"
    if e.op == "div":
        return f"({a} / (td.abs({b}) + 1.0))"
    if e.op == "where":  # of two numbers: int64 or float64 as NumPy's, cast to the model's dtype
        cast = f".astype({dt})" if isinstance(e.lhs, Const) and isinstance(e.rhs, Const) else ""
        return f"td.where({e.cond[0]}v > {e.cond[1]!r}, {a}, {b}){cast}"
    return f"({a} {e.op} {b})"


def leaf_loads(stage: Stage, src: str, main: str, tm: str, tn: str | None, other: str = "0.5"
               ) -> dict[str, str]:
    """The source of each leaf's load at row index `tm` and column index `tn` (None: `:`)."""
    cols = tn if tn is not None else ":"
    axis, k = stage.shift
    sk = f" + {k}" if k > 0 else f" - {-k}"
    shifted = f"{src}[{tm}{sk}, {cols}]" if axis == 0 else f"{src}[{tm}, {tn}{sk}]"
    listed = tn if tn is not None else "slice(None)"
    return {"x": f"{main}[{tm}, {cols}]", "y": f"y[{tm}, {cols}]", "s": shifted,
            "g": f"{src}[idx[{tm}], {cols}]",
            "m": f"td.load({src}, [{tm}, {listed}], mask=y[{tm}, {cols}] > 0, other={other})",
            "w": f"w[{tn}]" if stage.form == "grid_rows" else
            (f"w[{tn}][None, :]" if tn is not None else "w[:][None, :]")}


SCAN_CODE = {"cumsum": "td.cumsum({v}, axis=1)", "scan_add": "td.associative_scan({v}, 1, add)",
             "scan_max": "td.associative_scan({v}, 1, biggest)",
             "scan_min": "td.associative_scan({v}, 1, smallest)"}


def render_stage(stage: Stage, dt: str, src: str, main: str, dest: str, acc: str) -> list[str]:
    """Lines (at kernel-body indentation) of one grid storing into `dest`; casts go back to
    `dt`, and carried values have dtype `acc`."""
    used = leaves_of(stage.expr)
    expr = render(stage.expr, dt)

    def loads(tm: str, tn: str | None, indent: str) -> list[str]:
        code = leaf_loads(stage, src, main, tm, tn, "3" if "int" in dt else "0.5")
        return [f"{indent}{name}v = {code[name]}" for name in LEAVES if name in used and
                name != "a"]

    if stage.form == "persistent":
        return ["for p in td.grid(programs):", "    for tm, tn in td.tile(m, n)[p::programs]:",
                *loads("tm", "tn", "        "), f"        {dest}[tm, tn] = {expr}"]
    if stage.form == "map2d":
        return ["for tm, tn in td.tile(m, n):", *loads("tm", "tn", "    "),
                f"    {dest}[tm, tn] = {expr}"]
    if stage.form == "grid_rows":
        return ["for i in td.grid(m):", "    for tn in td.tile(n):", *loads("i", "tn", "        "),
                f"        {dest}[i, tn] = {expr}"]
    if stage.form == "row_full":
        body = ["for tm in td.tile(m):", *loads("tm", None, "    ")]
        if stage.kind == "map":
            return body + [f"    {dest}[tm, :] = {expr}"]
        if stage.kind == "reduce":
            return body + [f"    {dest}[tm] = td.{stage.op}({expr}, axis=1)"]
        return body + [f"    {dest}[tm, :] = " + SCAN_CODE[stage.op].format(v=expr)]
    # row_loop: a row tile walks the column tiles with a carried value
    lines = ["for tm in td.tile(m):"]
    if stage.kind == "reduce":
        init, combine = {
            "sum": ("td.zeros((tm,), dtype={acc})", "acc + td.sum(v, axis=1)"),
            "mean": ("td.zeros((tm,), dtype={acc})", "acc + td.sum(v, axis=1)"),
            "max": ('td.full((tm,), -float("inf"), dtype={acc})',
                    "td.maximum(acc, td.max(v, axis=1))"),
            "min": ('td.full((tm,), float("inf"), dtype={acc})',
                    "td.minimum(acc, td.min(v, axis=1))"),
        }[stage.op]
        init = init.format(acc=acc)
        result = "acc / n" if stage.op == "mean" else "acc"
        return lines + [f"    acc = {init}", "    for tn in td.tile(n):",
                        *loads("tm", "tn", "        "), f"        v = {expr}",
                        f"        acc = {combine}", f"    {dest}[tm] = {result}"]
    scan = SCAN_CODE[stage.op].format(v="v")
    if stage.op in ("cumsum", "scan_add"):
        init = f"td.zeros((tm,), dtype={acc})"
        out, carry = f"carry[:, None] + {scan}", "carry + td.sum(v, axis=1)"
    else:
        fn = "maximum" if stage.op == "scan_max" else "minimum"
        inf = '-float("inf")' if fn == "maximum" else 'float("inf")'
        init = f"td.full((tm,), {inf}, dtype={acc})"
        out, carry = f"td.{fn}(carry[:, None], {scan})", f"td.{fn}(carry, td.{fn[:3]}(v, axis=1))"
    return lines + [f"    carry = {init}", "    for tn in td.tile(n):",
                    *loads("tm", "tn", "        "), f"        v = {expr}",
                    f"        {dest}[tm, tn] = {out}", f"        carry = {carry}"]


def out_dtype(p: Program) -> str:
    """x's dtype, or that of the sums of an integer kernel (td.sum's: no wrapping)."""
    if p.dtype in INT_DTYPES and p.stages[0].op in ("sum", "cumsum"):
        return sum_dtype(p.dtype)
    return "x.dtype"


def sum_dtype(dtype: str) -> str:
    """What td.sum gives: float32 for 16-bit floats, as NumPy's sum for ints (int64, uint64)."""
    if dtype in INT_DTYPES:
        return "td.uint64" if dtype.startswith("u") else "td.int64"
    return "td.float64" if dtype == "float64" else "td.float32"


def out_shape(stage: Stage) -> str:
    return "(m,)" if stage.kind == "reduce" else "(m, n)"


def source(p: Program) -> str:
    dt = TD_DTYPES[p.dtype]
    acc = sum_dtype(p.dtype)
    body = ["m, n = x.shape", f"programs = {p.programs}"]
    src1 = "x" if p.shifts_read_x else "y"
    if p.inplace and len(p.stages) == 1:
        body += render_stage(p.stages[0], dt, src1, "x", "x", acc)
    elif p.inplace:  # x written in place by the first grid, read back by the second
        body += render_stage(p.stages[0], dt, src1, "x", "x", acc)
        body += [f"out = td.empty({out_shape(p.stages[1])}, dtype=x.dtype)"]
        body += render_stage(p.stages[1], dt, "x", "x", "out", acc)
    elif len(p.stages) == 1:
        body += [f"out = td.empty({out_shape(p.stages[0])}, dtype={out_dtype(p)})"]
        body += render_stage(p.stages[0], dt, src1, "x", "out", acc)
    else:
        body += ["tmp = td.empty((m, n), dtype=td.float32)"]
        body += render_stage(p.stages[0], dt, src1, "x", "tmp", acc)
        body += [f"out = td.empty({out_shape(p.stages[1])}, dtype=x.dtype)"]
        body += render_stage(p.stages[1], "td.float32", "tmp", "tmp", "out", acc)
    body += ["return None" if p.inplace and len(p.stages) == 1 else "return out"]
    return "\n".join([
        "import tiledsl as td", "", "",
        "def add(a, b):", "    return a + b", "", "",
        "def biggest(a, b):", "    return td.maximum(a, b)", "", "",
        "def smallest(a, b):", "    return td.minimum(a, b)", "", "",
        "@td.tile_kernel", "def k(x, y, w, idx, alpha):", *("    " + line for line in body), ""])


# ---------------------------------------------------------------------------------------------
# The reference: float64 values with a bound on the kernel's rounding error
# ---------------------------------------------------------------------------------------------
UNIT = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
TINY = {"float64": 2.0**-1074, "float32": 2.0**-149, "float16": 2.0**-25, "bfloat16": 2.0**-133}


@dataclass
class Approx:
    """Float64 values and a bound on |kernel's value - value|, element by element."""

    v: np.ndarray
    e: np.ndarray


def rounded(a: Approx, dtype: str) -> Approx:
    """`a` rounded once to `dtype` (a store or a cast)."""
    return Approx(a.v, a.e + UNIT[dtype] * (np.abs(a.v) + a.e) + TINY[dtype])


def lipschitz(a: Approx, value: np.ndarray, slope: float, dtype: str) -> Approx:
    """A math function of slope <= `slope`, correct to a few ulps of float32 (16-bit floats
    compute in float32), rounded to `dtype`."""
    ulps = 4 * max(UNIT[dtype] if dtype == "float64" else UNIT["float32"], 2.0**-53)
    return rounded(Approx(value, slope * a.e + ulps * (np.abs(value) + 1e-30)), dtype)


def evaluate(e: Any, env: dict[str, Approx], dtype: str) -> Approx:
    if isinstance(e, Leaf):
        return env[e.name]
    if isinstance(e, Const):
        return Approx(np.asarray(e.value), np.zeros(()))
    if isinstance(e, Unary):
        return unary(e.op, evaluate(e.arg, env, dtype), dtype)
    a, b = evaluate(e.lhs, env, dtype), evaluate(e.rhs, env, dtype)
    if e.op == "where":
        c = env[e.cond[0]].v > e.cond[1]
        return Approx(np.where(c, a.v, b.v), np.where(c, a.e, b.e))
    if e.op in ("maximum", "minimum"):
        return Approx(getattr(np, e.op)(a.v, b.v), np.maximum(a.e, b.e))
    if e.op == "div":  # a / (|b| + 1): the denominator is >= 1
        d = rounded(Approx(np.abs(b.v) + 1.0, b.e), dtype)
        q = a.v / d.v
        return rounded(Approx(q, (a.e + np.abs(q) * d.e) / np.maximum(d.v - d.e, 0.5)), dtype)
    if e.op == "*":
        return rounded(Approx(a.v * b.v, np.abs(a.v) * b.e + np.abs(b.v) * a.e + a.e * b.e),
                       dtype)
    value = a.v + b.v if e.op == "+" else a.v - b.v
    return rounded(Approx(value, a.e + b.e), dtype)


def unary(op: str, a: Approx, dtype: str) -> Approx:
    if op in ("abs", "neg", "clamp"):
        f = {"abs": np.abs, "neg": np.negative, "clamp": lambda v: np.clip(v, -1.0, 1.0)}[op]
        return Approx(f(a.v), a.e)
    if op in ("floor4", "int4"):  # of an exact leaf only: exact
        return Approx((np.floor if op == "floor4" else np.trunc)(a.v * 4.0), a.e)
    if op in ("f16", "bf16", "f64"):
        return rounded(rounded(a, {"f16": "float16", "bf16": "bfloat16", "f64": "float64"}[op]),
                       dtype)
    if op == "exp":  # exp(tanh(a))
        t = lipschitz(a, np.tanh(a.v), 1.0, dtype)
        return lipschitz(t, np.exp(t.v), math.e, dtype)
    if op == "sqrt1":
        inner = rounded(Approx(np.abs(a.v) + 1.0, a.e), dtype)
        return lipschitz(inner, np.sqrt(inner.v), 0.5, dtype)
    if op == "log1":
        inner = rounded(Approx(np.abs(a.v) + 1.0, a.e), dtype)
        return lipschitz(inner, np.log(inner.v), 1.0, dtype)
    from scipy.special import erf as erf64
    f, slope = {"tanh": (np.tanh, 1.0), "sigmoid": (lambda v: 1 / (1 + np.exp(-v)), 0.25),
                "sin": (np.sin, 1.0), "cos": (np.cos, 1.0), "erf": (erf64, 1.13)}[op]
    return lipschitz(a, f(a.v), slope, dtype)


def shifted(a: np.ndarray, axis: int, k: int) -> np.ndarray:
    """out[i] = a[i + k] along `axis`, 0 where i + k falls outside."""
    out = np.zeros_like(a)
    size = a.shape[axis]
    src = [slice(None)] * 2
    dst = [slice(None)] * 2
    src[axis] = slice(max(k, 0), size + min(k, 0))
    dst[axis] = slice(max(-k, 0), size - max(k, 0))
    out[tuple(dst)] = a[tuple(src)]
    return out


def leaf_env(stage: Stage, main: Approx, src: Approx, y: np.ndarray, w: np.ndarray,
             idx: np.ndarray, alpha: float) -> dict[str, Approx]:
    zero = np.zeros(y.shape)
    axis, k = stage.shift
    mask = y > 0
    return {"x": main, "y": Approx(y, zero), "w": Approx(w[None, :], np.zeros((1, len(w)))),
            "m": Approx(np.where(mask, src.v, 0.5), np.where(mask, src.e, 0.0)),
            "a": Approx(np.asarray(alpha), np.zeros(())),
            "s": Approx(shifted(src.v, axis, k), shifted(src.e, axis, k)),
            "g": Approx(src.v[idx], src.e[idx])}


def reference(stage: Stage, env: dict[str, Approx], dtype: str) -> Approx:
    """The stage's stored values (before the store's rounding), computed in `dtype`."""
    shape = env["y"].v.shape
    a = evaluate(stage.expr, env, dtype)
    v, e = np.broadcast_to(a.v, shape), np.broadcast_to(a.e, shape)
    if stage.kind == "map":
        return Approx(v, e)
    acc = "float64" if dtype == "float64" else "float32"  # 16-bit sums accumulate in float32
    if stage.op == "scan_add":
        acc = dtype  # associative_scan adds in the values' dtype
    n = shape[1]
    gamma = n * UNIT[acc] / (1 - n * UNIT[acc])
    mag = np.abs(v) + e
    op = stage.op
    if op in ("sum", "mean"):
        total = Approx(v.sum(axis=1), e.sum(axis=1) + gamma * mag.sum(axis=1))
        if op == "sum":
            return total
        return rounded(Approx(total.v / n, total.e / n), acc)
    if op in ("max", "min"):
        return Approx(getattr(v, op)(axis=1), e.max(axis=1))
    if op in ("cumsum", "scan_add"):
        return Approx(np.cumsum(v, axis=1), np.cumsum(e, axis=1) + gamma * np.cumsum(mag, axis=1))
    ufunc = np.maximum if op == "scan_max" else np.minimum
    return Approx(ufunc.accumulate(v, axis=1), np.maximum.accumulate(e, axis=1))


def expected(p: Program, x: np.ndarray, y: np.ndarray, w: np.ndarray, idx: np.ndarray) -> Approx:
    f = [a.astype(np.float64) for a in (x, y, w)]
    exact = Approx(f[0], np.zeros(x.shape))
    src = exact if p.shifts_read_x else Approx(f[1], np.zeros(x.shape))
    first = p.stages[0]
    out1 = reference(first, leaf_env(first, exact, src, f[1], f[2], idx, p.alpha), p.dtype)
    if len(p.stages) == 1:
        return rounded(out1, p.dtype)
    second = p.stages[1]
    if p.inplace:  # x itself, in its dtype
        tmp, coarse = rounded(out1, p.dtype), p.dtype
        return rounded(reference(second, leaf_env(second, tmp, tmp, f[1], f[2], idx, p.alpha),
                                 coarse), p.dtype)
    tmp = rounded(out1, "float32")
    # tmp is float32; an expression of y and w alone computes in their dtype (the coarser
    # of the two bounds every node: a conservative bound)
    coarse = p.dtype if UNIT[p.dtype] > UNIT["float32"] and \
        leaves_of(second.expr) & {"y", "w"} else "float32"
    out2 = reference(second, leaf_env(second, tmp, tmp, f[1], f[2], idx, p.alpha), coarse)
    return rounded(out2, p.dtype)


# ---------------------------------------------------------------------------------------------
# Inputs and the check
# ---------------------------------------------------------------------------------------------
def laid_out(a: np.ndarray, layout: str) -> np.ndarray:
    """`a`'s values in a non-contiguous view of another array, as `layout` says."""
    if layout == "T":  # column-major
        return np.ascontiguousarray(a.T).T
    if layout == "strided":  # every other element of the last dimension
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        return big[..., ::2]
    if layout == "offset":  # a window at an offset of a larger array
        big = np.zeros(tuple(s + 1 for s in a.shape), a.dtype)
        big[(slice(1, None),) * a.ndim] = a
        return big[(slice(1, None),) * a.ndim]
    if layout == "reversed":  # negative strides
        flip = (slice(None, None, -1),) * a.ndim
        return np.ascontiguousarray(a[flip])[flip]
    return a.copy()


def make_inputs(p: Program) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(p.seed)
    dt = DTYPES[p.dtype]
    x = rng.uniform(-2.0, 2.0, (p.m, p.n)).astype(dt)
    y = rng.uniform(-2.0, 2.0, (p.m, p.n)).astype(dt)
    w = rng.uniform(-2.0, 2.0, p.n).astype(dt)
    idx = rng.integers(0, p.m, p.m).astype(np.int32)
    return laid_out(x, p.layouts[0]), laid_out(y, p.layouts[1]), laid_out(w, p.layouts[2]), idx


class KernelFiles:
    """Generated kernels as modules of their own files (a tile kernel reads its source)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.modules: dict[str, ModuleType] = {}

    def load(self, text: str) -> Any:
        key = hashlib.sha256(text.encode()).hexdigest()[:16]
        if key not in self.modules:
            path = self.directory / f"fuzz_{key}.py"
            path.write_text(text)
            spec = importlib.util.spec_from_file_location(f"tiledsl_fuzz_{key}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            self.modules[key] = module
        return self.modules[key].k


@pytest.fixture(scope="module")
def kernel_files(tmp_path_factory: pytest.TempPathFactory) -> KernelFiles:
    return KernelFiles(tmp_path_factory.mktemp("fuzz_kernels"))


def run_once(kernel: Any, p: Program, inputs: tuple, backend: str, pick: int) -> np.ndarray:
    """The kernel's result (x itself when it writes in place) on `backend` under config number
    `pick` of [default, 3 sampled]."""
    x, y, w, idx = (a.copy() if a.flags.c_contiguous else laid_out(a.copy(), layout)
                    for a, layout in zip(inputs, (*p.layouts, "c")))
    space = kernel.config_space(x, y, w, idx, p.alpha, backend=backend)
    configs = [space.default(), *space.sample(3, seed=pick)]
    config = configs[pick % len(configs)]
    p.notes.append(f"{backend}: {config}")
    out = kernel.run(x, y, w, idx, p.alpha, backend=backend, config=config)
    return x if p.inplace and len(p.stages) == 1 else out


def check(out: np.ndarray, ref: Approx, p: Program, what: str) -> None:
    assert out.dtype == DTYPES[p.dtype], f"{what}: dtype {out.dtype}, expected {p.dtype}"
    assert out.shape == ref.v.shape, f"{what}: shape {out.shape}, expected {ref.v.shape}"
    o = out.astype(np.float64)
    bad = ~(np.abs(o - ref.v) <= 2 * ref.e + 1e-300)  # NaN (an unwritten td.empty) included
    if bad.any():
        i = tuple(int(j) for j in np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} elements off, first at {i}: got {o[i]!r}, "
            f"expected {ref.v[i]!r} +- {2 * ref.e[i]:.3g}")


@fuzz_settings(10)
@given(p=programs(), picks=st.tuples(st.integers(0, 3), st.integers(0, 3)))
def test_generated_kernels_match_the_float64_reference(kernel_files: KernelFiles, p: Program,
                                                       picks: tuple[int, int]) -> None:
    pytest.importorskip("triton")
    text = source(p)
    kernel = kernel_files.load(text)
    inputs = make_inputs(p)
    ref = expected(p, *(a.copy() for a in inputs))
    try:
        outs = {}
        for backend, pick in zip(("numpy", "triton-interpret"), picks):
            outs[backend] = run_once(kernel, p, inputs, backend, pick)
            check(outs[backend], ref, p, backend)
        # The two backends agree on which elements are exact ties (NaN-free, same values where
        # the reference's bound is 0).
        exact = ref.e == 0
        np.testing.assert_array_equal(outs["numpy"][exact], outs["triton-interpret"][exact])
    except BaseException as e:
        layouts = dict(zip("xyw", p.layouts))
        raise AssertionError(f"{e}\nshape ({p.m}, {p.n}) {p.dtype}, layouts {layouts}, "
                             f"seed {p.seed}, {'; '.join(p.notes)}\n{text}") from e


def int_inputs(p: Program) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(p.seed)
    info = np.iinfo(INT_DTYPES[p.dtype])
    lo, hi = max(info.min, -300), min(info.max, 300)
    x, y = (rng.integers(lo, hi + 1, (p.m, p.n)).astype(info.dtype) for _ in range(2))
    x.flat[::7] = info.min  # the edges: abs, negation and division overflow there
    y.flat[3::11] = info.max
    w = rng.integers(lo, hi + 1, p.n).astype(info.dtype)
    idx = rng.integers(0, p.m, p.m).astype(np.int32)
    return laid_out(x, p.layouts[0]), laid_out(y, p.layouts[1]), laid_out(w, p.layouts[2]), idx


@fuzz_settings(4)
@given(p=int_programs(), picks=st.tuples(st.integers(0, 3), st.integers(0, 3)))
def test_generated_integer_kernels_match_numpy(kernel_files: KernelFiles, p: Program,
                                               picks: tuple[int, int]) -> None:
    """Integer expressions (wrapping arithmetic, floor division and modulo as Python's, bit
    operations, shifts), their sums, extrema and scans: NumPy's values exactly."""
    pytest.importorskip("triton")
    text = source(p)
    kernel = kernel_files.load(text)
    inputs = int_inputs(p)
    ref = int_expected(p, *(np.ascontiguousarray(a) for a in inputs))
    try:
        for backend, pick in zip(("numpy", "triton-interpret"), picks):
            out = run_once(kernel, p, inputs, backend, pick)
            assert out.dtype == ref.dtype, f"{backend}: dtype {out.dtype}, expected {ref.dtype}"
            bad = out != ref
            if bad.any():
                i = tuple(int(j) for j in np.argwhere(bad)[0])
                raise AssertionError(f"{backend}: {int(bad.sum())} of {bad.size} elements off, "
                                     f"first at {i}: got {out[i]!r}, expected {ref[i]!r}")
    except BaseException as e:
        layouts = dict(zip("xyw", p.layouts))
        raise AssertionError(f"{e}\nshape ({p.m}, {p.n}) {p.dtype}, layouts {layouts}, "
                             f"seed {p.seed}, {'; '.join(p.notes)}\n{text}") from e


def test_the_reference_bounds_a_rounding() -> None:
    """The error model itself: x * 3 in float16 lies within the bound, and a value one bound
    away does not pass (the check can fail)."""
    x = np.array([[0.1, 1.7, -1.3]])
    p = Program((Stage("map2d", "map", Binary("*", Leaf("x"), Const(3.0)), None, (0, 1)),),
                False, "float16", 1, 3, ("c", "c", "c"), 0)
    ref = expected(p, x.astype(np.float16), x.astype(np.float16), x[0], np.zeros(1, np.int32))
    got = (x.astype(np.float16) * np.float16(3.0)).astype(np.float16)
    check(got, ref, p, "numpy")
    with pytest.raises(AssertionError, match="elements off"):
        check((ref.v + 3 * ref.e).astype(np.float16), ref, p, "numpy")
