"""Emitting one generated kernel: the ops of one `grid` region as Triton statements.

`KernelEmitter` walks the region and writes readable Triton: pointer arithmetic from the specialized
shapes and strides, masks only on the dimensions that are ragged for the config's block sizes
(or padded to a power of two), tensor descriptors for TMA, and the small `@triton.jit` helpers
some ops need. Loops are written by `loops.py` (a mixin). codegen.py assembles the kernels and
the launcher into a module.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from typing import Any

from lowering.backends.triton.boxes import BoxDim, fold
from lowering.backends.triton.casts import convert, literal, reduce_in_f32, tl_dtype
from lowering.backends.triton.helpers import HELPERS, small_power
from lowering.backends.triton.params import KernelParam
from tiledsl.runtime.config import Config
from tiledsl import dtypes
from tiledsl.dtypes import DType
from tiledsl.errors import BackendError
from lowering.backends.triton import shape_rules as _shape_rules  # noqa: F401 (registers rules)
from lowering.backends.triton import branch_rules as _branch_rules  # noqa: F401 (registers rules)
from lowering.backends.triton import while_rules as _while_rules  # noqa: F401 (registers rules)
from lowering.backends.triton import atomic_rules as _atomic_rules  # noqa: F401 (registers rules)
from lowering.backends.triton import random_rules as _random_rules  # noqa: F401 (registers rules)
from lowering.backends.triton import scan_rules as _scan_rules  # noqa: F401 (registers rules)
from lowering.backends.triton import assert_rules as _assert_rules  # noqa: F401 (registers rules)
from lowering.backends.triton import shift_rules
from lowering.backends.triton import bit_rules as _bit_rules  # noqa: F401 (registers rules)
from lowering.backends.triton import math_rules as _math_rules  # noqa: F401 (registers rules)
from lowering.backends.triton import asm_rules as _asm_rules  # noqa: F401 (registers rules)
from lowering.backends.triton import block_rules as _block_rules  # noqa: F401 (registers rules)
from lowering.backends.triton.loops import LoopEmission, clamped_stop
from lowering.backends.triton.oprules import EMIT_RULES, PREPARE_RULES
from lowering.backends.triton.widen import mma_min, narrow, padded, widen
from lowering.backends.triton.workarounds import breaks_thread_locality
from tiledsl.ir.bounds import interval
from tiledsl.ir.core import Block, Function, Op, Value, loop_inits, loop_stop
from tiledsl.ir.gathers import access_parts, gathers, op_layout
from tiledsl.ir.ops import ARG_REDUCTIONS, BINARY, COMPARE, UNARY
from tiledsl.ir.slices import slices_of
from tiledsl.ir.types import Dim, RangeType, TensorType, TileType
from tiledsl.ir.views import offset_of, root
from tiledsl.lang.shifted import is_shifted

_OPERATOR = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&", "or": "|", "xor": "^",
             "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_CALL1 = {"exp": "tl.exp", "exp2": "tl.exp2", "log": "tl.log", "sqrt": "tl.sqrt",
          "rsqrt": "tl.rsqrt", "sigmoid": "tl.sigmoid", "erf": "tl.erf", "abs": "tl.abs",
          "tanh": "_tanh"}
_CALL2 = {"maximum": "tl.maximum", "minimum": "tl.minimum", "pow": "libdevice.pow",  # C's
          "floordiv": "_floordiv", "mod": "_mod"}
# Elementwise uses broadcast implicitly in Triton, so a `broadcast` feeding only them is free.
_IMPLICIT_BROADCAST = frozenset(BINARY) | frozenset(COMPARE) | frozenset(UNARY) | {
    "where", "store", "tile.shift"}
INT32_MAX = 2**31 - 1
# Ops whose rules read their operands themselves (ranges, tensors, pointers), not as values.
_NAMES_OWN_OPERANDS = frozenset({"load", "store", "for", "tile.index", "tile.begin", "tile.size",
                                 "tile.id", "tile.block_size", "mask", "tile.shift", "atomic",
                                 "while"})


def tl_dot_takes(d: DType) -> bool:
    """Whether tl.dot takes operands of dtype d: floats, and int8 only among integers."""
    return d.is_float or d.short == "i8"


def in_bounds(idx: Value, extent: int) -> bool:
    """A scalar index that cannot leave [0, extent): a constant, or a grid/loop position."""
    owner = idx.owner
    if owner is not None and owner.name == "const":
        return 0 <= owner.attrs["value"] < extent
    if owner is not None and owner.name == "tile.begin":
        r = owner.operands[0].type
        return isinstance(r, RangeType) and r.block == 1 and r.extent == extent
    return False


@dataclass
class _Range:
    name: str
    extent: int
    block: int  # resolved block size
    block_expr: str  # "BLOCK_TM" or a literal
    ragged: bool  # some lanes of some tile are masked: past the extent, or padding
    padding: bool = False  # a constant block padded to a power of two (at least 16)
    limit: str = ""  # where in-range lanes end: the extent, or a `td.tile(stop)` loop's stop
    lower: str = ""  # where they begin, for a `td.tile(..., start=)` loop ("": at 0)

    def __post_init__(self) -> None:
        self.limit = self.limit or str(self.extent)


class Namer:
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
class KernelEmitter(LoopEmission):
    """Emission state of one kernel (one grid op)."""

    fn: Function
    config: Config
    strides: dict[Value, tuple[int, ...]]
    blocks: dict[str, int]
    interpret: bool = False
    namer: Namer = field(default_factory=Namer)
    lines: list[str] = field(default_factory=list)
    names: dict[Value, str] = field(default_factory=dict)
    ranges: dict[Value, _Range] = field(default_factory=dict)
    params: dict[Value, KernelParam] = field(default_factory=dict)
    descriptors: dict[tuple[Value, tuple[int, ...], tuple], KernelParam] = field(
        default_factory=dict)
    block_params: dict[str, KernelParam] = field(default_factory=dict)
    const_offsets: dict[int, str] = field(default_factory=dict)
    helpers: set[str] = field(default_factory=set)
    functions: dict[str, str] = field(default_factory=dict)  # generated @triton.jit, by name
    uses: dict[Value, list[Op]] = field(default_factory=dict)
    scalar_types: dict[Value, DType] = field(default_factory=dict)
    preamble: list[str] = field(default_factory=list)  # constant offsets, before the body
    fused: dict[Op, str] = field(default_factory=dict)  # add ops that become tl.dot(..., acc)
    preset: dict[Value, str] = field(default_factory=dict)  # values written into carried names
    carried_names: dict[Value, str] = field(default_factory=dict)  # for results -> variable
    true_wheres: dict[Op, Value] = field(default_factory=dict)  # in a split's prefix loop
    skipped: set[Op] = field(default_factory=set)  # what only those wheres' conditions need
    pointers: dict[Op, str] = field(default_factory=dict)  # loads whose pointers a loop hoists
    stride_params: dict[tuple[str, int], KernelParam] = field(default_factory=dict)  # loops.py
    shift_masks: dict[tuple[Value, int], str] = field(default_factory=dict)  # shift_rules.py
    barriers: set[Op] = field(default_factory=set)  # ops a tl.debug_barrier() precedes
    counters: dict[Value, tuple[int, int]] = field(default_factory=dict)  # while_rules.py

    # ---- names and shapes -----------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def block_of(self, d: Dim) -> int:
        """A block size under the config (a constant block unpadded)."""
        return d if isinstance(d, int) else self.blocks[d]

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

    def full_value(self, v: Value) -> str:
        """`v` as an expression of its whole shape, as a loop-carried value or an `if` result
        must be in Triton: a tile made from scalars and broadcasts that only feed elementwise
        ops is written as a scalar (`acc = 0.0 + 1.0` for `td.zeros((tm,)) + 1.0`), so it is
        widened here."""
        t = v.type
        if not isinstance(t, TileType) or t.rank == 0 or not self.scalar_written(v):
            return self.value(v)
        return f"tl.zeros({self.shape(t)}, {tl_dtype(t.dtype)}) + {self.value(v)}"

    def written_shape(self, v: Value) -> tuple:
        """The shape of `v`'s expression as written: a broadcast that only feeds elementwise
        ops is written as its operand (`broadcast`), and scalars as scalars."""
        t = v.type
        if not isinstance(t, TileType) or self.scalar_written(v):
            return ()
        op = v.owner
        if op is not None and op.name == "broadcast" and op not in self.skipped and \
                self.only_implicit_uses(v):
            return self.written_shape(op.operands[0])
        return t.shape

    def scalar_written(self, v: Value) -> bool:
        """Whether tile `v`'s expression is a scalar: an aliased broadcast of a scalar, or an
        elementwise op of such values and scalars."""
        op = v.owner
        if op is None or op in self.skipped:
            return False
        if op.name == "broadcast":
            return self.only_implicit_uses(v) and getattr(op.operands[0].type, "rank", 1) == 0
        if op.name in _IMPLICIT_BROADCAST and op.name not in ("store", "tile.shift"):
            return all(getattr(o.type, "rank", 1) == 0 or self.scalar_written(o)
                       for o in op.operands)
        return False

    def typed_param(self, v: Value) -> str:
        """The pointer to tensor `v`'s root, cast to v's dtype where a view reads its bits as
        another (`x.view(torch.float8_e4m3fn)`: tensor.bitcast)."""
        name = self.tensor_param(v)
        t, r = v.type, root(v).type
        assert isinstance(t, TensorType) and isinstance(r, TensorType)
        return name if t.dtype == r.dtype else \
            f"{name}.to(tl.pointer_type({tl_dtype(t.dtype)}))"

    def tensor_param(self, v: Value) -> str:
        v = root(v)  # a view's pointer is its root tensor's (its strides are its own)
        if v not in self.params:
            hint = (v.hint or "out") + "_ptr"
            self.params[v] = KernelParam(self.namer.fresh(hint), "tensor", v)
        return self.params[v].name

    # ---- ranges ---------------------------------------------------------------------------
    def open_range(self, r: Value, begin: str, indent: int, lines: list[str],
                   stop: str | None = None, cuts: bool | None = None,
                   start: str | None = None) -> None:
        t = r.type
        assert isinstance(t, RangeType)
        block = t.block if isinstance(t.block, int) else self.blocks[t.block]
        label = r.hint or "t"
        block_expr = self.block_expr(t.block, label) if isinstance(t.block, str) else str(block)
        # A constant block's tiles are padded (as every constant dim is, block_expr): lane j of
        # a tile is valid when j < block and begin + j < extent (or the loop's runtime stop).
        padding = isinstance(t.block, int) and padded(block) != block
        # A runtime stop (at most the extent) cuts a tile unless the block divides it; `cuts`
        # says whether this loop's tiles are cut at all (False: whole tiles, split.py).
        ragged = cuts if cuts is not None else t.extent % block != 0
        rg = _Range(label, t.extent, block, block_expr, ragged or padding, padding, stop or "",
                    start or "")
        self.ranges[r] = rg
        rg.name = self.namer.fresh(label)
        lines.append(f"begin_{rg.name} = {begin}")
        if any(u.name != "tile.begin" for u in self.uses.get(r, [])):  # used as a vector
            width = str(padded(block)) if padding else block_expr
            offs, first = f"offs_{rg.name}", f"begin_{rg.name}"
            lines.append(f"{offs} = {first} + tl.arange(0, {width})")
            below = f"{offs} < {rg.limit}"
            if padding and ragged:
                below = f"{offs} < tl.minimum({first} + {block}, {rg.limit})"
            elif padding:
                below = f"{offs} < {first} + {block}"
            if start and ragged:  # lanes before a runtime start are out of range too
                below = f"({offs} >= {start}) & ({below})"
            if ragged or padding:
                lines.append(f"mask_{rg.name} = {below}")
        for line in lines:
            self.emit(indent, line)

    # ---- memory ---------------------------------------------------------------------------
    def address(self, op: Op, tensor: Value, indices: list[Value], rank: int,
                indent: int, group_tiles: bool = False) -> tuple[str, str | None]:
        """The pointer expression and the mask of `tensor[indices]` as a rank-`rank` tile
        (`group_tiles`: see `tile_pointer`)."""
        t = tensor.type
        assert isinstance(t, TensorType)
        strides = self.strides[tensor]
        full, sliced = op.attrs.get("full", ()), slices_of(op.attrs)
        wide = sum((padded(n) - 1) * abs(s) for n, s in zip(t.shape, strides)) > INT32_MAX
        axes = op_layout(op).axes if gathers(op) else None  # where each index's axes go
        terms, masks, conds = [], [], []  # conds: bounds of scalar indices (scalars)
        scalar_at: set[int] = set()  # which of `terms` are offsets of scalar indices
        block_offs: str | None = None  # one tile dimension's offsets, expanded to rank
        it = iter(indices)
        pos = 0
        for d, (extent, stride) in enumerate(zip(t.shape, strides)):
            if axes is not None and axes[d]:
                pos = axes[d][0]
            if d in full:
                part = sliced.get(d)
                offs, mask = self.const_offsets_for(part.size if part else extent, indent)
                offs = f"{offs}.to(tl.int64)" if wide else offs
                offs_e = self.expand(shift_rules.sliced(offs, part), pos, rank)
                block_offs = block_offs or offs_e
                if mask:
                    masks.append(self.expand(mask, pos, rank))
                pos += 1
            else:
                idx = next(it)
                if is_shifted(idx):  # x[tm + 1]: the tile's mask and the tensor's bounds
                    offs_e, bounds = shift_rules.shifted_offsets(self, idx, extent, wide)
                    offs_e = self.expand(offs_e, pos, rank)
                    block_offs = block_offs or offs_e
                    masks += [self.expand(m, pos, rank) for m in bounds]
                    pos += 1
                elif idx in self.ranges:
                    rg = self.ranges[idx]
                    offs = f"offs_{rg.name}.to(tl.int64)" if wide else f"offs_{rg.name}"
                    offs_e = self.expand(offs, pos, rank)
                    block_offs = block_offs or offs_e
                    if rg.ragged:
                        masks.append(self.expand(f"mask_{rg.name}", pos, rank))
                    pos += 1
                elif axes is not None and axes[d]:  # an index tile: a gather (ir/gathers.py)
                    offs_e = self.place(self.value(idx), axes[d], rank)
                    if wide:
                        offs_e = f"{offs_e}.to(tl.int64)"
                    block_offs = block_offs or offs_e
                    known = interval(idx, lanes=True)  # t.index arithmetic needs no check
                    if known is None or not 0 <= known[0] <= known[1] < extent:
                        masks.append(f"({offs_e} >= 0) & ({offs_e} < {extent})")
                else:
                    offs_e = self.value(idx)
                    if wide:
                        offs_e = f"{offs_e}.to(tl.int64)"
                    if not self.in_bounds(idx, extent):
                        conds.append(f"({offs_e} >= 0) & ({offs_e} < {extent})")
                    if stride != 0:
                        scalar_at.add(len(terms))
            if stride != 0:
                terms.append(offs_e if stride == 1 else f"{offs_e} * {stride}")
        offset = offset_of(tensor, self.strides[root(tensor)])  # a sliced view's start
        if offset:
            scalar_at = {0} | {i + 1 for i in scalar_at}
            terms.insert(0, str(offset))
        ptr = tile_pointer(self.typed_param(tensor), terms, scalar_at, group_tiles)
        if axes is None and block_offs is not None and len(scalar_at) == len(terms):
            # every tile dimension has stride 0 (a 0-d tensor expanded in host math): the
            # pointer is made a block, as a block mask needs one
            ptr = f"{ptr} + tl.zeros_like({block_offs})"
        if axes is not None and not self.spans(op, axes):
            ptr = f"tl.broadcast_to({ptr}, {self.shape(TileType(op_layout(op).shape, t.dtype))})"
        extra = access_parts(op)[1]  # td.load's mask, and an index tile's lanes in range
        if extra is not None:
            masks.append(self.value(extra))
        mask = " & ".join(masks) if masks else None
        if conds:
            # A scalar condition selects the tile's mask (`block & scalar` fails in Triton's
            # interpreter: "mask has unsupported dtype"; a select compiles the same), or the
            # user's mask of a scalar access (`td.load(x + pid - 1, mask=pid > 0)`).
            cond = " & ".join(conds)
            kept = mask or (f"{block_offs} >= 0" if block_offs is not None else None)
            mask = f"tl.where({cond}, {kept}, False)" if kept else cond
        return ptr, mask

    def spans(self, op: Op, axes: tuple[tuple[int, ...], ...]) -> bool:
        """Whether a gather's pointer terms reach every axis of its tile (index tiles with
        axes of 1 may leave one to the mask alone, and one written as a scalar, such as
        `td.zeros_like(i)`, leaves all of its axes)."""
        lay = op_layout(op)
        indices = iter(access_parts(op)[0])
        full = op.attrs.get("full", ())
        covered: set[int] = set()
        for d, where in enumerate(axes):
            idx = None if d in full else next(indices)
            if idx is not None and isinstance(idx.type, TileType):
                if not self.scalar_written(idx):
                    covered |= {a for a, n in zip(where, idx.type.shape) if n != 1}
            else:
                covered |= set(where)
        return all(a in covered or n == 1 for a, n in enumerate(lay.shape))

    def place(self, expr: str, axes: tuple[int, ...], rank: int) -> str:
        """A tile's expression with its axes at `axes` of a rank-`rank` tile (None elsewhere)."""
        if len(axes) == rank:
            return expr
        return f"{expr}[{', '.join(':' if i in axes else 'None' for i in range(rank))}]"

    def stride_of(self, op: Op, r: Value) -> int | None:
        """The stride of the dimension that load `op` indexes with range `r`, if its address is
        plain 32-bit arithmetic (not `wide`) a loop can advance; else None."""
        tensor = op.operands[0]
        t = tensor.type
        assert isinstance(t, TensorType)
        strides = self.strides[tensor]
        if sum((padded(n) - 1) * abs(s) for n, s in zip(t.shape, strides)) > INT32_MAX:
            return None
        full = op.attrs.get("full", ())
        it = iter(op.operands[1:])
        for d, stride in enumerate(strides):
            if d not in full and next(it) is r:
                return stride
        return None

    def descriptor(self, op: Op, tensor: Value, indices: list[Value]
                   ) -> tuple[str, str, tuple[int, ...] | None] | None:
        """A TMA tensor descriptor for this access, its coordinates, and the box's shape when
        scalar indices make it differ from the tile's (the tile is a reshape of the box), when
        the config asks for TMA and the access allows it: every dimension a tile, `:` or a
        scalar index that stays in range (a box of 1: attention's `k[b, tk, :]`), boxes of at
        most 256, 16-byte aligned strides with a contiguous last dimension, out-of-range reads
        of zero. A scalar index folds into the next dimension's rows where that is the same
        memory (boxes.py): `k[b, tk, :]` is a (BLOCK, d) box of a (batch*seq, d) descriptor."""
        t = tensor.type
        assert isinstance(t, TensorType)
        if not self.config.get("tma", False) or not 2 <= len(t.shape) <= 5 or \
                root(tensor) is not tensor:  # the launcher describes arguments, not views
            return None
        if op.name == "load" and op.attrs.get("other") not in (None, 0, 0.0, False):
            return None
        if op.attrs.get("mask") or gathers(op):
            return None  # a gather's addresses, and any mask, are not a box
        strides, size = self.strides[tensor], t.dtype.bits // 8
        if strides[-1] != 1 or any(s * size % 16 for s in strides[:-1]) or size == 0:
            return None
        full = op.attrs.get("full", ())
        it = iter(indices)
        dims: list[BoxDim] = []
        for d, (extent, stride) in enumerate(zip(t.shape, strides)):
            if d in full:
                if (part := slices_of(op.attrs).get(d)) is not None:
                    if part.step != 1 or padded(part.size) != part.size:
                        return None  # a box moves whole contiguous rows of a power of two
                    dims.append(BoxDim(extent, stride, part.size, str(part.start), False, True))
                    continue
                whole = padded(extent)
                dims.append(BoxDim(extent, stride, whole, "0", False, whole == extent))
                continue
            idx = next(it)
            if is_shifted(idx):
                return None  # shifted tiles take pointer loads (shift_rules.py)
            if idx not in self.ranges:
                if not self.in_bounds(idx, extent):
                    return None  # TMA would read zeros where the pointer path reads memory
                dims.append(BoxDim(extent, stride, 1, self.value(idx), True, True))
                continue
            rg = self.ranges[idx]
            if rg.padding:
                return None  # a box of the padded size would move the next tiles' elements
            if rg.ragged and (rg.limit != str(rg.extent) or rg.lower or rg.extent != extent):
                return None  # a box is cut at the tensor's edge, not at a runtime stop
            dims.append(BoxDim(extent, stride, rg.block, f"begin_{rg.name}", False,
                               not rg.ragged and rg.extent == extent))
        box = tuple(d.box for d in dims)
        if max(box) > 256 or box[-1] * size < 16:
            return None
        dims = fold(dims)
        box = tuple(d.box for d in dims)
        layout = (tuple(d.extent for d in dims), tuple(d.stride for d in dims))
        key = (tensor, box, layout)
        if key not in self.descriptors:
            name = self.namer.fresh(f"{tensor.hint or 'out'}_desc")
            folded = layout if len(dims) < len(t.shape) else None
            self.descriptors[key] = KernelParam(name, "desc", tensor, box=box, layout=folded)
        squeezed = any(d.scalar for d in dims)
        return self.descriptors[key].name, ", ".join(d.coord for d in dims), \
            box if squeezed else None

    def in_bounds(self, idx: Value, extent: int) -> bool:
        """`in_bounds`, and a counted loop's counter whose bounds lie in [0, extent)
        (`counters`: the softmax tutorial's `for row in tl.range(pid, n_rows, step)`)."""
        known = self.counters.get(idx)
        if known is not None:
            return 0 <= known[0] and known[1] < extent
        return in_bounds(idx, extent)

    # ---- ops ------------------------------------------------------------------------------
    def assign(self, op: Op, expr: str, indent: int) -> None:
        r = op.result
        name = self.preset.get(r) or self.namer.fresh(r.hint or _default_name(op))
        self.names[r] = name
        self.emit(indent, f"{name} = {expr}")

    def alias(self, op: Op, expr: str) -> None:
        self.names[op.result] = expr

    def only_implicit_uses(self, v: Value) -> bool:
        # (a load's or store's mask broadcasts to its pointer tile, which spans the access)
        return all(u.name in _IMPLICIT_BROADCAST or (u.name in ("load", "store") and
                                                      access_parts(u)[1] is v)
                   for u in self.uses.get(v, []))

    def op(self, op: Op, indent: int) -> None:
        """Write `op` by its rule in the rule table (oprules.py)."""
        if op in self.skipped:
            return
        if op in self.true_wheres:  # a prefix iteration: the condition holds on every lane
            self.alias(op, self.value(op.operands[1]))
            return
        rule = EMIT_RULES.get(op.name)
        if rule is None:
            raise BackendError(f"the triton backend has no rule for op '{op.name}'", loc=op.loc)
        args = [] if op.name in _NAMES_OWN_OPERANDS else [self.value(o) for o in op.operands]
        rule(self, op, args, indent)

    def const(self, op: Op, args: list[str], indent: int) -> None:
        rt = op.result.type
        assert isinstance(rt, TileType)
        value = op.attrs["value"]
        feeds = self.uses.get(op.result, [])
        if all(u.name == "broadcast" for u in feeds) or (
                rt.dtype.short in ("f32", "i32", "i1") and self.only_implicit_uses(op.result)):
            self.alias(op, literal(bool(value) if rt.dtype.is_bool else value))
        else:
            self.assign(op, f"tl.full([], {literal(value)}, {tl_dtype(rt.dtype)})", indent)

    def cast(self, op: Op, args: list[str], indent: int) -> None:
        rt = op.result.type
        assert isinstance(rt, TileType)
        src = op.operands[0]
        if self.scalar_types.get(src) == rt.dtype:
            self.alias(op, args[0])  # the launcher already passes it in this dtype
        else:
            number = src in self.params and src not in self.names
            self.assign(op, convert(args[0], src.type.dtype, rt.dtype,  # type: ignore[union-attr]
                                    number=number), indent)

    def broadcast(self, op: Op, args: list[str], indent: int) -> None:
        rt = op.result.type
        assert isinstance(rt, TileType)
        src = op.operands[0]
        if self.only_implicit_uses(op.result):
            self.alias(op, args[0])
        elif _constant(src) is True and all(  # only which lanes are in range (ragged.py)
                u.name == "mask" and self.mask_conds(u, indent) and u.attrs["value"] is False
                for u in self.uses.get(op.result, [])):
            self.alias(op, "True")
        elif src.owner is not None and src.owner.name == "const":
            value = literal(src.owner.attrs["value"])
            self.assign(op, f"tl.full({self.shape(rt)}, {value}, {tl_dtype(rt.dtype)})", indent)
        else:
            self.assign(op, f"tl.broadcast_to({args[0]}, {self.shape(rt)})", indent)

    def tile_value(self, op: Op, args: list[str], indent: int) -> None:
        """`t.index`, `t.begin` and `t.size` of an open range."""
        rg = self.ranges[op.operands[0]]
        if op.name == "tile.index":
            self.alias(op, f"offs_{rg.name}")
        elif op.name == "tile.begin":
            self.alias(op, f"begin_{rg.name}")
        else:
            size = f"tl.minimum({rg.block_expr}, {rg.limit} - begin_{rg.name})"
            if rg.lower:  # less the lanes before the start
                size += f" - tl.minimum(tl.maximum({rg.lower} - begin_{rg.name}, 0), " \
                        f"{rg.block_expr})"
            self.assign(op, size, indent)

    def load(self, op: Op, args: list[str], indent: int) -> None:
        rt = op.result.type
        assert isinstance(rt, TileType)
        if desc := self.descriptor(op, op.operands[0], op.operands[1:]):
            loaded = f"{desc[0]}.load([{desc[1]}])"
            if desc[2] is not None:  # the box's dimensions of 1 (scalar indices) dropped
                loaded = f"tl.reshape({loaded}, {self.shape(rt)})"
            self.assign(op, loaded, indent)
            return
        ptr, mask = self.address(op, op.operands[0], op.operands[1:], rt.rank, indent)
        ptr = self.pointers.get(op, ptr)  # advanced by its loop (loops.py carry_pointers)
        if mask is None:
            self.assign(op, f"tl.load({ptr}{_hints(op)})", indent)
            return
        other = op.attrs.get("other")
        if other is None and self.interpret:
            # A GPU leaves masked-off lanes undefined; the interpreter fills zeros, which
            # would hide a kernel that uses them. Poison them, as the NumPy backend does.
            other = dtypes.poison(rt.dtype)
        other_s = "" if other is None else f", other={literal(other)}"
        self.assign(op, f"tl.load({ptr}, mask={mask}{other_s}{_hints(op)})", indent)

    def store(self, op: Op, args: list[str], indent: int) -> None:
        value = op.operands[-1]
        vt = value.type
        assert isinstance(vt, TileType)
        if desc := self.descriptor(op, op.operands[0], op.operands[1:-1]):
            v = self.value(value)
            if (c := _constant(value)) is not None:  # a fill: a Python number has no shape
                v = f"tl.full({self.shape(vt)}, {literal(c)}, {tl_dtype(vt.dtype)})"
            elif value.owner is not None and value.owner.name == "broadcast":  # box-shaped
                v = f"tl.broadcast_to({v}, {self.shape(vt)})"
            if desc[2] is not None:
                v = f"tl.reshape({v}, {desc[2]})"
            self.emit(indent, f"{desc[0]}.store([{desc[1]}], {v})")
            return
        ptr, mask = self.address(op, op.operands[0], op.operands[1:-1], vt.rank, indent)
        mask_s = "" if mask is None else f", mask={mask}"
        self.emit(indent, f"tl.store({ptr}, {self.value(value)}{mask_s}{_hints(op)})")

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
        elif name == "neg":  # triton 3.6 negates floats as 0 - x: -(0.0) would be 0.0
            expr = f"{_paren(args[0])} * -1.0" if t.dtype.is_float else f"-{_paren(args[0])}"
        elif name == "not":
            expr = f"~{_paren(args[0])}"
        elif name in _CALL1:
            fn = _CALL1[name] + ("_f64" if name == "tanh" and t.dtype.short == "f64" else "")
            if fn.startswith("_"):
                self.helpers.add(fn)
            expr = f"{fn}({args[0]})"
        else:
            fn = _CALL2[name]
            if name in ("floordiv", "mod") and t.dtype.is_float:
                fn = f"{fn}_f"
                self.helpers.add(fn)
                expr = f"{fn}({args[0]}, {args[1]})"
            elif name == "pow" and (power := small_power(_paren(args[0]),
                                                         _constant(op.operands[1]))):
                expr = power
            elif name == "pow":  # libdevice's: both operands of the op's float dtype
                wide = "tl.float32" if upcast else tl_dtype(t.dtype)
                self.helpers.add("libdevice")  # the module imports it (codegen.py)
                expr = "libdevice.pow({}, {})".format(
                    *(f"tl.full((), {a}, {wide})" if _is_literal(a) else a for a in args))
            elif name in ("maximum", "minimum") and t.dtype.is_float:
                # NaN wins, as in NumPy (Triton's default returns the other operand).
                expr = f"{fn}({args[0]}, {args[1]}, propagate_nan=tl.PropagateNan.ALL)"
            else:
                if fn.startswith("_"):
                    self.helpers.add(fn)
                expr = f"{fn}({args[0]}, {args[1]})"
        if upcast and not rt.dtype.is_bool:
            expr = f"({expr}).to({tl_dtype(rt.dtype)})"
        self.assign(op, self.widened(op, expr), indent)

    def widened(self, op: Op, expr: str) -> str:
        """`expr`, an elementwise op's, at the op's own shape where no operand as written has
        it (the others broadcasts written as scalars): `v[None, :, None] + td.zeros((4, 2, 2))`
        is `v + 0` in Triton, of v's shape, which a reshape, a reduction or a store of its own
        shape cannot take. A scalar-written result whose uses all broadcast stays a scalar."""
        rt = op.result.type
        assert isinstance(rt, TileType)
        written = [self.written_shape(o) for o in op.operands]
        if rt.rank == 0 or _broadcast_shape(written) == rt.shape:
            return expr
        if self.scalar_written(op.result) and self.only_implicit_uses(op.result):
            return expr
        if all(w == () for w in written):  # (Python numbers, or scalar tensors)
            return f"tl.full({self.shape(rt)}, False, tl.int1) | ({expr})" \
                if rt.dtype.is_bool else f"tl.zeros({self.shape(rt)}, {tl_dtype(rt.dtype)}) + " \
                f"({expr})"
        return f"tl.broadcast_to({expr}, {self.shape(rt)})"

    def dot(self, op: Op, args: list[str], indent: int) -> None:
        a, b = (o.type for o in op.operands)
        rt = op.result.type
        assert isinstance(a, TileType) and isinstance(b, TileType) and isinstance(rt, TileType)
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        small = any(isinstance(d, int) and padded(d) < mma_min(a.dtype.bits, x)
                    for x, d in zip("mkn", (m, k, n)))
        if any(d == 1 for d in (m, k, n)) or not tl_dot_takes(a.dtype) or \
                (small and a.rank == 3):
            # A whole dimension of 1 (it broadcasts, so it is not padded) cannot feed tl.dot,
            # which needs 16, nor can int16, int32 or int64: multiply and sum instead,
            # accumulating in the dot's result dtype (exact for integers, as NumPy's matmul).
            if a.dtype != rt.dtype:
                args = [f"{x}.to({tl_dtype(rt.dtype)})" for x in args]
            lhs, rhs = (f"{args[0]}[:, :, None]", f"{args[1]}[None, :, :]") if a.rank == 2 else \
                (f"{args[0]}[:, :, :, None]", f"{args[1]}[:, None, :, :]")
            self.assign(op, f"tl.sum({lhs} * {rhs}, axis={a.rank - 1})", indent)
            return
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
        if small:
            self.small_dot(op, args, extra, indent)
            return
        users = self.uses.get(op.result, [])
        if len(users) == 1 and users[0].name == "add" and users[0].operands[1] is op.result \
                and users[0].operands[0].type == op.result.type \
                and not self.scalar_alias(users[0].operands[0]):
            # acc + a @ b -> tl.dot(a, b, acc): the accumulation stays in the MMA registers.
            self.fused[users[0]] = f"tl.dot({args[0]}, {args[1]}, {{acc}}{extra})"
            return
        self.assign(op, f"tl.dot({args[0]}, {args[1]}{extra})", indent)

    def scalar_alias(self, v: Value) -> bool:
        """Whether tile `v` is written as the scalar it broadcasts (`broadcast`'s alias, as a
        td.zeros accumulator before an unrolled loop): tl.dot cannot take it as its acc."""
        return v.owner is not None and v.owner.name == "broadcast" and \
            self.only_implicit_uses(v)

    def small_dot(self, op: Op, args: list[str], extra: str, indent: int) -> None:
        """tl.dot where a constant M, K or N is under 16 lanes: the operands widened with zero
        lanes to 16, the product cut back to M x N (widen.py)."""
        a, b = (o.type for o in op.operands)
        assert isinstance(a, TileType) and isinstance(b, TileType)
        dims = {"m": a.shape[0], "k": a.shape[1], "n": b.shape[1]}
        held = {x: self.block_expr(d) for x, d in dims.items()}
        need = {x: mma_min(a.dtype.bits, x) for x in dims}
        small = {x: padded(d) for x, d in dims.items()
                 if isinstance(d, int) and padded(d) < need[x]}
        wide = {x: str(need[x]) if x in small else held[x] for x in dims}
        lhs, rhs = args
        for axis, x in enumerate("mk"):
            if x in small:
                shape = [wide["m"] if axis == 1 else held["m"], held["k"]]
                lhs = widen(self, lhs, shape, axis, small[x], need[x], indent)
        for axis, x in enumerate("kn"):
            if x in small:
                shape = [wide["k"] if axis == 1 else held["k"], held["n"]]
                rhs = widen(self, rhs, shape, axis, small[x], need[x], indent)
        prod = self.namer.fresh("prod")
        self.emit(indent, f"{prod} = tl.dot({lhs}, {rhs}{extra})")
        for axis, x in enumerate("mn"):
            if x in small:
                shape = [held["m"] if axis == 1 else wide["m"], wide["n"]]
                prod = narrow(self, prod, shape, axis, need[x], small[x], indent)
        self.alias(op, prod)

    def reduce(self, op: Op, args: list[str], indent: int) -> None:
        x = op.operands[0].type
        rt = op.result.type
        assert isinstance(x, TileType) and isinstance(rt, TileType)
        kind = op.attrs["kind"]
        src = args[0] if x.dtype == rt.dtype else f"{args[0]}.to({tl_dtype(rt.dtype)})"
        if breaks_thread_locality(op, self.fn, self.uses):
            src = f"({src} + 0.0)"  # Triton 3.6 fails to compile this sum (workarounds.py)
        keep = ", keep_dims=True" if op.attrs["keepdims"] else ""
        fn = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}.get(kind)
        if kind in ARG_REDUCTIONS:
            self.arg_reduce(op, args[0], indent)
            return
        if kind in ("max", "min") and rt.dtype.is_float:
            # NaN wins, as in NumPy (tl.max and tl.min drop it on a GPU).
            self.helpers.add(f"_{kind}_nan")
            f32 = reduce_in_f32(rt.dtype)
            expr = f"tl.reduce({src}{'.to(tl.float32)' if f32 else ''}, {op.attrs['axis']}, " \
                   f"_{kind}_nan{keep})"
            self.assign(op, f"{expr}.to(tl.bfloat16)" if f32 else expr, indent)
            return
        if fn is None:  # mean (the pipeline lowers it; kept for completeness)
            n = x.shape[op.attrs["axis"]]
            count = self.block_expr(n) if isinstance(n, str) else str(n)
            self.assign(op, f"tl.sum({src}, axis={op.attrs['axis']}{keep}) / {count}", indent)
            return
        self.assign(op, f"{fn}({src}, axis={op.attrs['axis']}{keep})", indent)

    def arg_reduce(self, op: Op, src: str, indent: int) -> None:
        """argmax/argmin: a tuple reduction of (value, lane) with NumPy's rule (helpers.py)."""
        x = op.operands[0].type
        assert isinstance(x, TileType)
        axis, kind = op.attrs["axis"], op.attrs["kind"]
        self.helpers.add(f"_{kind}_nan")
        if reduce_in_f32(x.dtype):
            src = f"{src}.to(tl.float32)"
        lanes = self.namer.fresh("lanes")
        arange = self.expand(f"tl.arange(0, {self.block_expr(x.shape[axis])})", axis, x.rank)
        self.emit(indent, f"{lanes} = tl.broadcast_to({arange}, {self.shape(x)})")
        keep = ", keep_dims=True" if op.attrs["keepdims"] else ""
        self.assign(op, f"tl.reduce(({src}, {lanes}), {axis}, _{kind}_nan{keep})[1]", indent)

    def mask_conds(self, op: Op, indent: int) -> list[str]:
        """The conditions a `mask` op selects with: the masks of its ragged or padded axes."""
        t = op.operands[0].type
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
        return conds

    def mask(self, op: Op, indent: int) -> None:
        x = op.operands[0]
        t = x.type
        assert isinstance(t, TileType)
        conds = self.mask_conds(op, indent)
        if not conds:
            self.alias(op, self.value(x))
            return
        if _constant(x) is True and op.attrs["value"] is False:  # which lanes are in range
            self.alias(op, " & ".join(conds))
            return
        if t.dtype.is_bool and op.attrs["value"] is False:  # where(c, x, False) is c & x
            self.assign(op, " & ".join([self.value(x)] + conds), indent)
            return
        self.assign(op, f"tl.where({' & '.join(conds)}, {self.value(x)}, "
                        f"{literal(op.attrs['value'])})", indent)

    def block(self, block: Block, indent: int) -> None:
        for op in block.ops:  # a loop's initial value is made under its carried name
            if op.name in PREPARE_RULES:
                PREPARE_RULES[op.name](self, op)
            if op.name == "for":
                stop = loop_stop(op)
                if stop is not None and stop.owner in block.ops and not clamped_stop(op):
                    label = op.regions[0].args[0].hint or "k"
                    self.preset.setdefault(stop, self.namer.fresh(f"stop_{label}"))
                for init, res in zip(loop_inits(op), op.results):
                    name = self.carried_names[res] = self.namer.fresh(res.hint)
                    if init.owner in block.ops and len(self.uses.get(init, [])) == 1 and \
                            not self.scalar_written(init):  # (full_value widens those)
                        self.preset.setdefault(init, name)
        for op in block.ops:
            if op.name == "yield":
                continue
            if op in self.barriers:  # barriers.py
                self.emit(indent, "tl.debug_barrier()")
            if op in self.fused:  # (an acc written as a scalar, `0.0 * s`, widened to its tile)
                acc = self.full_value(op.operands[0])
                self.assign(op, self.fused[op].format(acc=acc), indent)
                continue
            self.op(op, indent)



