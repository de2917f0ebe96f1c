"""Inline PTX on NumPy arrays: what `td.inline_asm_elementwise` (Triton's
`tl.inline_asm_elementwise`) computes on the NumPy backend and under Triton's interpreter.

The generated Triton passes the assembly to the GPU as written. On the CPU, the straight-line
scalar PTX such kernels write runs here (mamba3's `tanh.approx.f32`, `sin.approx.f32` and
`cos.approx.f32`; flash-linear-attention's softplus, a `setp` and `@p` / `@!p` guarded `ex2`,
`add` and `lg2`; Triton's own examples' packed bytes):

- Instructions: mov, add, sub, mul (`.lo`, `.wide` on ints), mad and fma, div, neg, abs, min,
  max, ex2, lg2, sin, cos, tanh, rcp, sqrt, rsqrt, setp, selp, cvt, and, or, xor, not, shl
  and shr, on f16, bf16, f32, f64 (and the pairs f16x2, bf16x2, f32x2), signed, unsigned and
  untyped ints and predicates; `.reg` declarations (`tmp<4>`), `{ }` scopes, `{a, b}` vector
  operands of mov, `_` sinks and `//` comments. `.approx` math is the exact function rounded
  to the type (a GPU's is within a few units in the last place); `.ftz` flushes subnormal
  float32 inputs and results to zero; `.sat` clamps to [0, 1]. Anything else is a PtxError
  naming the instruction.
- Registers, as Triton passes them: one instance of the assembly takes `pack` elements of
  each operand. An element of 32 bits or more is a register of its own; narrower ones are
  packed, min(32 // bits, pack) to a register, the first in the low bits. `$0...` are the
  outputs' registers, then each input's, in order. A register holds bits (uint64 here); an
  instruction reads them as its type.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import ml_dtypes
import numpy as np

from lowering.backends.numpy.executor import Executor, rule
from tiledsl.errors import BackendError
from tiledsl.ir.core import Op
from tiledsl.lang.inline_asm import register_count


class PtxError(Exception):
    """Assembly this module does not run (the message names the instruction)."""


TYPES: dict[str, tuple[int, Any, int]] = {  # name: (bits, NumPy dtype of a lane, lanes)
    "pred": (1, np.bool_, 1),
    "f16": (16, np.float16, 1), "bf16": (16, ml_dtypes.bfloat16, 1), "f32": (32, np.float32, 1),
    "f64": (64, np.float64, 1), "f16x2": (32, np.float16, 2),
    "bf16x2": (32, ml_dtypes.bfloat16, 2), "f32x2": (64, np.float32, 2),
    "e4m3x2": (16, ml_dtypes.float8_e4m3fn, 2), "e5m2x2": (16, ml_dtypes.float8_e5m2, 2),
    **{f"{k}{b}": (b, np.dtype(f"{'i' if k == 's' else 'u'}{b // 8}").type, 1)
       for k in "sub" for b in (8, 16, 32, 64)},
}
_MASK = {b: np.uint64((1 << b) - 1) for b in (1, 8, 16, 32)} | {64: np.uint64(2**64 - 1)}
_ROUNDING = {"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "rna"}


def run(asm: str, args: list[np.ndarray], dtypes: list[np.dtype], pack: int) -> list[np.ndarray]:
    """The outputs (of `dtypes`) of `asm` over `args` (broadcast to one shape), `pack`
    elements per instance."""
    data = np.broadcast_arrays(*args) if args else [np.zeros(())]
    shape, n = data[0].shape, data[0].size
    instances = -(-max(n, 1) // pack)
    machine = _Machine(instances)
    outs = [_operand_regs(np.dtype(d), pack) for d in dtypes]
    number = 0
    for per, width, count in outs:
        for _ in range(count):
            machine.declare(f"${number}", width)
            number += 1
    for a in data:
        per, width, count = _operand_regs(a.dtype, pack)
        lanes = _lanes(a.reshape(-1), instances * pack).reshape(instances, pack)
        for r in range(count):
            machine.regs[f"${number}"] = _packed(lanes[:, r * per:(r + 1) * per], width // per)
            machine.widths[f"${number}"] = width
            number += 1
    for line in _statements(asm):
        machine.execute(line)
    results, number = [], 0
    for d, (per, width, count) in zip(dtypes, outs):
        parts = [_unpacked(machine.read_bits(f"${number + r}"), per, np.dtype(d))
                 for r in range(count)]
        number += count
        flat = np.concatenate(parts, axis=1).reshape(-1)[:n]
        results.append(flat.reshape(shape))
    return results


def _operand_regs(dtype: np.dtype, pack: int) -> tuple[int, int, int]:
    """(elements per register, register bits, registers per instance) of an operand."""
    bits = dtype.itemsize * 8
    count = register_count(bits, pack)
    per = -(-pack // count)
    return per, per * bits, count


def _lanes(flat: np.ndarray, size: int) -> np.ndarray:
    """`flat` padded with zeros to `size` elements, as their bits (unsigned ints)."""
    bits = np.dtype(f"u{flat.dtype.itemsize}")
    out = np.zeros(size, dtype=bits)
    out[:flat.size] = flat.view(bits) if flat.dtype != np.bool_ else flat.astype(bits)
    return out


def _packed(lanes: np.ndarray, bits: int) -> np.ndarray:
    """Lanes (instances x n, unsigned ints of `bits`) packed into one register each, the first
    in the low bits."""
    out = np.zeros(lanes.shape[0], dtype=np.uint64)
    for j in range(lanes.shape[1]):
        out |= lanes[:, j].astype(np.uint64) << np.uint64(j * bits)
    return out


def _unpacked(reg: np.ndarray, n: int, dtype: np.dtype) -> np.ndarray:
    """A register's `n` elements (instances x n) of `dtype`, the first from the low bits."""
    bits = dtype.itemsize * 8
    lanes = [(reg >> np.uint64(j * bits)) & _MASK[bits] for j in range(n)]
    ints = np.stack(lanes, axis=1).astype(np.dtype(f"u{dtype.itemsize}"))
    return ints.astype(np.bool_) if dtype == np.bool_ else ints.view(dtype)


