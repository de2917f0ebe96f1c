"""Tile IR + config -> one readable Python module with `@triton.jit` kernels and a launcher.

The config is applied here and only here: block sizes become constexpr parameters, and masks are
emitted only on dimensions that are ragged for these block sizes (or padded to a power of two).
Shapes and strides are specialized (the IR is traced per argument signature), so they appear as
literals. One kernel is generated per `grid` op; the launcher allocates outputs and launches them
in order.
"""

from __future__ import annotations

import keyword
import math
import re
import weakref
from dataclasses import dataclass, field
from typing import Any

from tiledsl.config import Config
from tiledsl.dtypes import DType
from tiledsl.errors import BackendError
from tiledsl.ir.core import Block, Function, Op, Value, walk
from tiledsl.ir.ops import BINARY, COMPARE, UNARY
from tiledsl.ir.types import Dim, RangeType, TensorType, TileType

TL_DTYPE = {"f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32", "f64": "tl.float64",
            "i8": "tl.int8", "i16": "tl.int16", "i32": "tl.int32", "i64": "tl.int64",
            "i1": "tl.int1"}
_OPERATOR = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&", "or": "|", "xor": "^",
             "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_CALL1 = {"exp": "tl.exp", "exp2": "tl.exp2", "log": "tl.log", "sqrt": "tl.sqrt",
          "rsqrt": "tl.rsqrt", "sigmoid": "tl.sigmoid", "erf": "tl.erf", "abs": "tl.abs",
          "tanh": "_tanh"}
_CALL2 = {"maximum": "tl.maximum", "minimum": "tl.minimum", "pow": "_pow",
          "floordiv": "_floordiv", "mod": "_mod"}
# Elementwise uses broadcast implicitly in Triton, so a `broadcast` feeding only them is free.
_IMPLICIT_BROADCAST = frozenset(BINARY) | frozenset(COMPARE) | frozenset(UNARY) | {"where", "store"}
INT32_MAX = 2**31 - 1

HELPERS = {
    "_tanh": '''
@triton.jit
def _tanh(x):
    # tanh from exp (libdevice is unavailable to the interpreter); a series near 0 keeps the
    # relative error small where 1 - 2 / (exp(2x) + 1) would cancel.
    a = tl.abs(x)
    big = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    a2 = a * a
    small = a * (1.0 - a2 * (1.0 / 3.0 - a2 * (2.0 / 15.0 - a2 * (17.0 / 315.0))))
    t = tl.where(a < 0.125, small, big)
    return tl.where(x < 0, -t, t)
''',
    "_pow": '''
@triton.jit
def _pow(x, y):
    # x ** y with NumPy's rules for negative bases (odd integer powers keep the sign).
    r = tl.exp2(y * tl.log2(tl.abs(x)))
    y_int = tl.floor(y) == y
    odd = y_int & (tl.floor(y * 0.5) * 2.0 != y)
    r = tl.where((x < 0) & odd, -r, r)
    r = tl.where((x < 0) & ~y_int, float("nan"), r)
    return tl.where(y == 0, 1.0, r)
''',
    "_floordiv": '''
@triton.jit
def _floordiv(a, b):
    # Python's floor division (Triton's // truncates toward zero on integers).
    q = a // b
    return tl.where((a % b != 0) & ((a < 0) != (b < 0)), q - 1, q)
''',
    "_mod": '''
@triton.jit
def _mod(a, b):
    # Python's modulo: the result takes the sign of the divisor.
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
''',
}


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def padded(d: int) -> int:
    """Triton tiles are powers of two, and tl.dot wants at least 16: constant dims are padded."""
    return 1 if d == 1 else max(16, next_pow2(d))


def tl_dtype(d: DType) -> str:
    return TL_DTYPE[d.short]