def _hints(op: Op) -> str:
    """An access's cache hints (td.load's `eviction_policy=`, `cache_modifier=`, `volatile=`)
    as keywords."""
    return "".join(f", {k}={op.attrs[k]!r}" for k in ("cache_modifier", "eviction_policy",
                                                        "volatile") if op.attrs.get(k))


def _broadcast_shape(shapes: list[tuple]) -> tuple:
    """The shape Triton broadcasts expressions of `shapes` to (NumPy's rule)."""
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s, rank - len(s)):
            if d != 1:
                out[i] = d
    return tuple(out)


def _default_name(op: Op) -> str:
    if op.name == "load":
        return f"{op.operands[0].hint or 'x'}_tile"
    if op.name == "reduce":
        return f"{op.attrs['kind']}_{op.attrs['axis']}"
    return {"dot": "prod", "tile.size": "size", "mask": "masked", "transpose": "trans"}.get(
        op.name, "tmp")


def _constant(v: Value) -> Any:
    """The value of a constant, possibly broadcast, else None (the NumPy backend's
    executor.py decides `x ** 0.5` the same way)."""
    while v.owner is not None and v.owner.name == "broadcast":
        v = v.owner.operands[0]
    return v.owner.attrs["value"] if v.owner is not None and v.owner.name == "const" else None