def _statements(asm: str) -> list[str]:
    """The instructions and declarations of `asm`, without comments and scope braces."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", asm, flags=re.S)
    out, current = [], ""
    for c in text:
        if c == ";":
            out.append(current.strip())
            current = ""
        elif c in "{}" and not current.strip():
            continue  # a scope: its registers are the asm's (names do not repeat in practice)
        else:
            current += c
    if current.strip():
        raise PtxError(f"'{current.strip()}' does not end with ';'")
    return [s for s in out if s]


class _Machine:
    """Registers (bits, per instance) and the instructions that change them."""

    def __init__(self, instances: int) -> None:
        self.instances = instances
        self.regs: dict[str, np.ndarray] = {}
        self.widths: dict[str, int] = {}

    def declare(self, name: str, width: int) -> None:
        self.regs[name] = np.zeros(self.instances, dtype=np.uint64)
        self.widths[name] = width

    def execute(self, line: str) -> None:
        if line.startswith(".reg"):
            self._declaration(line)
            return
        guard = None
        if line.startswith("@"):
            head, _, line = line.partition(" ")
            negate = head.startswith("@!")
            guard = self.read(head[2 if negate else 1:], "pred")
            guard = ~guard if negate else guard
            line = line.strip()
        opcode, _, rest = line.partition(" ")
        operands = _split(rest)
        parts = opcode.split(".")
        rule = _RULES.get(parts[0])
        if rule is None:
            raise PtxError(f"'{opcode}' is not an instruction tiledsl runs on the CPU")
        try:
            rule(self, parts[1:], operands, guard)
        except (KeyError, IndexError, ValueError) as e:
            raise PtxError(f"'{line}': {e}") from None

    def _declaration(self, line: str) -> None:
        words = line.replace(",", " ").split()
        kind = words[1].lstrip(".")
        width = TYPES[kind][0] if kind in TYPES else None
        if width is None:
            raise PtxError(f"'{line}': a register of type .{kind}")
        for name in words[2:]:
            m = re.fullmatch(r"(\w+)<(\d+)>", name)
            for full in ([f"{m[1]}{i}" for i in range(int(m[2]))] if m else [name]):
                self.declare(full, width)

    # ---- operands -----------------------------------------------------------------------
    def read_bits(self, name: str) -> np.ndarray:
        if name not in self.regs:
            raise PtxError(f"register {name} is read before it is written or declared")
        return self.regs[name]

    def read(self, operand: str, kind: str) -> np.ndarray:
        """`operand` (a register or an immediate) as an array of type `kind`: (instances,)
        or (instances, lanes) for the pairs."""
        bits, dtype, lanes = TYPES[kind]
        if operand.startswith("{"):
            return self._view(self._pack(operand, bits), kind)
        if operand in self.regs:
            return self._view(self.regs[operand], kind)
        return np.full((self.instances,) + ((lanes,) if lanes > 1 else ()), _immediate(operand),
                       dtype=dtype)

    def _view(self, reg: np.ndarray, kind: str) -> np.ndarray:
        _, dtype, lanes = TYPES[kind]
        if kind == "pred":
            return reg.astype(np.bool_)
        out = _unpacked(reg, lanes, np.dtype(dtype))
        return out[..., 0] if lanes == 1 else out

    def write(self, operand: str, kind: str, value: np.ndarray, guard: np.ndarray | None) -> None:
        bits, dtype, lanes = TYPES[kind]
        value = np.asarray(value)
        if kind == "pred":
            reg = value.astype(np.uint64)
        else:
            per_lane = bits // lanes
            ints = value.astype(dtype).view(np.dtype(f"u{per_lane // 8}"))
            reg = _packed(ints.reshape(self.instances, lanes), per_lane)
        if operand.startswith("{"):
            self._unpack(operand, reg, bits, guard)
            return
        if operand == "_":
            return
        if operand not in self.regs:
            raise PtxError(f"register {operand} is written but not declared")
        self.regs[operand] = reg if guard is None else np.where(guard, reg, self.regs[operand])

    def _pack(self, vector: str, bits: int) -> np.ndarray:
        names = _split(vector[1:-1])
        each = bits // len(names)
        out = np.zeros(self.instances, dtype=np.uint64)
        for j, name in enumerate(names):
            out |= (self.read_bits(name) & _MASK[each]) << np.uint64(j * each)
        return out

    def _unpack(self, vector: str, reg: np.ndarray, bits: int, guard: np.ndarray | None) -> None:
        names = _split(vector[1:-1])
        each = bits // len(names)
        for j, name in enumerate(names):
            if name != "_":
                part = (reg >> np.uint64(j * each)) & _MASK[each]
                self.regs[name] = part if guard is None else np.where(guard, part,
                                                                      self.read_bits(name))


def _split(text: str) -> list[str]:
    """Comma-separated operands, a `{...}` vector one operand."""
    out, depth, current = [], 0, ""
    for c in text:
        depth += (c == "{") - (c == "}")
        if c == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += c
    return out + [current.strip()] if current.strip() else out


def _immediate(text: str) -> float | int:
    """A PTX literal: `1.5`, `20.`, `0f3F800000` (float32 bits), `0d...` (float64 bits),
    `0x1F`, `-3`."""
    t = text.strip()
    sign = -1 if t.startswith("-") else 1
    t = t.lstrip("+-")
    if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", t):
        return sign * float(np.uint32(int(t[2:], 16)).view(np.float32))
    if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", t):
        return sign * float(np.uint64(int(t[2:], 16)).view(np.float64))
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", t):
        return sign * int(t, 16)
    if re.fullmatch(r"\d+", t):
        return sign * int(t)
    if re.fullmatch(r"(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", t):
        return sign * float(t)
    raise ValueError(f"'{text}' is not a register or a literal")


# ---- instructions ---------------------------------------------------------------------------
Rule = Callable[[_Machine, list[str], list[str], "np.ndarray | None"], None]
_RULES: dict[str, Rule] = {}


def _rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for n in names:
            _RULES[n] = fn
        return fn
    return register


def _kind(mods: list[str]) -> str:
    """The instruction's (last) type modifier."""
    kinds = [m for m in mods if m in TYPES]
    if not kinds:
        raise ValueError("no type")
    return kinds[-1]


