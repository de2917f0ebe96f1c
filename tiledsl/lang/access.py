"""`td.load` and `td.store`: a tensor access with an extra mask, as Helion's `hl.load(x, [i, j],
extra_mask=m)` and Triton's `tl.load(ptr, mask=m, other=0)` write it.

`td.load(x, [i, j], mask=m, other=0)` is `x[i, j]` where `m` holds and `other` elsewhere;
`td.store(x, [i, j], v, mask=m)` writes `v` where `m` holds. `m` broadcasts to the access's
shape, and is combined with the masks of ragged edges on every backend. Masked-off elements are
neither read nor written, so their indices need not be in range (a jagged row's tail). `other`
defaults to 0, as Helion's masked loads read 0; `other=None` leaves them undefined (poison on
the NumPy backend), for a kernel that never uses them. Helion's `extra_mask=` is the same
argument as `mask=`.

Triton's cache hints pass through: `eviction_policy=` ("evict_first", "evict_last") and
`cache_modifier=` (a load's ".ca", ".cg", ".cv"; a store's ".wb", ".cg", ".cs", ".wt"), one
of the two per access, reach the generated `tl.load`/`tl.store` as written, and so does a
load's `volatile=True`. They change no
value, so the NumPy and spatial backends ignore them, as do tensor-descriptor (TMA) accesses.

`td.store(..., disjoint=True)` is the author's word that no other program of the grid writes
or reads the elements this store writes, where the race check cannot see why (vLLM's slot
mappings, Unsloth's persistent MoE loop over loaded counts): the check takes it, and the NumPy
backend verifies it on the data it runs (lowering/backends/numpy/disjoint.py).

Outside a kernel, `td.load(path)` loads an ahead-of-time kernel package (tiledsl.interop.aot.load).
"""

from __future__ import annotations

from typing import Any

from tiledsl.errors import TraceError
from tiledsl.frontend import choices
from tiledsl.lang import block_ptrs
from tiledsl.frontend import pointer_tables
from tiledsl.frontend.choices import Choice
from tiledsl.frontend.pointers import Pointer
from tiledsl.frontend.zero_d_memory import zero_d_hint
from tiledsl.frontend.tracer import active, current
from tiledsl.lang.shifted import shift
from tiledsl.frontend.values import Tensor, Tile, TileValue, Unmerged

_DEFAULT = object()
EVICTION = ("", "evict_first", "evict_last")
CACHE = {"td.load()": ("", ".ca", ".cg", ".cv"), "td.store()": ("", ".wb", ".cg", ".cs", ".wt")}


def _hints(what: str, eviction_policy: Any, cache_modifier: Any) -> dict[str, str]:
    """The access's cache hints as op attributes (none for the defaults)."""
    for name, value, allowed in (("eviction_policy", eviction_policy, EVICTION),
                                 ("cache_modifier", cache_modifier, CACHE[what])):
        if value not in allowed:
            current().fail(TraceError, f"{what}: {name}={value!r} is not one of "
                           f"{', '.join(repr(a) for a in allowed if a)}",
                           hint="Triton's cache hints; they change no value")
    if eviction_policy and cache_modifier:  # ptxas refuses some pairs (.evict_last with .ca)
        current().fail(TraceError, f"{what}: give eviction_policy= or cache_modifier=, not both",
                       hint="PTX combines only some of them; pick the one that matters")
    return {k: v for k, v in (("eviction_policy", eviction_policy),
                              ("cache_modifier", cache_modifier)) if v}


def _no_boundary_check(what: str, boundary_check: Any, padding_option: str) -> None:
    if boundary_check is not None or padding_option:
        current().fail(TraceError, f"{what}: boundary_check= and padding_option= belong to a "
                       "block pointer (td.make_block_ptr)",
                       hint="mask a pointer's lanes with mask= (and other=)")


def _index(idx: Any) -> Any:
    """Helion's index list (`[i, j]`) as a subscript (`x[i, j]`)."""
    return tuple(idx) if isinstance(idx, list) else idx