def literal(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '-float("inf")'
        return repr(value)
    return repr(value)


@dataclass
class KernelParam:
    """A parameter of a generated kernel: a tensor pointer, a scalar, or a block size."""

    name: str
    kind: str  # "tensor", "desc", "scalar", "scalar_ptr", "num_programs" or "block"
    source: Value | None = None  # the IR value (argument or allocation) behind it
    value: int | None = None  # for "block"
    dtype: str = ""  # Triton signature type for scalars ("fp32", "i32", ...)
    box: tuple[int, ...] = ()  # for "desc": the block a tensor descriptor moves


@dataclass
class GeneratedKernel:
    name: str
    params: list[KernelParam]
    programs: int  # tiles of the grid (a persistent kernel launches fewer programs)
    num_warps: int
    num_stages: int
    persistent: bool = False


@dataclass
class Module:
    """The generated module's source and how to launch its kernels."""

    source: str
    kernels: list[GeneratedKernel]
    launcher: str


@dataclass
class _Range:
    name: str
    extent: int
    block: int  # resolved block size
    block_expr: str  # "BLOCK_TM" or a literal
    ragged: bool


class _Namer:
    def __init__(self) -> None:
        self.used: set[str] = {"tl", "triton", "range", "float", "pid", "grid"} | set(HELPERS)

    def fresh(self, hint: str | None, default: str = "v") -> str:
        base = re.sub(r"\W", "_", hint or default)
        if not base or base[0].isdigit() or keyword.iskeyword(base):
            base = f"{default}_{base}"
        name, i = base, 1
        while name in self.used:
            name = f"{base}_{i}"
            i += 1
        self.used.add(name)
        return name


@dataclass
class _Kernel:
    """Emission state of one kernel (one grid op)."""

    fn: Function
    config: Config
    strides: dict[Value, tuple[int, ...]]
    blocks: dict[str, int]
    interpret: bool = False
    namer: _Namer = field(default_factory=_Namer)
    lines: list[str] = field(default_factory=list)
    names: dict[Value, str] = field(default_factory=dict)
    ranges: dict[Value, _Range] = field(default_factory=dict)
    params: dict[Value, KernelParam] = field(default_factory=dict)
    descriptors: dict[tuple[Value, tuple[int, ...]], KernelParam] = field(default_factory=dict)
    block_params: dict[str, KernelParam] = field(default_factory=dict)
    const_offsets: dict[int, str] = field(default_factory=dict)
    helpers: set[str] = field(default_factory=set)
    uses: dict[Value, list[Op]] = field(default_factory=dict)
    scalar_types: dict[Value, DType] = field(default_factory=dict)
    preamble: list[str] = field(default_factory=list)  # constant offsets, before the body
    fused: dict[Op, str] = field(default_factory=dict)  # add ops that become tl.dot(..., acc)
    preset: dict[Value, str] = field(default_factory=dict)  # values written into carried names
    carried_names: dict[Value, str] = field(default_factory=dict)  # for results -> variable

    # ---- names and shapes -----------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def block_expr(self, d: Dim, label: str | None = None) -> str:
        if isinstance(d, int):
            return str(padded(d))
        if d not in self.block_params:
            name = self.namer.fresh(f"BLOCK_{(label or d).upper()}")
            self.block_params[d] = KernelParam(name, "block", value=self.blocks[d])
        return self.block_params[d].name

    def shape(self, t: TileType) -> str:
        dims = [self.block_expr(d) for d in t.shape]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")" if dims else "[]"

    def expand(self, expr: str, pos: int, rank: int) -> str:
        """A 1-D expression placed at axis `pos` of a rank-`rank` tile."""
        if rank <= 1:
            return expr
        idx = ", ".join(":" if i == pos else "None" for i in range(rank))
        return f"{expr}[{idx}]"

    def const_offsets_for(self, n: int, indent: int) -> tuple[str, str | None]:
        """Offsets (and mask, if padded) of a whole constant dimension of size n."""
        if n not in self.const_offsets:
            name = self.namer.fresh(f"offs_{n}")
            self.const_offsets[n] = name
            self.preamble.append(f"{name} = tl.arange(0, {padded(n)})")
            if padded(n) != n:
                self.preamble.append(f"mask_{name[5:]} = {name} < {n}")
        name = self.const_offsets[n]
        return name, (f"mask_{name[5:]}" if padded(n) != n else None)

    def value(self, v: Value) -> str:
        if v in self.names:
            return self.names[v]
        if v in self.params and self.params[v].kind != "scalar_ptr":
            return self.params[v].name
        raise BackendError(f"triton codegen: value {v} has no name (internal error)")

    def tensor_param(self, v: Value) -> str:
        if v not in self.params:
            hint = (v.hint or "out") + "_ptr"
            self.params[v] = KernelParam(self.namer.fresh(hint), "tensor", v)
        return self.params[v].name

    # ---- ranges ---------------------------------------------------------------------------
    def open_range(self, r: Value, begin: str, indent: int, lines: list[str]) -> None:
        t = r.type
        assert isinstance(t, RangeType)
        block = t.block if isinstance(t.block, int) else self.blocks[t.block]
        label = r.hint or "t"
        block_expr = self.block_expr(t.block, label) if isinstance(t.block, str) else str(block)
        rg = _Range(label, t.extent, block, block_expr, t.extent % block != 0)
        self.ranges[r] = rg
        rg.name = self.namer.fresh(label)
        lines.append(f"begin_{rg.name} = {begin}")
        if any(u.name != "tile.begin" for u in self.uses.get(r, [])):  # used as a vector
            lines.append(f"offs_{rg.name} = begin_{rg.name} + tl.arange(0, {block_expr})")
            if rg.ragged:
                lines.append(f"mask_{rg.name} = offs_{rg.name} < {t.extent}")
        for line in lines:
            self.emit(indent, line)

    # ---- memory ---------------------------------------------------------------------------
    def address(self, op: Op, tensor: Value, indices: list[Value], rank: int,
                indent: int) -> tuple[str, str | None]:
        """The pointer expression and the mask of `tensor[indices]` as a rank-`rank` tile."""
        t = tensor.type
        assert isinstance(t, TensorType)
        strides = self.strides[tensor]
        full = op.attrs.get("full", ())
        wide = sum((padded(n) - 1) * abs(s) for n, s in zip(t.shape, strides)) > INT32_MAX
        terms, masks = [], []
        it = iter(indices)
        pos = 0
        for d, (extent, stride) in enumerate(zip(t.shape, strides)):
            if d in full:
                offs, mask = self.const_offsets_for(extent, indent)
                offs_e = self.expand(f"{offs}.to(tl.int64)" if wide else offs, pos, rank)
                if mask:
                    masks.append(self.expand(mask, pos, rank))
                pos += 1
            else:
                idx = next(it)
                if idx in self.ranges:
                    rg = self.ranges[idx]
                    offs = f"offs_{rg.name}.to(tl.int64)" if wide else f"offs_{rg.name}"
                    offs_e = self.expand(offs, pos, rank)
                    if rg.ragged:
                        masks.append(self.expand(f"mask_{rg.name}", pos, rank))
                    pos += 1
                else:
                    offs_e = self.value(idx)
                    if wide:
                        offs_e = f"{offs_e}.to(tl.int64)"
                    if not self.in_bounds(idx, extent):
                        masks.append(f"({offs_e} >= 0) & ({offs_e} < {extent})")
            if stride != 0:
                terms.append(offs_e if stride == 1 else f"{offs_e} * {stride}")
        ptr = " + ".join([self.tensor_param(tensor)] + terms)
        return ptr, " & ".join(masks) if masks else None

    def descriptor(self, op: Op, tensor: Value, indices: list[Value]) -> tuple[str, str] | None:
        """A TMA tensor descriptor for this access and its coordinates, when the config asks
        for TMA and the access allows it: every dimension a tile or `:`, boxes of at most 256,
        16-byte aligned strides with a contiguous last dimension, out-of-range reads of zero."""
        t = tensor.type
        assert isinstance(t, TensorType)
        if not self.config.get("tma", False) or not 2 <= len(t.shape) <= 5:
            return None
        if op.name == "load" and op.attrs.get("other") not in (None, 0, 0.0, False):
            return None
        strides, size = self.strides[tensor], t.dtype.bits // 8
        if strides[-1] != 1 or any(s * size % 16 for s in strides[:-1]) or size == 0:
            return None
        full = op.attrs.get("full", ())
        it = iter(indices)
        box, coords = [], []
        for d, extent in enumerate(t.shape):
            if d in full:
                box.append(padded(extent))
                coords.append("0")
                continue
            idx = next(it)
            if idx not in self.ranges:
                return None  # a scalar index: plain pointer arithmetic
            rg = self.ranges[idx]
            box.append(rg.block)
            coords.append(f"begin_{rg.name}")
        if max(box) > 256 or box[-1] * size < 16:
            return None
        key = (tensor, tuple(box))
        if key not in self.descriptors:
            name = self.namer.fresh(f"{tensor.hint or 'out'}_desc")
            self.descriptors[key] = KernelParam(name, "desc", tensor, box=tuple(box))
        return self.descriptors[key].name, ", ".join(coords)

    def in_bounds(self, idx: Value, extent: int) -> bool:
        """A scalar index that cannot leave [0, extent): a constant, or a grid/loop position."""
        owner = idx.owner
        if owner is not None and owner.name == "const":
            return 0 <= owner.attrs["value"] < extent
        if owner is not None and owner.name == "tile.begin":
            r = owner.operands[0].type
            return isinstance(r, RangeType) and r.block == 1 and r.extent == extent
        return False

    # ---- ops ------------------------------------------------------------------------------
    def assign(self, op: Op, expr: str, indent: int) -> None:
        r = op.result
        name = self.preset.get(r) or self.namer.fresh(r.hint or _default_name(op))
        self.names[r] = name
        self.emit(indent, f"{name} = {expr}")

    def alias(self, op: Op, expr: str) -> None:
        self.names[op.result] = expr

    def only_implicit_uses(self, v: Value) -> bool:
        return all(u.name in _IMPLICIT_BROADCAST for u in self.uses.get(v, []))

    def op(self, op: Op, indent: int) -> None:
        name = op.name
        args = [self.value(o) for o in op.operands] if name not in ("load", "store", "for",
                                                                       "tile.index", "tile.begin",
                                                                       "tile.size", "mask") else []
        rt = op.results[0].type if op.results else None
        if name == "const":
            assert isinstance(rt, TileType)
            value = op.attrs["value"]
            feeds = self.uses.get(op.result, [])
            if all(u.name == "broadcast" for u in feeds) or (
                    rt.dtype.short in ("f32", "i32", "i1") and self.only_implicit_uses(op.result)):
                self.alias(op, literal(bool(value) if rt.dtype.is_bool else value))
            else:
                self.assign(op, f"tl.full([], {literal(value)}, {tl_dtype(rt.dtype)})", indent)
        elif name in BINARY or name in COMPARE:
            self.elementwise(op, args, indent)
        elif name in UNARY:
            self.elementwise(op, args, indent)
        elif name == "where":
            self.assign(op, f"tl.where({args[0]}, {args[1]}, {args[2]})", indent)
        elif name == "cast":
            assert isinstance(rt, TileType)
            src = op.operands[0]
            if self.scalar_types.get(src) == rt.dtype:
                self.alias(op, args[0])  # the launcher already passes it in this dtype
            elif src in self.params and src not in self.names:  # a Python number when interpreted
                self.assign(op, f"tl.cast({args[0]}, {tl_dtype(rt.dtype)})", indent)
            elif self.interpret and rt.dtype.short == "bf16" and src.type.dtype.short == "f64":  # type: ignore[union-attr]
                # The interpreter converts float64 to bfloat16 wrongly (triton 3.9): go via float32.
                self.assign(op, f"{args[0]}.to(tl.float32).to(tl.bfloat16)", indent)
            else:
                self.assign(op, f"{args[0]}.to({tl_dtype(rt.dtype)})", indent)
        elif name == "broadcast":
            assert isinstance(rt, TileType)
            src = op.operands[0]
            if self.only_implicit_uses(op.result):
                self.alias(op, args[0])
            elif src.owner is not None and src.owner.name == "const":
                value = literal(src.owner.attrs["value"])
                self.assign(op, f"tl.full({self.shape(rt)}, {value}, {tl_dtype(rt.dtype)})", indent)
            else:
                self.assign(op, f"tl.broadcast_to({args[0]}, {self.shape(rt)})", indent)
        elif name == "expand_dims":
            src = op.operands[0].type
            assert isinstance(src, TileType)
            axis = op.attrs["axis"]
            if src.rank == 0:
                self.assign(op, f"tl.expand_dims({args[0]}, 0)", indent)
            else:
                idx = [":"] * src.rank
                idx.insert(axis, "None")
                self.assign(op, f"{args[0]}[{', '.join(idx)}]", indent)
        elif name == "transpose":
            perm = tuple(op.attrs["perm"])
            expr = f"tl.trans({args[0]})" if perm == (1, 0) else f"tl.permute({args[0]}, {perm})"
            self.assign(op, expr, indent)
        elif name == "dot":
            self.dot(op, args, indent)
        elif name == "reduce":
            self.reduce(op, args, indent)
        elif name == "mask":
            self.mask(op, indent)
        elif name == "tile.index":
            self.alias(op, f"offs_{self.ranges[op.operands[0]].name}")
        elif name == "tile.begin":
            self.alias(op, f"begin_{self.ranges[op.operands[0]].name}")
        elif name == "tile.size":
            rg = self.ranges[op.operands[0]]
            self.assign(op, f"tl.minimum({rg.block_expr}, {rg.extent} - begin_{rg.name})", indent)
        elif name == "load" and (desc := self.descriptor(op, op.operands[0], op.operands[1:])):
            self.assign(op, f"{desc[0]}.load([{desc[1]}])", indent)
        elif name == "store" and (desc := self.descriptor(op, op.operands[0], op.operands[1:-1])):
            value = op.operands[-1]
            v = self.value(value)
            if value.owner is not None and value.owner.name == "broadcast":  # a box-shaped value
                v = f"tl.broadcast_to({v}, {self.shape(value.type)})"  # type: ignore[arg-type]
            self.emit(indent, f"{desc[0]}.store([{desc[1]}], {v})")
        elif name == "load":
            assert isinstance(rt, TileType)
            ptr, mask = self.address(op, op.operands[0], op.operands[1:], rt.rank, indent)
            if mask is None:
                self.assign(op, f"tl.load({ptr})", indent)
            else:
                other = op.attrs.get("other")
                other_s = "" if other is None else f", other={literal(other)}"
                self.assign(op, f"tl.load({ptr}, mask={mask}{other_s})", indent)
        elif name == "store":
            value = op.operands[-1]
            vt = value.type
            assert isinstance(vt, TileType)
            ptr, mask = self.address(op, op.operands[0], op.operands[1:-1], vt.rank, indent)
            mask_s = "" if mask is None else f", mask={mask}"
            self.emit(indent, f"tl.store({ptr}, {self.value(value)}{mask_s})")
        elif name == "for":
            self.loop(op, indent)
        else:
            raise BackendError(f"the triton backend has no rule for op '{name}'", loc=op.loc)

    def elementwise(self, op: Op, args: list[str], indent: int) -> None:
        t = op.operands[0].type
        assert isinstance(t, TileType)
        rt = op.result.type
        assert isinstance(rt, TileType)
        upcast = t.dtype.is_float and t.dtype.bits == 16  # 16-bit floats compute in float32
        if upcast:
            args = [f"{a}.to(tl.float32)" if not _is_literal(a) else a for a in args]
        name = op.name
        if name in _OPERATOR:
            expr = f"{_paren(args[0])} {_OPERATOR[name]} {_paren(args[1])}"
        elif name == "neg":
            expr = f"-{_paren(args[0])}"
        elif name == "not":
            expr = f"~{_paren(args[0])}"
        elif name in _CALL1:
            fn = _CALL1[name]
            if fn.startswith("_"):
                self.helpers.add(fn)
            expr = f"{fn}({args[0]})"
        else:
            fn = _CALL2[name]
            if name in ("floordiv", "mod") and t.dtype.is_float:
                expr = (f"tl.floor({args[0]} / {args[1]})" if name == "floordiv" else
                        f"{args[0]} - tl.floor({args[0]} / {args[1]}) * {args[1]}")
            else:
                if fn.startswith("_"):
                    self.helpers.add(fn)
                expr = f"{fn}({args[0]}, {args[1]})"
        if upcast and not rt.dtype.is_bool:
            expr = f"({expr}).to({tl_dtype(rt.dtype)})"
        self.assign(op, expr, indent)

    def dot(self, op: Op, args: list[str], indent: int) -> None:
        a, b = (o.type for o in op.operands)
        assert isinstance(a, TileType) and isinstance(b, TileType)
        for t in (a, b):
            for d in t.shape:
                if isinstance(d, int) and padded(d) < 16:
                    raise BackendError(f"tl.dot needs every dimension >= 16; {t} has {d}",
                                       loc=op.loc)
        extra = ""
        if a.dtype.short == "f32":
            extra = ', input_precision="ieee"'
        elif a.dtype.is_int:
            extra = ", out_dtype=tl.int32"
        elif a.dtype.short == "bf16" and self.interpret:
            # Triton's interpreter computes bfloat16 tl.dot wrongly (triton 3.9); products of
            # bfloat16 values are exact in float32, so upcasting gives the GPU's result.
            args = [f"{x}.to(tl.float32)" for x in args]
            extra = ', input_precision="ieee"' 
        users = self.uses.get(op.result, [])
        if len(users) == 1 and users[0].name == "add" and users[0].operands[1] is op.result \
                and users[0].operands[0].type == op.result.type:
            # acc + a @ b -> tl.dot(a, b, acc): the accumulation stays in the MMA registers.
            self.fused[users[0]] = f"tl.dot({args[0]}, {args[1]}, {{acc}}{extra})"
            return
        self.assign(op, f"tl.dot({args[0]}, {args[1]}{extra})", indent)

    def reduce(self, op: Op, args: list[str], indent: int) -> None:
        x = op.operands[0].type
        rt = op.result.type
        assert isinstance(x, TileType) and isinstance(rt, TileType)
        kind = op.attrs["kind"]
        src = args[0] if x.dtype == rt.dtype else f"{args[0]}.to({tl_dtype(rt.dtype)})"
        keep = ", keep_dims=True" if op.attrs["keepdims"] else ""
        fn = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}.get(kind)
        if fn is None:  # mean (the pipeline lowers it; kept for completeness)
            n = x.shape[op.attrs["axis"]]
            count = self.block_expr(n) if isinstance(n, str) else str(n)
            self.assign(op, f"tl.sum({src}, axis={op.attrs['axis']}{keep}) / {count}", indent)
            return
        self.assign(op, f"{fn}({src}, axis={op.attrs['axis']}{keep})", indent)

    def mask(self, op: Op, indent: int) -> None:
        x = op.operands[0]
        t = x.type
        assert isinstance(t, TileType)
        ranges = iter(op.operands[1:])
        conds = []
        for axis in op.attrs["axes"]:
            d = t.shape[axis]
            if isinstance(d, str):
                rg = self.ranges[next(ranges)]
                if rg.ragged:
                    conds.append(self.expand(f"mask_{rg.name}", axis, t.rank))
            elif padded(d) != d:
                _, m = self.const_offsets_for(d, indent)
                conds.append(self.expand(m or "", axis, t.rank))
        if not conds:
            self.alias(op, self.value(x))
            return
        self.assign(op, f"tl.where({' & '.join(conds)}, {self.value(x)}, "
                        f"{literal(op.attrs['value'])})", indent)

    def loop(self, op: Op, indent: int) -> None:
        region = op.regions[0]
        r = region.args[0]
        rt = r.type
        assert isinstance(rt, RangeType)
        carried = []
        for init, arg, res in zip(op.operands, region.args[1:], op.results):
            name = self.carried_names[res]
            if self.value(init) != name:
                self.emit(indent, f"{name} = {self.value(init)}")
            self.names[arg] = self.names[res] = name
            carried.append(name)
        self.write_in_place(region, carried)
        block = rt.block if isinstance(rt.block, int) else self.blocks[rt.block]
        it = self.namer.fresh(f"{r.hint or 'k'}_iter")
        self.emit(indent, f"for {it} in range(0, {-(-rt.extent // block)}):")
        label_block = self.block_expr(rt.block, r.hint) if isinstance(rt.block, str) else str(block)
        self.open_range(r, f"{it} * {label_block}", indent + 1, [])
        self.block(region, indent + 1)
        changes = [(c, self.value(v)) for c, v in zip(carried, region.ops[-1].operands)
                   if self.value(v) != c]
        if changes:  # one simultaneous assignment, so carried values can swap
            self.emit(indent + 1, ", ".join(c for c, _ in changes) + " = "
                      + ", ".join(v for _, v in changes))

    def write_in_place(self, region: Block, carried: list[str]) -> None:
        """Name a yielded value after its carried variable (`acc = tl.dot(a, b, acc)`) when it is
        made in this body, used only by the yield, and after the last read of the old value."""
        position = {op: i for i, op in enumerate(region.ops)}
        yielded = region.ops[-1].operands
        for arg, v, name in zip(region.args[1:], yielded, carried):
            owner = v.owner
            if owner not in position or len(self.uses.get(v, [])) != 1 or v in self.preset:
                continue
            reads = [position.get(_top(u, region), -1) for u in self.uses.get(arg, [])]
            if all(0 <= i <= position[owner] for i in reads):
                self.preset[v] = name

    def block(self, block: Block, indent: int) -> None:
        for op in block.ops:  # a loop's initial value is made under its carried name
            if op.name == "for":
                for init, res in zip(op.operands, op.results):
                    name = self.carried_names[res] = self.namer.fresh(res.hint)
                    if init.owner in block.ops and len(self.uses.get(init, [])) == 1:
                        self.preset.setdefault(init, name)
        for op in block.ops:
            if op.name == "yield":
                continue
            if op in self.fused:
                acc = self.value(op.operands[0])
                self.assign(op, self.fused[op].format(acc=acc), indent)
                continue
            self.op(op, indent)



