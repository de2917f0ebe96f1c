"""Atomics: `td.atomic_add(x, [i, j], v)` and its kin, spelled as Helion's `hl.atomic_*` (and
Triton's `tl.atomic_*` with a pointer), each returning the values the elements held before.

An atomic is a read-modify-write of each element of `x[i, j]`, atomic with respect to every other
atomic on that element, so programs may combine into the same elements: a split-K GEMM adds its
partial products into one output, a histogram adds ones at gathered bins. The index is a store's
(tiles, scalars, index tiles, slices, shifted tiles) and `mask=` leaves elements out as
`td.store`'s does. The value broadcasts to the access's shape and is cast to the tensor's dtype.

Order: atomics on one element happen in some order, and only `add` of floats depends on it
(rounding). The NumPy backend defines one: the loop iterations in order; within one, the
programs in grid order (C order of the program ids), then each program's lanes in C order.
The masked-off lanes' old values are undefined (NaN, or the poison of an integer dtype, on the
NumPy backend).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from tiledsl.errors import DTypeError, TraceError
from tiledsl.ir.ops import ATOMIC_DTYPES, BITWISE_ATOMICS, HALF_ATOMICS, indexed_shape
from tiledsl.frontend import choices, pointer_tables
from tiledsl.frontend.choices import Choice
from tiledsl.frontend.pointers import Pointer
from tiledsl.frontend import locks
from tiledsl.frontend.races import check_overlap
from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import (
    Tensor, TileValue, Unmerged, _access_mask, _indices, read_only, written_value,
)
from tiledsl.frontend.zero_d_memory import zero_d_hint
from tiledsl.lang.access import scalar_pointer

SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")  # as Triton's `sem=`
SCOPES = ("gpu", "cta", "sys")  # as Triton's `scope=`


def _pointer_form(fn: Callable[..., TileValue]) -> Callable[..., TileValue]:
    """Triton's form, `tl.atomic_add(pointer, value, mask)`: the pointer is the tensor and
    its index (tiledsl/frontend/pointers.py). A pointer a table's address or a runtime
    condition chose (pointer_tables.py, choices.py) is one atomic per tensor, masked by its
    condition; the old values are the chosen tensor's."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def call(x: Any, *args: Any, **kwargs: Any) -> TileValue:
        if isinstance(x, pointer_tables.TablePointer):
            x = x.choice()
        if isinstance(x, Choice):
            return _chosen(call, signature, x, args, kwargs)
        if isinstance(x, Pointer):
            return fn(x.base, [x.offset], *args, **kwargs)
        if isinstance(x, Tensor) and current().triton_body:  # `tl.atomic_max(amax_ptr, v)`:
            return fn(x, list(scalar_pointer(x)), *args, **kwargs)  # the pointer's element 0
        return fn(x, *args, **kwargs)
    return call


def _chosen(call: Callable[..., TileValue], signature: inspect.Signature, x: Choice,
            args: tuple, kwargs: dict) -> TileValue:
    name = call.__name__
    if "mask" not in signature.parameters or \
            not all(isinstance(p, Pointer) for _, p in x.options):
        current().fail(TraceError, f"td.{name}() through a pointer chosen at run time: "
                       f"{name} takes {'no mask' if 'mask' not in signature.parameters else 'a pointer'}"
                       ", which tiledsl needs to pick the tensor",
                       hint="branch on the condition with `if` and call it on each tensor")
    bound = signature.bind(None, None, *args, **kwargs)  # (the pointer form: value, mask, ...)

    def one(p: Pointer, mask: Any, _: Any) -> TileValue:
        bound.arguments["mask"] = mask
        return call(p, *bound.args[2:], **bound.kwargs)
    return choices.load(x, bound.arguments.get("mask"), None, one)


def _check(what: str, x: Any, sem: Any, scope: Any) -> Tensor:
    tr = current(f"td.{what}()")
    if isinstance(x, Unmerged):  # a tensor in one branch of an `if`, not in the other
        x.fail()
    if not isinstance(x, Tensor):
        tr.fail(TraceError, f"td.{what}() takes a tensor argument or allocation, got "
                f"{type(x).__name__}", hint=zero_d_hint(x) or f"e.g. td.{what}(out, [tm, tn], v)")
    read_only(tr, x, f"td.{what}() into")
    if tr.depth == "host":
        tr.fail(TraceError, f"td.{what}() is used outside the tile loops",
                hint="atomics combine the values of grid programs: call them inside the grid")
    if x.dtype.short not in ATOMIC_DTYPES and not (
            what == "atomic_add" and x.dtype.short in HALF_ATOMICS):
        half = " (float16 and bfloat16 ones take td.atomic_add only, as Triton's)" \
            if x.dtype.short in HALF_ATOMICS else ""
        tr.fail(DTypeError, f"td.{what}() on '{x.name}', a {x.dtype} tensor: atomics take "
                "int32, int64, uint32, uint64, float32 and float64 tensors, and td.atomic_add "
                f"float16 and bfloat16 ones{half}",
                hint="accumulate into a float32 (or int32) tensor and cast it afterwards")
    if what.removeprefix("atomic_") in BITWISE_ATOMICS and not x.dtype.is_int:
        tr.fail(DTypeError, f"td.{what}() on '{x.name}', a {x.dtype} tensor: bitwise atomics take "
                "integer tensors (as Triton's)")
    if sem is not None and sem not in SEMANTICS:
        tr.fail(TraceError, f"td.{what}(): sem={sem!r} is not one of {list(SEMANTICS)}")
    if scope not in SCOPES:
        tr.fail(TraceError, f"td.{what}(): scope={scope!r} is not one of {list(SCOPES)}")
    return x