def _flush(x: np.ndarray, mods: list[str]) -> np.ndarray:
    """`.ftz`: subnormal float32 values to zero (keeping the sign)."""
    if "ftz" not in mods or x.dtype != np.float32:
        return x
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x).astype(np.float32)


def _float_math(fn: Callable[..., np.ndarray]) -> Rule:
    def apply(m: _Machine, mods: list[str], ops: list[str], guard: np.ndarray | None) -> None:
        kind = _kind(mods)
        xs = [_flush(m.read(o, kind), mods) for o in ops[1:]]
        with np.errstate(all="ignore"):
            wide = [x.astype(np.float32) if x.dtype.itemsize < 4 else x for x in xs]
            out = np.asarray(fn(*wide)).astype(TYPES[kind][1])
        if "sat" in mods:
            out = np.clip(np.nan_to_num(out, nan=0.0), 0, 1).astype(out.dtype)
        m.write(ops[0], kind, _flush(out, mods), guard)
    return apply


for _name, _fn in {"ex2": np.exp2, "lg2": np.log2, "sin": np.sin, "cos": np.cos,
                   "tanh": np.tanh, "rcp": lambda x: 1 / x, "sqrt": np.sqrt,
                   "rsqrt": lambda x: 1 / np.sqrt(x)}.items():
    _RULES[_name] = _float_math(_fn)


