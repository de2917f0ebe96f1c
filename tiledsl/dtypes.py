"""Element types: the DSL's dtypes, their NumPy equivalents and the promotion rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np


class _Truth(int):
    """A bool that can also be called: td's properties `d.is_int`, `d.is_bool` and `d.is_fp8`
    are Triton's methods `d.is_int()`, ... too."""

    called: bool | None = None  # what Triton's method answers, where it differs

    def __call__(self) -> bool:
        return bool(self) if self.called is None else self.called

    def __repr__(self) -> str:
        return repr(bool(self))


_TRUTH = {False: _Truth(0), True: _Truth(1)}  # (no object made per call: tracing asks often)
_BOOL_IS_INT = _Truth(0)  # td's bool is no int; Triton's int1 `is_int()` (FlagGems' cumsum)
_BOOL_IS_INT.called = True


@dataclass(frozen=True)
class DType:
    """An element type. `name` is the public name, `short` the IR spelling (f32, bf16, i1...)."""

    name: str
    short: str
    kind: str  # "f" float, "i" signed int, "u" unsigned int, "b" bool
    bits: int

    @property
    def np(self) -> np.dtype:
        return _TO_NUMPY[self.short]

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype, under the attribute NumPy reads: `np.dtype(td.float32)` and
        `np.promote_types(x.dtype, y.dtype)` take td dtypes."""
        return self.np

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        """Signed or unsigned (called, as Triton's method, bool too: Triton's int1 is one)."""
        return _BOOL_IS_INT if self.kind == "b" else _TRUTH[self.kind in "iu"]

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "u"

    @property
    def is_bool(self) -> bool:
        return _TRUTH[self.kind == "b"]

    @property
    def is_fp8(self) -> bool:
        """A storage type (fp8.py): loads, stores, casts and `@` take it; arithmetic does not."""
        return _TRUTH[self.kind == "f" and self.bits == 8]

    def __eq__(self, other: object) -> bool:
        """Equal to the same td dtype, and (as NumPy's dtypes are) to its NumPy dtype, type or
        name: `x.dtype == np.float32` in a kernel's host code means what it says."""
        if isinstance(other, DType):
            return self.short == other.short
        if other is None or isinstance(other, (bool, int, float)):
            return NotImplemented
        d = from_any(other)
        return NotImplemented if d is None else d.short == self.short

    def __hash__(self) -> int:
        return hash(self.short)

    @staticmethod
    def keyed(obj: Any, key: Any) -> Any:
        """`obj[key]` in a kernel (the rewrite's, frontend/rewrite.py): a dict keyed by torch's
        (or NumPy's) dtypes finds a tensor's td dtype under its name (Liger's
        `torch_to_triton_dtype[X.dtype]`), which hashes apart from them."""
        if isinstance(key, DType) and type(obj) is dict and key not in obj:
            for k, v in obj.items():
                if not isinstance(k, (str, bool, int, float)) and key == k:
                    return v
        return obj[key]

    @staticmethod
    def contains(obj: Any, key: Any) -> bool:
        """`key in obj` in a kernel (the rewrite's): a set or dict of torch's (or NumPy's)
        dtypes holds a tensor's td dtype of the same name, which hashes apart from them
        (`x.dtype in {torch.float16, torch.bfloat16}` would be False)."""
        if isinstance(key, DType) and isinstance(obj, (set, frozenset, dict)) and key not in obj:
            return any(not isinstance(k, (str, bool, int, float)) and key == k for k in obj)
        return key in obj

    @staticmethod
    def get(obj: dict, key: Any, default: Any = None) -> Any:
        """`table.get(x.dtype, default)` in a kernel (helpers.py): as `keyed`."""
        return DType.keyed(obj, key) if DType.contains(obj, key) else default

    @staticmethod
    def same(a: object, b: object) -> bool:
        """`a is b` in a kernel (the rewrite's, frontend/rewrite.py): also a td dtype and
        torch's, NumPy's or Triton's of the same name, as the tensor's dtype is the caller's
        (FlagGems' `x.dtype is torch.bfloat16`; Python's `is` would be False)."""
        if a is b:
            return True
        for d, other in ((a, b), (b, a)):
            if isinstance(d, DType) and other is not None and not isinstance(
                    other, (str, bool, int, float)):
                return d == other
        return False

    def __repr__(self) -> str:
        return f"td.{self.name}"

    @property
    def primitive_bitwidth(self) -> int:
        """Triton's name for the width in bits."""
        return self.bits

    @property
    def int_bitwidth(self) -> int:
        """Triton's width of an int (FlagGems' `get_dtype_min`), as `primitive_bitwidth`."""
        if self.kind == "f":
            raise AttributeError(f"'{self.name}' is not an int: it has no int_bitwidth")
        return self.bits

    @property
    def fp_mantissa_width(self) -> int:
        """Triton's width of a float's stored mantissa."""
        widths = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52, "f8e4m3": 3, "f8e5m2": 2}
        if self.short not in widths:
            raise AttributeError(f"'{self.name}' is not a float: it has no fp_mantissa_width")
        return widths[self.short]

    @property
    def element_ty(self) -> DType:
        """Triton's `ptr.dtype.element_ty` (a pointer's element type): a tensor's dtype is
        already its elements', so `x.dtype.element_ty` is `x.dtype`."""
        return self

    @property
    def value(self) -> DType:
        """The dtype itself: Triton's `dtype.value` unwraps a `tl.constexpr` holding a dtype
        (FlagGems' `get_dtype_max(dtype)`), and a tiledsl dtype is never wrapped."""
        return self

    @property
    def itemsize(self) -> int:
        """Bytes per element (torch's and NumPy's `dtype.itemsize`)."""
        return max(1, self.bits // 8)

    @property
    def is_floating_point(self) -> bool:
        """torch's `dtype.is_floating_point` (FlagGems' trace: the accumulator's dtype)."""
        return self.kind == "f"

    @property
    def is_signed(self) -> bool:
        """torch's `dtype.is_signed`: floats and signed ints."""
        return self.kind in "fi"

    @property
    def is_complex(self) -> bool:
        """torch's `dtype.is_complex`: tiledsl has no complex dtypes."""
        return False

    def __str__(self) -> str:
        return self.name


float16 = DType("float16", "f16", "f", 16)
bfloat16 = DType("bfloat16", "bf16", "f", 16)
float32 = DType("float32", "f32", "f", 32)
float64 = DType("float64", "f64", "f", 64)
int8 = DType("int8", "i8", "i", 8)
int16 = DType("int16", "i16", "i", 16)
int32 = DType("int32", "i32", "i", 32)
int64 = DType("int64", "i64", "i", 64)
uint8 = DType("uint8", "u8", "u", 8)
uint16 = DType("uint16", "u16", "u", 16)
uint32 = DType("uint32", "u32", "u", 32)
uint64 = DType("uint64", "u64", "u", 64)
bool_ = DType("bool", "i1", "b", 1)
float8_e4m3fn = DType("float8_e4m3fn", "f8e4m3", "f", 8)  # Triton's tl.float8e4nv
float8_e5m2 = DType("float8_e5m2", "f8e5m2", "f", 8)  # Triton's tl.float8e5
# MX formats' scales: 2**(bits - 127), 0xFF NaN (a uint8 in Triton's kernels; fp8.py)
float8_e8m0fnu = DType("float8_e8m0fnu", "f8e8m0", "f", 8)

ALL: tuple[DType, ...] = (float16, bfloat16, float32, float64, int8, int16, int32, int64,
                         uint8, uint16, uint32, uint64, bool_, float8_e4m3fn, float8_e5m2,
                         float8_e8m0fnu)
BY_SHORT: dict[str, DType] = {d.short: d for d in ALL}

# Triton's dtype predicates, `x.dtype.is_floating()`, `x.dtype.is_fp16()`, ..., as methods
# (td's own `is_float` and `is_int` are properties)
_TRITON_NAMES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
                 "bool": "int1", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}