def _value(x: Tensor, shape: tuple, value: Any, what: str) -> TileValue:
    """`value` as the access's tile: cast to the tensor's dtype, broadcast to its shape."""
    return written_value(x, shape, value, f"td.{what}() of", f"td.{what}() cannot write",
                         hint="the index gives the atomic's shape, one element per lane: reduce "
                              "the lanes that meet one element first (td.atomic_add(c, [0], "
                              "td.sum(v))), or index with a tile per axis of the value")


def _atomic(what: str, kind: str, x: Any, index: Any, values: list[Any], mask: Any,
            sem: Any, scope: Any) -> TileValue:
    t = _check(what, x, sem, scope)
    tr = current()
    if sem is None:  # Triton's default in a @triton.jit body; Helion's (and tiledsl's) else
        sem = "acq_rel" if tr.triton_body else "relaxed"
    idx = tuple(index) if isinstance(index, list) else index
    operands, full, sliced = _indices(tr, t, idx)
    shape = indexed_shape(t.type, [o.type for o in operands], full, sliced.get("slices", ()))
    vs = [_value(t, shape, v, what).value for v in values]
    attrs: dict[str, Any] = {"kind": kind, "sem": sem, "scope": scope} | \
        ({"full": full} if full else {}) | sliced
    check_overlap(tr, t, operands, attrs, atomic=True)
    locks.release(tr, t.value, index, kind, attrs)
    if mask is not None:
        operands.append(_access_mask(tr, t, operands, full, mask, sliced))
        attrs["mask"] = True
    old = tr.emit("atomic", [t.value, *operands, *vs], attrs, hint=f"old_{kind}")[0]
    if kind == "cas":
        locks.note_cas(tr, old, t.value, index)
    return TileValue(old)


@_pointer_form
def atomic_add(x: Any, index: Any, value: Any = None, mask: Any = None, *,
               sem: str | None = None, scope: str = "gpu") -> TileValue:
    """Add `value` to `x[index]` atomically (where `mask` holds); returns the old values.
    `td.atomic_add(x, v)` adds to x's first element (Triton's `tl.atomic_add(count_ptr, v)`)."""
    if value is None and isinstance(x, Tensor):
        index, value = list(scalar_pointer(x)), index
    return _atomic("atomic_add", "add", x, index, [value], mask, sem, scope)


@_pointer_form
def atomic_and(x: Any, index: Any, value: Any, mask: Any = None, *, sem: str | None = None,
               scope: str = "gpu") -> TileValue:
    """`x[index] &= value` atomically (int tensors); returns the old values."""
    return _atomic("atomic_and", "and", x, index, [value], mask, sem, scope)


@_pointer_form
def atomic_or(x: Any, index: Any, value: Any, mask: Any = None, *, sem: str | None = None,
              scope: str = "gpu") -> TileValue:
    """`x[index] |= value` atomically (int tensors); returns the old values."""
    return _atomic("atomic_or", "or", x, index, [value], mask, sem, scope)


@_pointer_form
def atomic_xor(x: Any, index: Any, value: Any, mask: Any = None, *, sem: str | None = None,
               scope: str = "gpu") -> TileValue:
    """`x[index] ^= value` atomically (int tensors); returns the old values."""
    return _atomic("atomic_xor", "xor", x, index, [value], mask, sem, scope)


@_pointer_form
def atomic_max(x: Any, index: Any, value: Any, mask: Any = None, *, sem: str | None = None,
               scope: str = "gpu") -> TileValue:
    """`x[index] = maximum(x[index], value)` atomically; returns the old values."""
    return _atomic("atomic_max", "max", x, index, [value], mask, sem, scope)


@_pointer_form
def atomic_min(x: Any, index: Any, value: Any, mask: Any = None, *, sem: str | None = None,
               scope: str = "gpu") -> TileValue:
    """`x[index] = minimum(x[index], value)` atomically; returns the old values."""
    return _atomic("atomic_min", "min", x, index, [value], mask, sem, scope)


@_pointer_form
def atomic_xchg(x: Any, index: Any, value: Any, mask: Any = None, *, sem: str | None = None,
                scope: str = "gpu") -> TileValue:
    """Write `value` to `x[index]` atomically; returns the old values."""
    return _atomic("atomic_xchg", "xchg", x, index, [value], mask, sem, scope)


@_pointer_form
def atomic_cas(x: Any, index: Any, expected: Any, value: Any, mask: Any = None, *,
               sem: str | None = None, scope: str = "gpu") -> TileValue:
    """Where `x[index]` equals `expected`, write `value`, atomically; returns the old values
    (equal to `expected` where the swap happened)."""
    return _atomic("atomic_cas", "cas", x, index, [expected, value], mask, sem, scope)