_FLOATS = (np.float16, np.float32, np.float64, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
           ml_dtypes.float8_e5m2)


def _is_float(kind: str) -> bool:
    return TYPES[kind][1] in _FLOATS


def _wrap(values: np.ndarray, kind: str) -> np.ndarray:
    """Integers as `kind`, modulo its width (two's complement)."""
    bits, dtype, _ = TYPES[kind]
    ints = np.asarray(values)
    ints = ints.astype(np.int64).astype(np.uint64) if ints.dtype.kind == "i" else \
        ints.astype(np.uint64)
    return (ints & _MASK[bits]).astype(np.dtype(f"u{bits // 8}")).view(dtype)


def _truncated(a: np.ndarray, b: np.ndarray, remainder: bool) -> np.ndarray:
    """C's integer division (toward zero) or remainder; by zero, -1 and a (PTX leaves it
    undefined)."""
    a, b = a.astype(np.int64), b.astype(np.int64)
    q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
    q = np.where((a < 0) != (b < 0), -q, q)
    q = np.where(b == 0, -1, q)
    return np.where(b == 0, a, a - b * q) if remainder else q


def _arith(float_fn: Callable[..., np.ndarray] | None,
           int_fn: Callable[..., np.ndarray] | None) -> Rule:
    def apply(m: _Machine, mods: list[str], ops: list[str], guard: np.ndarray | None) -> None:
        kind = _kind(mods)
        if _is_float(kind) and float_fn is not None:
            _float_math(float_fn)(m, mods, ops, guard)
            return
        if _is_float(kind) or int_fn is None:
            raise ValueError(f"not on .{kind}")
        xs = [m.read(o, kind).astype(np.int64 if kind[0] == "s" else np.uint64) for o in ops[1:]]
        with np.errstate(all="ignore"):
            m.write(ops[0], kind, _wrap(int_fn(*xs), kind), guard)
    return apply