def _masked(t: Tensor, index: Any) -> Any:
    """A masked access's index: a tile longer than the dimension it indexes (Helion's concat,
    `hl.load(x, [t0, t1], extra_mask=t1.index < n1)` with t1 over the output's n1 + n2
    columns) is that tile shifted by 0, its lanes past the dimension masked too (read 0, not
    written), where an unmasked access is an error."""
    items = list(index) if isinstance(index, tuple) else [index]
    if len(items) != len(t.shape) or any(it is Ellipsis for it in items):
        return index
    return tuple(shift(it, 0, 1, "+") if isinstance(it, Tile) and it.extent > n else it
                 for it, n in zip(items, t.shape))


def scalar_pointer(t: Tensor) -> tuple[int, ...]:
    """Triton's `tl.load(ptr)` with no offsets reads the element a pointer points at, a
    tensor's first: `td.load(alpha)` reads element 0 (Liger's `tl.load(alpha_ptr)`), and
    `td.store(out, v)` and `td.atomic_add(out, v)` write it (FlagGems' `out_ptr`)."""
    return (0,) * len(t.shape)


def _not_an_index(what: str, mask: Any) -> None:
    """A pointer's access takes a bool mask where a tensor's takes its index: say so for an
    index given to a pointer (code that kept both the pointer and the index)."""
    if isinstance(mask, (list, tuple)) or isinstance(mask, TileValue) and not mask.dtype.is_bool:
        current().fail(TraceError, f"{what}(pointer, ...) takes a bool mask where {what}(tensor, "
                       "index, ...) takes an index: the pointer holds its offsets already",
                       hint=f"{what}(x + offsets, ..., mask=m), or {what}(x, [offsets], ...)")


def _pointer_mask(index: Any, mask: Any, other: Any) -> tuple[Any, Any]:
    """The mask and fill of `td.load(pointer, mask, other)`: the pointer takes the place of
    the tensor and its index, so a positional mask and fill come one place earlier."""
    if index is None:  # (given by keyword, or not at all)
        return mask, other
    _not_an_index("td.load", index)
    if mask is not None and other is not _DEFAULT:
        current().fail(TraceError, "td.load(pointer, mask, other): the fill is given twice")
    return index, (other if mask is None else mask)


def _mask(what: str, mask: Any, extra_mask: Any) -> Any:
    if mask is not None and extra_mask is not None:
        current().fail(TraceError, f"{what}: give mask= or extra_mask= (Helion's name), not both")
    return mask if mask is not None else extra_mask


def _tensor(what: str, x: Any) -> Tensor:
    if isinstance(x, Unmerged):  # a tensor in one branch of an `if`, not in the other
        x.fail()
    if not isinstance(x, Tensor):
        hint = zero_d_hint(x) or "e.g. td.load(x, [tm, tn], mask=m, other=0)"
        current().fail(TraceError, f"{what} takes a tensor argument or allocation, got "
                       f"{type(x).__name__}", hint=hint)
    return x