for _d in ALL:
    _name = _TRITON_NAMES.get(_d.name, _d.name)
    setattr(DType, f"is_{_name}", lambda self, _s=_d.short: self.short == _s)
_FROM_TRITON = {_TRITON_NAMES.get(d.name, d.name): d.short for d in ALL}  # "fp32" -> "f32"
DType.is_floating = lambda self: self.kind == "f"  # type: ignore[attr-defined]
DType.is_int_signed = lambda self: self.kind == "i"  # type: ignore[attr-defined]
DType.is_int_unsigned = lambda self: self.kind in "ub"  # type: ignore[attr-defined] (int1 too)

_TO_NUMPY: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "i1": np.dtype(np.bool_),
    "f8e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "f8e8m0": np.dtype(ml_dtypes.float8_e8m0fnu),
}
_FROM_NUMPY: dict[np.dtype, DType] = {v: BY_SHORT[k] for k, v in _TO_NUMPY.items()}


def from_any(value: Any) -> DType | None:
    """A DType from a td dtype, a NumPy dtype or type, a torch dtype (`torch.float32`, as
    Helion kernels spell them), or a name ("float32", "f32"); else None."""
    if isinstance(value, DType):
        return value
    if value is None:  # NumPy reads None as float64: here it is a slip, not a dtype
        return None
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        value = str(value).removeprefix("torch.")  # without importing torch
    elif type(value).__name__ == "dtype" and type(value).__module__.startswith("triton."):
        value = _FROM_TRITON.get(value.name)  # a helper's `tl.int64` (FlagGems)
    if isinstance(value, str):
        for d in ALL:
            if value in (d.name, d.short):
                return d
        return None
    try:
        return _FROM_NUMPY.get(np.dtype(value))
    except TypeError:
        return None


