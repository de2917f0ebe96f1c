"""Triton rules of `scan`, `fold` and `sort` (tiledsl/lang/scans.py defines what they mean).

A scan is `tl.associative_scan`, a fold `tl.reduce`, with the combine region written as a
`@triton.jit` function of the module. Where some lanes are out of range (the `masked` operand),
a flag rides along: an out-of-range lane acts as the combine's identity, and a fold's row whose
flag stays 0 takes the op's `empty` value.

A sort is `tl.sort` (a bitonic sort, along the last axis: others are permuted there and back)
of one int64 per lane that packs, from the top: whether the lane is out of range, a key that
orders as NumPy orders the values (a float's bits with the negative ones flipped; NaN after
inf; -0.0 as 0.0; reversed for descending), and the lane's position, which breaks ties so the
sort is stable. `tl.topk` (triton 3.6 and 3.9) takes the best k the same way. The values come
back from the keys, so a sorted -0.0 reads 0.0 and NaNs lose their payload. A 64-bit value
leaves no room for the rest: a BackendError.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from lowering.backends.triton.casts import literal, tl_dtype
from lowering.backends.triton.oprules import emit_rule
from lowering.backends.triton.widen import next_pow2, padded
from tiledsl import dtypes
from tiledsl.errors import BackendError
from tiledsl.ir.core import Op
from tiledsl.ir.types import TileType

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


def _combine_function(em: KernelEmitter, op: Op, masked: bool) -> str:
    """The combine region as a module-level `@triton.jit` function; returns its name."""
    region = op.regions[0]
    n = op.attrs["n"]
    params = [em.namer.fresh(a.hint or "v") for a in region.args]
    for a, p in zip(region.args, params):
        em.names[a] = p
    outer, em.lines = em.lines, []
    try:
        for inner in region.ops[:-1]:
            em.op(inner, 1)
        body = em.lines
    finally:
        em.lines = outer
    outs = [em.value(v) for v in region.ops[-1].operands]
    if masked:  # flags: an out-of-range lane (flag 0) leaves the other side as it is
        fa, fb = em.namer.fresh("valid_a"), em.namer.fresh("valid_b")
        a, b = params[:n], params[n:]
        params = a + [fa] + b + [fb]
        body.append(f"    both = ({fa} & {fb}) != 0")
        outs = [f"tl.where(both, {c}, tl.where({fb} != 0, {y}, {x}))"
                for c, x, y in zip(outs, a, b)] + [f"{fa} | {fb}"]
    text = "\n".join(body + [f"    return {', '.join(outs)}"])
    name = "_combine_" + hashlib.sha256(text.encode()).hexdigest()[:8]
    em.functions[name] = f"@triton.jit\ndef {name}({', '.join(params)}):\n{text}\n"
    return name


def _operands(em: KernelEmitter, op: Op, args: list[str]) -> tuple[str, str, bool]:
    """A scan's or fold's combine function, its input (a tile or a tuple, with the in-range
    flags last where some lanes are out of range) and whether it is masked."""
    n, masked = op.attrs["n"], bool(op.attrs.get("masked"))
    fn = _combine_function(em, op, masked)
    t = op.operands[0].type
    assert isinstance(t, TileType)
    # (the in-range lanes may be held as a mask of fewer axes, which tl.where would broadcast)
    inputs = args[:n] + ([f"tl.broadcast_to({args[n]}.to(tl.int32), {em.shape(t)})"]
                         if masked else [])
    return fn, inputs[0] if len(inputs) == 1 else f"({', '.join(inputs)},)", masked


@emit_rule("scan")
def _scan(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    fn, src, masked = _operands(em, op, args)
    reverse = ", reverse=True" if op.attrs["reverse"] else ""
    names = [em.namer.fresh(r.hint or "scan") for r in op.results]
    for r, name in zip(op.results, names):
        em.names[r] = name
    targets = ", ".join(names + (["_"] if masked else []))
    em.emit(indent, f"{targets} = tl.associative_scan({src}, {op.attrs['axis']}, {fn}{reverse})")


@emit_rule("fold")
def _fold(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    fn, src, masked = _operands(em, op, args)
    keep = ", keep_dims=True" if op.attrs["keepdims"] else ""
    names = [em.namer.fresh(r.hint or "fold") for r in op.results]
    flag = em.namer.fresh("any_valid") if masked else None
    targets = ", ".join(names + ([flag] if flag else []))
    em.emit(indent, f"{targets} = tl.reduce({src}, {op.attrs['axis']}, {fn}{keep})")
    for r, name, empty in zip(op.results, names, op.attrs["empty"]):
        if flag:  # a row with no lane in range
            dtype = r.type.dtype  # type: ignore[union-attr]
            em.emit(indent, f"{name} = tl.where({flag} != 0, {name}, "
                            f"{literal(empty)}).to({tl_dtype(dtype)})")
        em.names[r] = name


def _key_bits(op: Op, t: TileType) -> int:
    bits = 1 if t.dtype.is_bool else t.dtype.bits
    if bits > 32:
        raise BackendError(f"the triton backend sorts tiles of up to 32 bits, not {t.dtype} "
                           "(its sort key and position share one int64)", loc=op.loc,
                           hint="cast to float32 or int32 to sort")
    return bits


def _encode(em: KernelEmitter, op: Op, x: str, valid: str | None, s: str, lanes: int,
            position_bits: int, indent: int) -> None:
    """`{s}` = the packed int64 keys of `x` (see the module docstring)."""
    t = op.operands[0].type
    assert isinstance(t, TileType)
    d, bits = t.dtype, _key_bits(op, t)
    half = 1 << (bits - 1)
    if d.is_float:
        xf = x if d.bits == 32 else f"{x}.to(tl.float32)"  # (the interpreter compares bf16 bits)
        em.emit(indent, f"{s} = {x}.to(tl.int{bits}, bitcast=True).to(tl.int64)")
        em.emit(indent, f"{s} = tl.where({s} >= 0, {s} + {half}, ~{s})  # ordered as the values")
        em.emit(indent, f"{s} = tl.where({xf} == 0, {half}, {s})  # -0.0 ties 0.0")
        inf = (0xFF << 23 if bits == 32 else 0x1F << 10 if d.short == "f16" else 0xFF << 7)
        em.emit(indent, f"{s} = tl.where({xf} != {xf}, {half + inf + 1}, {s})  # NaN after inf")
    else:
        em.emit(indent, f"{s} = {x}.to(tl.int64)" + (f" + {half}" if d.is_int else ""))
    if op.attrs["descending"]:
        em.emit(indent, f"{s} = {(1 << bits) - 1} - {s}")
    if valid is not None:
        em.emit(indent, f"{s} = tl.where({valid}, {s}, {1 << bits})  # out of range: last")
    if position_bits:
        lane = em.expand(f"tl.arange(0, {lanes})", op.attrs["axis"], t.rank)
        em.emit(indent, f"{s} = ({s} << {position_bits}) | {lane}  # ties: the first lane first")


def _decode(em: KernelEmitter, op: Op, s: str, position_bits: int, masked: bool,
            indent: int) -> None:
    t = op.operands[0].type
    assert isinstance(t, TileType)
    d, bits = t.dtype, _key_bits(op, t)
    half = 1 << (bits - 1)
    key = em.namer.fresh(f"{s}_key")
    em.emit(indent, f"{key} = ({s} >> {position_bits}) & {(1 << bits) - 1}")
    if op.attrs["descending"]:
        em.emit(indent, f"{key} = {(1 << bits) - 1} - {key}")
    if d.is_float:
        em.emit(indent, f"{key} = tl.where({key} >= {half}, {key} - {half}, ~{key})")
        value = f"{key}.to(tl.int{bits}).to({tl_dtype(d)}, bitcast=True)"
    elif d.is_int:
        value = f"({key} - {half}).to({tl_dtype(d)})"
    else:
        value = f"{key} != 0"
    out = op.results[0]
    fill = dtypes.identity("max" if op.attrs["descending"] else "min", d)
    oor = f"({s} >> {bits + position_bits}) != 0"
    em.names[out] = em.namer.fresh(out.hint or "sorted")
    em.emit(indent, f"{em.names[out]} = " +
            (f"tl.where({oor}, {literal(fill)}, {value})" if masked else value))
    if len(op.results) == 2:
        pos = f"({s} & {(1 << position_bits) - 1}).to(tl.int32)"
        em.names[op.results[1]] = em.namer.fresh(op.results[1].hint or "positions")
        em.emit(indent, f"{em.names[op.results[1]]} = " +
                (f"tl.where({oor}, -1, {pos})" if masked else pos))


@emit_rule("sort")
def _sort(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    t = op.operands[0].type
    assert isinstance(t, TileType)
    axis, k, rank = op.attrs["axis"], op.attrs.get("k"), t.rank
    dim = t.shape[axis]
    lanes = padded(dim) if isinstance(dim, int) else em.block_of(dim)
    position_bits = (lanes - 1).bit_length() if op.attrs.get("positions") else 0
    if 1 + _key_bits(op, t) + position_bits > 63:
        raise BackendError(f"cannot sort {lanes} lanes of {t.dtype} in one int64", loc=op.loc)
    s = em.namer.fresh("order")
    masked = bool(op.attrs.get("masked"))
    _encode(em, op, args[0], args[1] if masked else None, s, lanes, position_bits, indent)
    perm = [a for a in range(rank) if a != axis] + [axis]
    if axis != rank - 1:
        em.emit(indent, f"{s} = tl.permute({s}, {tuple(perm)})")
    if k is None:
        em.emit(indent, f"{s} = tl.sort({s})")
    else:  # the k smallest keys, smallest first: tl.topk takes the largest, so negate
        em.emit(indent, f"{s} = ~tl.topk(~{s}, {next_pow2(k)})")
    if axis != rank - 1:
        back = tuple(perm.index(a) for a in range(rank))
        em.emit(indent, f"{s} = tl.permute({s}, {back})")
    _decode(em, op, s, position_bits, masked, indent)