def tile_pointer(base: str, terms: list[str], scalar_at: set[int], group_tiles: bool) -> str:
    """`base + terms` (the offsets by dimension); with `group_tiles` and a scalar index, `base
    + scalar offsets + (tile offsets)`: the tile's offsets summed as integers before one
    pointer add, as hand-written kernels write `k_ptr + (base + offs_n[:, None] * stride +
    ...)`. Loops ask for it for the pointer tiles they hoist where two loads share their
    offsets (loops.py `same_offsets`). Under triton 3.9, causal attention's K and V pointers,
    added term by term, took 64-bit adds for half their rows on every key tile (128x64, d64,
    8 warps, sm_90: 296 SASS instructions against the hand-written kernel's 293; grouped:
    292; d128: 357 -> 351 against 352; triton 3.6 unchanged). Everywhere (GEMM, norms, q's
    load) it was worse: the 128x256x64 GEMM's K loop went from 86 to 92 under triton 3.6."""
    scalars = [t for i, t in enumerate(terms) if i in scalar_at]
    tiles = [t for i, t in enumerate(terms) if i not in scalar_at]
    if group_tiles and scalars and len(tiles) > 1:
        return " + ".join([base] + scalars) + f" + ({' + '.join(tiles)})"
    return " + ".join([base] + terms)