def index_dtype(extent: int) -> DType:
    """The integer type of indices into a dimension: int32 unless int32 could overflow."""
    return int32 if extent < 2**31 else int64


def promote(a: DType, b: DType) -> DType | None:
    """The common type of two dtypes (None if there is none).

    Floats win over ints and bools; within a kind the wider type wins; float16 and bfloat16
    meet at float32 (neither holds the other). A signed and an unsigned int meet, as in NumPy 2,
    at the narrowest signed int that holds both (uint8 and int8 at int16, uint32 and int32 at
    int64); uint64 and a signed int have none (NumPy's float64 would round them).
    """
    if a == b:
        return a
    if a.kind == b.kind:
        if a.bits == b.bits:  # float16 vs bfloat16
            return float32
        return a if a.bits > b.bits else b
    if {a.kind, b.kind} == {"i", "u"}:
        u, s = (a, b) if a.is_unsigned else (b, a)
        if s.bits > u.bits:
            return s
        return None if u.bits == 64 else BY_SHORT[f"i{2 * u.bits}"]
    order = {"b": 0, "i": 1, "u": 1, "f": 2}
    return a if order[a.kind] > order[b.kind] else b


def accumulator(d: DType) -> DType:
    """The type a dot or a sum accumulates in: float32 for 16-bit floats, int32 (uint32) for
    small signed (unsigned) ints."""
    if d.is_float:
        return float32 if d.bits < 32 else d
    if d.bits < 32:
        return uint32 if d.is_unsigned else int32
    return d


def poison(d: DType) -> float | int | bool:
    """What a backend puts where no correct kernel reads (lanes a load masks off, outside a
    tensor): NaN, the most negative integer (the largest unsigned one), or True."""
    if d.is_bool:
        return True
    if d.is_unsigned:
        return (1 << d.bits) - 1
    if d.is_int:
        return -(1 << (d.bits - 1))
    return float("nan")


def identity(kind: str, d: DType) -> float | int | bool:
    """The neutral element of a reduction ('sum', 'max', 'min') in dtype d; argmax and argmin
    mask with max's and min's (a masked lane only ties, and ties go to the first lane)."""
    kind = {"argmax": "max", "argmin": "min"}.get(kind, kind)
    if kind in ("sum", "mean"):
        return False if d.is_bool else 0
    if d.is_float:
        return -float("inf") if kind == "max" else float("inf")
    if d.is_bool:
        return kind != "max"
    info = np.iinfo(d.np)
    return int(info.min) if kind == "max" else int(info.max)