def load(x: Any, index: Any = None, mask: Any = None, other: Any = _DEFAULT, *,
         extra_mask: Any = None, eviction_policy: str = "", cache_modifier: str = "",
         volatile: bool = False, boundary_check: Any = None, padding_option: str = "") -> Any:
    """`x[index]` where `mask` holds, `other` (default 0) elsewhere; see the module's docstring.
    Called outside a kernel with a path, it loads a kernel package (tiledsl.interop.aot.load)."""
    if active() is None and not isinstance(x, Tensor):
        from tiledsl.interop.aot import load as load_package
        return load_package(x)
    if isinstance(x, block_ptrs.BlockPointer):  # Triton's block pointer (block_ptrs.py)
        if padding_option not in block_ptrs.PADDING:
            current().fail(TraceError, f"td.load(): padding_option={padding_option!r} is not "
                           "one of 'zero', 'nan'")
        x, m = x.addresses(boundary_check)
        fill = block_ptrs.PADDING[padding_option]
        if fill != fill and not x.base.dtype.is_float:
            current().fail(TraceError, "td.load(): padding_option='nan' of an integer tensor")
        return load(x, mask=m, other=fill if m is not None else _DEFAULT,
                    eviction_policy=eviction_policy, cache_modifier=cache_modifier,
                    volatile=volatile)
    _no_boundary_check("td.load()", boundary_check, padding_option)
    if isinstance(x, TileValue) and index is None and mask is None and \
            x.value in current().array_scalars:  # `tl.load(b_ptr)` of a 0-d tensor (Liger's
        return x  # poly_norm bias): its value, which the launch reads (a scalar argument)
    if isinstance(x, pointer_tables.PointerTable):  # `tl.load(table)`: its first address
        x = x + 0
    if isinstance(x, pointer_tables.Entry):  # `tl.load(table + i)`: an address (pointer_tables.py)
        return x.loaded(load(x.pointer, index, mask, other, extra_mask=extra_mask))
    if isinstance(x, pointer_tables.TablePointer):  # a tensor a table's address chose
        x = x.choice()
    if isinstance(x, Choice):  # a tensor an `if` chose: one load per option (choices.py)
        m, fill = _pointer_mask(index, _mask("td.load()", mask, extra_mask), other)
        return choices.load(x, m, fill, lambda p, mm, oo: load(
            p, mask=mm, other=oo, eviction_policy=eviction_policy,
            cache_modifier=cache_modifier, volatile=volatile))
    if isinstance(x, Pointer):  # Triton's tl.load(pointer, mask, other)
        x, index, mask, other = x.base, [x.offset], *_pointer_mask(index, mask, other)
    t = _tensor("td.load()", x)
    m = _mask("td.load()", mask, extra_mask)
    hints = _hints("td.load()", eviction_policy, cache_modifier)
    if not isinstance(volatile, bool):
        current().fail(TraceError, f"td.load(): volatile= must be True or False, got "
                       f"{volatile!r}")
    if volatile:  # Triton's: read memory every time (ld.volatile), never a cached copy
        hints["volatile"] = True
    if index is None:
        index = scalar_pointer(t)
    if m is None:
        return t.load(_index(index), hints=hints)
    return t.load(_masked(t, _index(index)), m, 0 if other is _DEFAULT else other, hints=hints)


def store(x: Any, index: Any, value: Any = _DEFAULT, mask: Any = None, *,
          extra_mask: Any = None, eviction_policy: str = "", cache_modifier: str = "",
          disjoint: bool = False, boundary_check: Any = None) -> None:
    """`x[index] = value` where `mask` holds; see the module's docstring. `td.store(x, v)`
    writes x's first element (Triton's `tl.store(ptr, v)`). `disjoint=True`: no other
    program of the grid touches the elements this store writes (see the module's docstring)."""
    tr = current("td.store()")
    if isinstance(x, block_ptrs.BlockPointer):  # Triton's block pointer (block_ptrs.py)
        x, m = x.addresses(boundary_check)
        store(x, index, m, eviction_policy=eviction_policy, cache_modifier=cache_modifier,
              disjoint=disjoint)
        return
    _no_boundary_check("td.store()", boundary_check, "")
    if not isinstance(disjoint, bool):
        tr.fail(TraceError, f"td.store(): disjoint= must be True or False, got {disjoint!r}")
    if isinstance(x, pointer_tables.TablePointer):  # a tensor a table's address chose
        x = x.choice()
    if isinstance(x, Choice):  # a tensor an `if` chose: one store per option (choices.py)
        if value is not _DEFAULT and mask is not None:
            current().fail(TraceError, "td.store(pointer, value, mask): the mask is given twice")
        m = _mask("td.store()", mask if value is _DEFAULT else value, extra_mask)
        choices.store(x, index, m, lambda p, v, mm: store(
            p, v, mask=mm, eviction_policy=eviction_policy, cache_modifier=cache_modifier,
            disjoint=disjoint))
        return
    if isinstance(x, Pointer):  # Triton's tl.store(pointer, value, mask)
        if value is not _DEFAULT:
            _not_an_index("td.store", value)
        if value is not _DEFAULT and mask is not None:
            current().fail(TraceError, "td.store(pointer, value, mask): the mask is given twice")
        x, index, value, mask = x.base, [x.offset], index, (mask if value is _DEFAULT else value)
    t = _tensor("td.store()", x)
    if value is _DEFAULT:
        index, value = scalar_pointer(t), index
    m = _mask("td.store()", mask, extra_mask)
    t.store(_index(index) if m is None else _masked(t, _index(index)), value, m,
            hints=_hints("td.store()", eviction_policy, cache_modifier), disjoint=disjoint)