def _fused(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c rounded once (in float64, where a float32 product is exact)."""
    return a.astype(np.float64) * b + c


_RULES.update({
    "add": _arith(np.add, np.add), "sub": _arith(np.subtract, np.subtract),
    "div": _arith(np.divide, lambda a, b: _truncated(a, b, False)),
    "rem": _arith(None, lambda a, b: _truncated(a, b, True)),
    "neg": _arith(np.negative, lambda a: -a.astype(np.int64)), "abs": _arith(np.abs, np.abs),
    "min": _arith(np.fmin, np.minimum), "max": _arith(np.fmax, np.maximum),
    "fma": _arith(_fused, None),
    "and": _arith(None, np.bitwise_and), "or": _arith(None, np.bitwise_or),
    "xor": _arith(None, np.bitwise_xor), "not": _arith(None, np.invert),
})


def _mul_rule(fused: bool) -> Rule:
    """`mul` and `mad` (`.lo` by default on ints; `.hi`, `.wide` the high half and the
    double-width product)."""
    def apply(m: _Machine, mods: list[str], ops: list[str], guard: np.ndarray | None) -> None:
        kind = _kind(mods)
        if _is_float(kind):
            _float_math(_fused if fused else np.multiply)(m, mods, ops, guard)
            return
        bits = TYPES[kind][0]
        xs = [m.read(o, kind).astype(np.int64 if kind[0] == "s" else np.uint64) for o in ops[1:]]
        with np.errstate(all="ignore"):
            product = xs[0] * xs[1]
            if "hi" in mods and bits <= 32:
                product = product >> product.dtype.type(bits)
            elif "hi" in mods:
                raise ValueError("mul.hi of 64-bit ints")
            out = product + xs[2].astype(product.dtype) if fused else product
        m.write(ops[0], f"{kind[0]}{bits * 2}" if "wide" in mods else kind,
                _wrap(out, f"{kind[0]}{bits * 2}" if "wide" in mods else kind), guard)
    return apply


_RULES["mul"], _RULES["mad"] = _mul_rule(False), _mul_rule(True)


@_rule("mov")
def _mov(m: _Machine, mods: list[str], ops: list[str], guard: np.ndarray | None) -> None:
    kind = _kind(mods)
    m.write(ops[0], kind, m.read(ops[1], kind), guard)


def _shift_rule(left: bool) -> Rule:
    """`shl` and `shr` (arithmetic on signed ints); a shift past the width gives 0 (or the
    sign)."""
    def apply(m: _Machine, mods: list[str], ops: list[str], guard: np.ndarray | None) -> None:
        kind = _kind(mods)
        bits = TYPES[kind][0]
        x = m.read(ops[1], kind)
        n = np.minimum(m.read(ops[2], "u32").astype(np.uint64), np.uint64(bits))
        if kind[0] == "s" and not left:
            out = x.astype(np.int64) >> np.minimum(n, np.uint64(63)).astype(np.int64)
        else:
            u = _wrap(x, f"u{bits}").astype(np.uint64)
            out = (u << n) if left else (u >> n)
            out = np.where(n >= bits, np.uint64(0), out)
        m.write(ops[0], kind, _wrap(out, kind), guard)
    return apply


_RULES["shl"], _RULES["shr"] = _shift_rule(True), _shift_rule(False)

_COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
    "hi": np.greater, "hs": np.greater_equal,
}
_UNORDERED = {"equ", "neu", "ltu", "leu", "gtu", "geu"}


@_rule("setp")
def _setp(m: _Machine, mods: list[str], ops: list[str], guard: np.ndarray | None) -> None:
    """`setp.CMP.T p, a, b`: ordered float tests are false on NaN, the `u` ones true."""
    kind = _kind(mods)
    test = next(c for c in mods if c in _COMPARE or c in _UNORDERED or c in ("num", "nan"))
    a, b = (_flush(m.read(o, kind), mods) for o in ops[1:3])
    nan = (np.isnan(a) | np.isnan(b)) if _is_float(kind) else np.zeros(a.shape, np.bool_)
    with np.errstate(invalid="ignore"):
        if test in ("num", "nan"):
            out = nan if test == "nan" else ~nan
        elif test in _UNORDERED:
            out = _COMPARE[test[:-1]](a, b) | nan
        else:
            out = _COMPARE[test](a, b) & ~nan
    m.write(ops[0], "pred", out, guard)


@_rule("selp")
def _selp(m: _Machine, mods: list[str], ops: list[str], guard: np.ndarray | None) -> None:
    kind = _kind(mods)
    a, b = m.read(ops[1], kind), m.read(ops[2], kind)
    m.write(ops[0], kind, np.where(m.read(ops[3], "pred"), a, b), guard)


@_rule("cvt")
def _cvt(m: _Machine, mods: list[str], ops: list[str], guard: np.ndarray | None) -> None:
    if "ue8m0x2" in mods:
        return _cvt_ue8m0x2(m, mods, ops, guard)
    kinds = [k for k in mods if k in TYPES]
    if len(kinds) != 2:
        raise ValueError("cvt takes a destination and a source type")
    dst, src = kinds
    rounding = next((r for r in mods if r in _ROUNDING), None)
    x = _flush(m.read(ops[1], src), mods)
    to = TYPES[dst][1]
    floating = _FLOATS
    with np.errstate(all="ignore"):
        if to in floating:
            if rounding not in (None, "rn") and TYPES[src][1] in floating:
                raise ValueError(f"cvt.{rounding} between floats (only .rn)")
            out = x.astype(np.float64 if to == np.float64 else np.float32).astype(to)
        elif TYPES[src][1] in floating:
            rounder = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil,
                       None: np.trunc}[rounding]
            info = np.iinfo(to)
            y = rounder(x.astype(np.float64))
            out = np.where(np.isnan(y), 0, np.clip(y, info.min, info.max)).astype(to)
        else:
            wide = x.astype(np.int64) if TYPES[src][1] in (np.int8, np.int16, np.int32,
                                                           np.int64) else x.astype(np.uint64)
            if "sat" in mods:
                info = np.iinfo(to)
                wide = np.clip(wide, info.min, info.max)
            bits = TYPES[dst][0]
            out = (wide.astype(np.uint64) & _MASK[bits]).astype(
                np.dtype(f"u{bits // 8}")).view(to)
    if "sat" in mods and to in floating:
        out = np.clip(np.nan_to_num(out, nan=0.0), 0, 1).astype(to)
    m.write(ops[0], dst, _flush(out, mods), guard)


def _cvt_ue8m0x2(m: _Machine, mods: list[str], ops: list[str], guard: np.ndarray | None
                 ) -> None:
    """`cvt.rz|rp{.satfinite}.ue8m0x2.f32 d, a, b` (sm_100; torchao's MX scales): the biased
    exponents (2**(e - 127)) of |a| and |b|, rounded toward zero or up, a's in d's high byte;
    NaN, infinity and a rounded value past 2**127 give 0xFF (254 under .satfinite, NaN still
    0xFF), and magnitudes at or below 2**-127 give 0."""
    rounding = next((r for r in mods if r in ("rz", "rp")), None)
    if rounding is None or "f32" not in mods or len(ops) != 3:
        raise ValueError("cvt.ue8m0x2 takes .rz or .rp, two .f32 sources and a destination")
    top = 254 if "satfinite" in mods else 255
    halves = []
    for o in ops[1:]:
        x = np.abs(m.read(o, "f32").astype(np.float64))
        mant, exp = np.frexp(x)  # x = mant * 2**exp, mant in [0.5, 1)
        e = exp - 1 + ((mant != 0.5) & (rounding == "rp"))  # floor or ceil of log2(x)
        with np.errstate(invalid="ignore"):
            biased = np.where(x == 0, 0, np.clip(e + 127, 0, top))
        biased = np.where(np.isinf(x), top, biased)
        halves.append(np.where(np.isnan(x), 255, biased).astype(np.uint16))
    m.write(ops[0], "u16", (halves[0] << np.uint16(8)) | halves[1], guard)


@rule("inline_asm")
def _inline_asm(ex: Executor, op: Op, xs: list[Any]) -> list[Any]:
    """`td.inline_asm_elementwise` on the grid-prefixed arrays: the assembly run here."""
    try:
        return run(op.attrs["asm"], [np.asarray(x) for x in xs],
                   [r.type.dtype.np for r in op.results], op.attrs["pack"])  # type: ignore
    except PtxError as e:
        raise BackendError(f"td.inline_asm_elementwise(): {e}", kernel=ex.fn.name, loc=op.loc,
                           hint=HINT) from None


HINT = ("the NumPy backend and Triton's interpreter run the scalar PTX this module lists "
        "(lowering/backends/numpy/ptx.py); the Triton backend passes any assembly to the GPU")