def _top(op: Op, region: Block) -> Op | None:
    """The op of `region` that contains `op` (itself, or an op whose region holds it)."""
    for candidate in region.ops:
        if candidate is op or any(op in list(walk(r)) for r in candidate.regions):
            return candidate
    return None


def _default_name(op: Op) -> str:
    if op.name == "load":
        return f"{op.operands[0].hint or 'x'}_tile"
    if op.name == "reduce":
        return f"{op.attrs['kind']}_{op.attrs['axis']}"
    return {"dot": "prod", "tile.size": "size", "mask": "masked", "transpose": "trans"}.get(
        op.name, "tmp")


def _is_literal(expr: str) -> bool:
    return bool(re.fullmatch(r"-?[\d.e+-]+|True|False|-?float\(\"\w+\"\)", expr))


def _paren(expr: str) -> str:
    return expr if re.fullmatch(r"[\w.\[\]:, ()]+", expr) and " " not in expr.strip() else f"({expr})"


_BY_VALUE = {"f32": "fp32", "i32": "i32", "i64": "i64", "i1": "i1"}


def _scalar_param_type(v: Value, uses: dict[Value, list[Op]]) -> tuple[str, DType]:
    """How a scalar argument is passed: ("fp32", f32) etc. by value, or ("ptr", dtype) as a
    1-element tensor. Triton's JIT passes Python floats as fp32, so a float64 scalar goes by value
    only when every use casts it to float32 (the rounding is the same); other types that the JIT
    cannot pass exactly (float64, 16-bit, small ints) go through memory."""
    t = v.type
    assert isinstance(t, TileType)
    users = uses.get(v, [])
    targets = {u.result.type.dtype for u in users if u.name == "cast"}  # type: ignore[union-attr]
    if t.dtype.short == "f64" and users and all(u.name == "cast" for u in users) \
            and len(targets) == 1 and next(iter(targets)).short == "f32":
        return "fp32", next(iter(targets))
    if t.dtype.short in _BY_VALUE:
        return _BY_VALUE[t.dtype.short], t.dtype
    return "ptr", t.dtype