def _is_literal(expr: str) -> bool:
    return bool(re.fullmatch(r"-?[\d.e+-]+|True|False|-?float\(\"\w+\"\)", expr))


def _paren(expr: str) -> str:
    return expr if re.fullmatch(r"[\w.\[\]:, ()]+", expr) and " " not in expr.strip() else f"({expr})"


# The emitter's own rules: the ops that share its state (names, ranges, masks, loops). Other
# ops' rules live with their kind (shape_rules.py, shift_rules.py, branch_rules.py).
for _name in (*BINARY, *COMPARE, *UNARY):  # those without a rule of their own (math_rules.py)
    EMIT_RULES.setdefault(_name, KernelEmitter.elementwise)
EMIT_RULES.update({
    "const": KernelEmitter.const, "cast": KernelEmitter.cast,
    "broadcast": KernelEmitter.broadcast, "dot": KernelEmitter.dot,
    "reduce": KernelEmitter.reduce, "load": KernelEmitter.load, "store": KernelEmitter.store,
    "tile.index": KernelEmitter.tile_value, "tile.begin": KernelEmitter.tile_value,
    "tile.size": KernelEmitter.tile_value,
    "mask": lambda em, op, args, indent: em.mask(op, indent),
    "for": lambda em, op, args, indent: em.loop(op, indent),
})