def generate(fn: Function, config: Config, strides: dict[Value, tuple[int, ...]],
             interpret: bool = False) -> Module:
    """The module for `fn` under `config`, with tensors laid out with `strides` (in elements);
    `interpret` works around the Triton interpreter's gaps."""
    blocks = dict(zip(fn.symbols, config.block_sizes))
    uses: dict[Value, list[Op]] = {}
    for op in walk(fn.body):
        for o in op.operands:
            uses.setdefault(o, []).append(op)
    strides = dict(strides)
    for op in fn.body.ops:  # outputs the launcher allocates are contiguous
        t = op.results[0].type if op.results else None
        if isinstance(t, TensorType):
            strides[op.result] = tuple(math.prod(t.shape[i + 1:]) for i in range(len(t.shape)))
    kernels: list[GeneratedKernel] = []
    texts: list[str] = []
    helpers: set[str] = set()
    host_scalars = {a for a in fn.args if isinstance(a.type, TileType)}
    grids = [op for op in fn.body.ops if op.name == "grid"]
    for i, grid in enumerate(grids):
        k = _Kernel(fn, config, strides, blocks, interpret)
        k.uses = uses
        name = f"{fn.name}_kernel" if len(grids) == 1 else f"{fn.name}_kernel_{i}"
        text, gk = _grid_kernel(k, grid, name, host_scalars)
        texts.append(text)
        kernels.append(gk)
        helpers |= k.helpers
    launcher = _launcher(fn, kernels, config)
    header = (f'"""Generated by tiledsl from kernel \'{fn.name}\' for {config}."""\n\n'
              "import triton\nimport triton.language as tl\n")
    if any(p.kind == "desc" for k in kernels for p in k.params):
        header += "from triton.tools.tensor_descriptor import TensorDescriptor\n"
    parts = [header] + [HELPERS[h] for h in sorted(helpers)] + texts + [launcher]
    return Module("\n\n".join(p.strip("\n") for p in parts) + "\n", kernels, launcher)


def _grid_kernel(k: _Kernel, grid: Op, name: str, host_scalars: set[Value]) -> tuple[str, GeneratedKernel]:
    region = grid.regions[0]
    ranges = region.args
    counts = []
    for r in ranges:
        rt = r.type
        assert isinstance(rt, RangeType)
        block = rt.block if isinstance(rt.block, int) else k.blocks[rt.block]
        counts.append(-(-rt.extent // block))
    # scalar arguments used in this grid become parameters
    body_start = len(k.lines)
    for a in sorted(host_scalars, key=lambda v: k.fn.args.index(v)):
        if a in k.uses:
            ttype, dtype = _scalar_param_type(a, k.uses)
            if ttype == "ptr":
                ptr = k.namer.fresh(f"{a.hint}_ptr")
                k.params[a] = KernelParam(ptr, "scalar_ptr", a)
                k.names[a] = k.namer.fresh(a.hint)
                k.emit(1, f"{k.names[a]} = tl.load({ptr})")
            else:
                k.params[a] = KernelParam(k.namer.fresh(a.hint), "scalar", a, dtype=ttype)
                k.scalar_types[a] = dtype
    programs = math.prod(counts)
    preamble_at = len(k.lines)
    persistent = bool(k.config.get("persistent", False))
    base = 1
    if persistent:  # as many programs as SMs, each walking the tiles with a stride
        prog = KernelParam(k.namer.fresh("num_programs"), "num_programs", dtype="i32")
        k.emit(1, f"for pid in tl.range(tl.program_id(0), {programs}, {prog.name}):")
        base = 2
    else:
        k.emit(1, "pid = tl.program_id(0)")
    group_m = k.config.get("group_m", 1)
    pids = [k.namer.fresh(f"pid_{r.hint or 'g'}") for r in ranges]
    if len(ranges) == 2 and group_m > 1 and counts[0] > 1:
        # Grouped ordering: consecutive programs share rows of A and columns of B in L2.
        k.emit(base, f"group = pid // {group_m * counts[1]}")
        k.emit(base, f"first = group * {group_m}")
        k.emit(base, f"group_rows = tl.minimum({counts[0]} - first, {group_m})")
        k.emit(base, f"{pids[0]} = first + (pid % {group_m * counts[1]}) % group_rows")
        k.emit(base, f"{pids[1]} = (pid % {group_m * counts[1]}) // group_rows")
    else:
        rest = "pid"
        for j in reversed(range(len(ranges))):
            if j == 0:
                k.emit(base, f"{pids[j]} = {rest}")
            else:
                k.emit(base, f"{pids[j]} = {rest} % {counts[j]}")
                nxt = k.namer.fresh("rest")
                k.emit(base, f"{nxt} = {rest} // {counts[j]}")
                rest = nxt
    for r, pid in zip(ranges, pids):
        rt = r.type
        assert isinstance(rt, RangeType)
        block_expr = k.block_expr(rt.block, r.hint) if isinstance(rt.block, str) else str(rt.block)
        k.open_range(r, f"{pid} * {block_expr}", base, [])
    k.block(region, base)
    for line in reversed(k.preamble):
        k.lines.insert(preamble_at, "    " + line)
    descs = list(k.descriptors.values())
    tensors = [p for p in k.params.values() if p.kind in ("tensor", "scalar_ptr")]
    scalars = [p for p in k.params.values() if p.kind == "scalar"] + ([prog] if persistent else [])
    blocks = list(k.block_params.values())
    sig = [p.name for p in descs + tensors + scalars] + [f"{p.name}: tl.constexpr" for p in blocks]
    dns = f"(do_not_specialize={[p.name for p in scalars]!r})" if scalars else ""
    head = [f"@triton.jit{dns}", f"def {name}({', '.join(sig)}):",
            f"    # {programs} tiles: " + " x ".join(
                f"{c} of {r.hint}" for c, r in zip(counts, ranges))
            + (" (persistent: each program walks tiles)" if persistent else "")]
    text = "\n".join(head + k.lines[body_start:]) + "\n"
    gk = GeneratedKernel(name, descs + tensors + scalars + blocks, programs,
                         int(k.config.num_warps or 4), int(k.config.num_stages or 3), persistent)
    return text, gk


def _launcher(fn: Function, kernels: list[GeneratedKernel], config: Config) -> str:
    """A plain-Python launcher: allocates outputs with `empty`, launches each kernel in order."""
    names = _Namer()
    names.used |= {k.name for k in kernels} | {"empty", "full", "wrap"}
    arg_names = {a: names.fresh(a.hint) for a in fn.args}
    lines = [f"def launch({', '.join(arg_names.values())}, *, empty, full, num_sms=132, "
             "wrap=None):",
             f'    """Run {fn.name} on tensors Triton can take (torch, or objects with data_ptr).'
             '\n\n    `empty(shape, dtype)` and `full(shape, value, dtype)` allocate outputs on the '
             'inputs\' device;\n    persistent kernels launch `num_sms` programs at most; '
             '`wrap` (e.g.\n    torch.library.wrap_triton) wraps each kernel before it is '
             'launched.\n    """', "    wrap = wrap or (lambda kernel: kernel)"]
    values: dict[Value, str] = dict(arg_names)
    for op in fn.body.ops:
        if op.name == "tensor.empty":
            t = op.result.type
            assert isinstance(t, TensorType)
            name = names.fresh(op.result.hint or "out")
            values[op.result] = name
            lines.append(f"    {name} = empty({t.shape}, {t.dtype.name!r})")
        elif op.name == "tensor.full":
            t = op.result.type
            assert isinstance(t, TensorType)
            src = op.operands[0]
            if src.owner is None or src.owner.name != "const":
                raise BackendError("the triton backend fills tensors only with constants",
                                   loc=op.loc)
            name = names.fresh(op.result.hint or "out")
            values[op.result] = name
            lines.append(f"    {name} = full({t.shape}, {literal(src.owner.attrs['value'])}, "
                         f"{t.dtype.name!r})")
    for k in kernels:
        call_args = []
        for p in k.params:
            if p.kind == "block":
                call_args.append(f"{p.name}={p.value}")
            elif p.kind == "num_programs":
                call_args.append(f"min({k.programs}, num_sms)")
            elif p.kind == "desc":
                assert p.source is not None
                t = values[p.source]
                call_args.append(f"TensorDescriptor({t}, {t}.shape, {t}.stride(), {list(p.box)})")
            elif p.kind == "scalar_ptr":
                assert p.source is not None and isinstance(p.source.type, TileType)
                call_args.append(f"full((1,), {values[p.source]}, {p.source.type.dtype.name!r})")
            else:
                assert p.source is not None
                call_args.append(values[p.source])
        opts = f"num_warps={k.num_warps}, num_stages={k.num_stages}"
        grid = f"min({k.programs}, num_sms)" if k.persistent else str(k.programs)
        lines.append(f"    wrap({k.name})[({grid},)]({', '.join(call_args)}, {opts})")
    outs = [values[v] for v in fn.outputs]
    lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    return "\n".join(lines) + "\n"


_generated: "weakref.WeakKeyDictionary[Function, dict[tuple, Module]]" = weakref.WeakKeyDictionary()


def generate_cached(fn: Function, config: Config, strides: dict[Value, tuple[int, ...]],
                    interpret: bool = False) -> Module:
    """`generate`, memoized per lowered function, config and layout (the dispatch path)."""
    per_fn = _generated.setdefault(fn, {})
    key = (config, tuple(strides.get(a, ()) for a in fn.args), interpret)
    if key not in per_fn:
        per_fn[key] = generate(fn, config, strides, interpret)
    return per_fn[key]
