"""The proxies a kernel body computes with while it is traced: tiles, tensors and tile handles.

Python numbers are *weak*: they take the dtype of the tile they meet (`x * 2.0` keeps x's dtype),
as in JAX and Triton; alone, a Python float is an exact float64. Tiles of different dtypes meet
at `dtypes.promote`.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn, Sequence

import numpy as np

from tiledsl import dtypes
from tiledsl.dtypes import DType
from tiledsl.errors import (
    ControlFlowError, DTypeError, ShapeError, TileDSLError, TraceError, user_loc,
)
from tiledsl.ir.core import Value
from tiledsl.ir.gathers import broadcast_dims, is_index_tile
from tiledsl.ir.ops import ARG_REDUCTIONS, MATH_BINARY, broadcastable
from tiledsl.ir.types import UNBOUNDED, Dim, RangeType, TensorType, TileType
from tiledsl.ir.slices import Slice, normalize, to_attr as slices_attr
from tiledsl.ir.views import VIEW_OPS
from tiledsl.frontend import foreign_calls, porting_hints
from tiledsl.frontend.races import check_overlap, check_read_write, check_store
from tiledsl.frontend.host_scalars import HostScalar
from tiledsl.frontend.locks import locked
from tiledsl.lang.shifted import ShiftedTile, is_shifted, shift, zero
from tiledsl.frontend.block_sizes import BlockSize
from tiledsl.frontend.static_args import constexpr
from tiledsl.frontend.td_names import FUNCTIONS
from tiledsl.frontend.static_args import need_static as check_static
from tiledsl.frontend.tracer import Tracer, current


def _reduction(kind: str) -> Any:
    """The tile value method `v.<kind>(axis=None, keepdims=False)` (also `dim=`, `keepdim=`)."""
    def method(self: TileValue, axis: Any = None, keepdims: bool = False,
               **torch: Any) -> TileValue:
        return reduce(kind, self, *torch_axis(kind, axis, keepdims, torch))
    method.__name__ = method.__qualname__ = kind
    return method


class _Count(int):
    """An int that can also be called: Triton's `x.numel` and torch's `x.numel()`."""

    def __call__(self) -> int:
        return int(self)


def read_only(tr: Tracer, t: Tensor, doing: str) -> None:
    """Fail where `t` is an expanded view (`x.expand(...)`): its elements repeat, so a write
    through it would write one memory element from several lanes (torch refuses it too)."""
    v = t.value
    while v.owner is not None and v.owner.name in VIEW_OPS:
        if v.owner.name == "tensor.expand":
            tr.fail(TraceError, f"cannot {doing} '{t.name}': an expanded view repeats the "
                    "elements of its tensor, so several lanes would write one element",
                    hint="write into the tensor itself, or into a td.empty of the full shape")
        v = v.owner.operands[0]


class Unmerged:
    """A name the branches of an `if` on a runtime value bind to values of different kinds (a
    tensor in one, a tile in the other): the error is raised where the name is used after the
    `if`. After an early exit (`if pid >= n: return`, then `alpha = td.load(alpha_ptr)`) the
    rest of the program is the other branch, and the name is never used."""

    __slots__ = ("error",)

    def __init__(self, error: TileDSLError) -> None:
        self.error = error

    def fail(self, *_: Any, **__: Any) -> NoReturn:
        raise self.error

    def __getattr__(self, name: str) -> Any:
        raise self.error

    __getitem__ = __setitem__ = __call__ = __bool__ = __iter__ = __len__ = fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = fail
    __floordiv__ = __mod__ = __pow__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = fail
    __and__ = __or__ = __xor__ = __invert__ = __lshift__ = __rshift__ = __matmul__ = fail
    __hash__ = object.__hash__


class TileValue:
    """A traced value held by one program: a tile or a scalar."""

    __slots__ = ("value", "weak")
    __array_ufunc__ = None  # keep NumPy from treating a tile as an object array

    def __init__(self, value: Value, weak: bool = False) -> None:
        self.value = value
        self.weak = weak

    @property
    def type(self) -> TileType:
        t = self.value.type
        assert isinstance(t, TileType)
        return t

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def shape(self) -> tuple[Dim, ...]:
        return self.type.shape

    @property
    def ndim(self) -> int:
        return self.type.rank

    def __repr__(self) -> str:
        return f"TileValue({self.type})"

    # Python control flow cannot see traced values.
    def __bool__(self) -> bool:
        if self.shape == ():  # computed from int arguments alone (`i != dim`), in host code
            tr = current()  # from Python float ones too (flash-attn's `assert scale > 0.0`):
            check_static(self.value, tr.int_params | tr.float_params  # made static
                         if tr.depth == "host" else tr.int_params, truth=True)
        hint = "use td.where(cond, x, y) to select elementwise"
        if self.shape == ():  # an `if` statement on a scalar branches (tiledsl/frontend/branches.py)
            hint = ("to skip work, branch on it with an `if` statement in the kernel (not "
                    "`while`, `assert` or `x if c else y`); to select a value, td.where(c, x, y)")
        current().fail(ControlFlowError,
                       "a tile value has no Python truth value (used in `if`, `while`, `and`, "
                       "`or` or `not`)", hint=hint)

    def __iter__(self) -> Any:
        current().fail(TraceError, "cannot iterate over a tile value",
                       hint="index it with tiles, or reduce it with td.sum / td.max")

    def __index__(self) -> int:
        need_static(self)  # an int argument used as a Python int: the kernel specializes on it
        tr = current()  # (in host code, Python float ones too: lightllm's rotary
        if tr.depth == "host":  # `head_dim = int(q.shape[2] * partial_rotary_factor)`)
            check_static(self.value, tr.int_params | tr.float_params)
        current().fail(TraceError, "a tile value is only known when the kernel runs; it cannot "
                       "be used as a Python int (shapes, range(), list indices)",
                       hint=porting_hints.RANGE if porting_hints.calls_range(user_loc()) else None)

    __int__ = __index__

    def __float__(self) -> float:
        tr = current()  # in host code, of int and Python float arguments (FlagGems' logspace:
        if tr.depth == "host":  # `math.log2(float(base))`): traced per their values
            check_static(self.value, tr.int_params | tr.float_params)
        tr.fail(TraceError, "a tile value is only known when the kernel runs; it cannot "
                       "be used as a Python float", hint="compute with it as it is (float(x) "
                       "of a runtime scalar in the kernel's own code is that scalar), or make "
                       "the argument compile-time (x: td.constexpr)")

    def __len__(self) -> int:
        current().fail(TraceError, "len() of a tile value is not known at trace time")

    # Arithmetic.
    def __add__(self, o: Any) -> TileValue:  # (`pid + out_ptr`: the pointer's, pointers.py)
        return NotImplemented if isinstance(o, Tensor) or getattr(o, "pointer", False) \
            else binary("add", self, o)
    def __radd__(self, o: Any) -> TileValue: return binary("add", o, self)
    def __sub__(self, o: Any) -> TileValue: return binary("sub", self, o)
    def __rsub__(self, o: Any) -> TileValue: return binary("sub", o, self)
    def __mul__(self, o: Any) -> TileValue: return binary("mul", self, o)
    def __rmul__(self, o: Any) -> TileValue: return binary("mul", o, self)
    def __truediv__(self, o: Any) -> TileValue: return binary("div", self, o)
    def __rtruediv__(self, o: Any) -> TileValue: return binary("div", o, self)
    def __floordiv__(self, o: Any) -> TileValue: return binary("floordiv", self, o)
    def __rfloordiv__(self, o: Any) -> TileValue: return binary("floordiv", o, self)
    def __mod__(self, o: Any) -> TileValue: return binary("mod", self, o)
    def __rmod__(self, o: Any) -> TileValue: return binary("mod", o, self)
    def __pow__(self, o: Any) -> TileValue: return binary("pow", self, o)
    def __rpow__(self, o: Any) -> TileValue: return binary("pow", o, self)
    def __and__(self, o: Any) -> TileValue: return binary("and", self, o)
    def __rand__(self, o: Any) -> TileValue: return binary("and", o, self)
    def __or__(self, o: Any) -> TileValue: return binary("or", self, o)
    def __ror__(self, o: Any) -> TileValue: return binary("or", o, self)
    def __xor__(self, o: Any) -> TileValue: return binary("xor", self, o)
    def __rxor__(self, o: Any) -> TileValue: return binary("xor", o, self)
    def __lshift__(self, o: Any) -> TileValue: return binary("shl", self, o)
    def __rlshift__(self, o: Any) -> TileValue: return binary("shl", o, self)
    def __rshift__(self, o: Any) -> TileValue: return binary("shr", self, o)
    def __rrshift__(self, o: Any) -> TileValue: return binary("shr", o, self)
    def __eq__(self, o: Any) -> TileValue: return binary("eq", self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> TileValue: return binary("ne", self, o)  # type: ignore[override]
    def __lt__(self, o: Any) -> TileValue: return binary("lt", self, o)
    def __le__(self, o: Any) -> TileValue: return binary("le", self, o)
    def __gt__(self, o: Any) -> TileValue: return binary("gt", self, o)
    def __ge__(self, o: Any) -> TileValue: return binary("ge", self, o)
    def __matmul__(self, o: Any) -> TileValue: return dot(self, o)
    def __rmatmul__(self, o: Any) -> TileValue: return dot(o, self)
    def __neg__(self) -> TileValue: return unary("neg", self)
    def __pos__(self) -> TileValue: return positive(self)
    def __abs__(self) -> TileValue: return unary("abs", self)
    def __invert__(self) -> TileValue: return unary("not", self)

    def __hash__(self) -> int:  # its value is not known while tracing: a hash would be its id
        current().fail(TraceError, "a tile value cannot be hashed (its elements are not known "
                       "while the kernel traces)", hint="use a tile value in tile expressions; "
                       "a dict or set needs host values such as shapes")

    # Shape manipulation.
    def __getitem__(self, idx: Any) -> TileValue:
        """`v[:, None]` / `v[None, :]`: insert unit axes; `:` keeps an axis."""
        items = idx if isinstance(idx, tuple) else (idx,)
        out, axis = self, 0
        for it in items:
            if it is None:
                out = TileValue(current().emit("expand_dims", [out.value], {"axis": axis})[0], out.weak)
                axis += 1
            elif isinstance(it, slice) and it == slice(None):
                if axis >= out.ndim:  # (Triton 3.9: too many indices for tensor of rank 0)
                    current().fail(ShapeError, f"too many indices for a {self.ndim}-D tile: "
                                   f"`:` takes an axis the value has",
                                   hint="a scalar (a program id, a loaded element) broadcasts "
                                        "as it is; `v[None]` makes a tile of one lane"
                                   if self.ndim == 0 else None)
                axis += 1
            else:
                current().fail(TraceError, f"tile values can only be indexed with `:` and None, "
                               f"got {it!r}", hint="index tensors with tiles; reshape tiles with "
                               "v[:, None]")
        if axis > out.ndim:
            current().fail(ShapeError, f"too many indices for a {self.ndim}-D tile")
        return out

    @property
    def T(self) -> TileValue:
        perm = tuple(reversed(range(self.ndim)))
        return TileValue(current().emit("transpose", [self.value], {"perm": perm})[0], self.weak)

    def astype(self, dtype: Any) -> TileValue:
        """A typed value: a weak one (a Python number's) takes `dtype` even when it has it."""
        return TileValue(cast(self, as_dtype(dtype, "astype")).value)

    def to(self, dtype: Any) -> TileValue:
        """`astype`, spelled as torch (and Helion) write it (lang/bits.py adds Triton's
        `bitcast=True`)."""
        return TileValue(cast(self, as_dtype(dtype, "to")).value)

    @property
    def numel(self) -> int:
        """Triton's `x.numel` (and torch's `x.numel()`): the tile's element count."""
        if not all(isinstance(d, int) for d in self.shape):
            current().fail(TraceError, "x.numel of a tile whose block size the config chooses",
                           hint="give the tile a block_size=, or use t.block_size")
        return _Count(math.prod(self.shape))  # type: ignore[arg-type]

    # NumPy's `axis=`/`keepdims=`, or torch's `dim=`/`keepdim=` (Helion's `x.sum(dim=1)`)
    sum = _reduction("sum")
    max = _reduction("max")
    min = _reduction("min")
    mean = _reduction("mean")
    argmax = _reduction("argmax")
    argmin = _reduction("argmin")

    def cumsum(self, axis: Any = None, **torch: Any) -> TileValue:
        return cumsum(self, torch_axis("cumsum", axis, False, torch)[0])

    def size(self, dim: Any = None) -> Any:
        """torch's `v.size(d)` (an entry of `v.shape`: an int, or a block size's symbol that
        shapes take) and `v.size()` (the shape)."""
        return self.shape if dim is None else self.shape[dim]

    # Views (v.reshape, v.view, v.permute, ...), spelled as torch's: views.py adds them.


class Tile:
    """One tile of a `td.tile` loop: indexes tensors; `.index`, `.begin`, `.size` are values."""

    __slots__ = ("value", "label")

    def __init__(self, value: Value, label: str) -> None:
        self.value = value
        self.label = label

    @property
    def range(self) -> RangeType:
        t = self.value.type
        assert isinstance(t, RangeType)
        return t

    @property
    def extent(self) -> int:
        return self.range.extent

    @property
    def index(self) -> TileValue:
        return TileValue(current().emit("tile.index", [self.value], hint=f"{self.label}_index")[0])

    @property
    def begin(self) -> TileValue:
        return TileValue(current().emit("tile.begin", [self.value], hint=f"{self.label}_begin")[0])

    @property
    def size(self) -> TileValue:
        return TileValue(current().emit("tile.size", [self.value], hint=f"{self.label}_size")[0])

    @property
    def end(self) -> TileValue:
        return self.begin + self.size

    @property
    def id(self) -> TileValue:
        """The tile's index along its loop (`begin // block_size`), as Helion's `tile.id`."""
        return TileValue(current().emit("tile.id", [self.value], hint=f"{self.label}_id")[0])

    @property
    def block_size(self) -> TileValue:
        """The block size the config gives this tile's loop, as a value."""
        return TileValue(current().emit("tile.block_size", [self.value],
                                        hint=f"{self.label}_block")[0])

    def __repr__(self) -> str:
        over = "a runtime size" if self.extent == UNBOUNDED else self.extent
        return f"Tile({self.label} over {over})"

    def _no_math(self, *_: Any) -> Any:
        current().fail(TraceError, f"tile '{self.label}' is not a value",
                       hint=f"use {self.label}.index (the indices it covers), "
                            f"{self.label}.begin or {self.label}.size")

    def __add__(self, o: Any) -> Any:  # a shifted tile (shifted.py): x[tm + 1]
        return shift(self, o, 1, "+")

    def __sub__(self, o: Any) -> Any:
        return shift(self, o, -1, "-")

    __radd__ = __add__
    __rsub__ = __mul__ = __rmul__ = _no_math
    __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __index__ = _no_math  # type: ignore[assignment]


class Shape(tuple):
    """A tensor's shape, as torch's `torch.Size`: a tuple whose slices are shapes, with
    `numel()` (flash-attn's `batch = x.shape[:-1].numel()`)."""

    __slots__ = ()

    def __getitem__(self, i: Any) -> Any:
        got = tuple.__getitem__(self, i)
        return Shape(got) if isinstance(i, slice) else got

    def numel(self) -> Any:
        n: Any = 1
        for d in self:
            n = n * d
        return n


class Tensor:
    """A tensor in global memory (an argument or an output) seen from the kernel body."""

    __slots__ = ("value", "name")
    __array_ufunc__ = None

    def __init__(self, value: Value, name: str) -> None:
        self.value = value
        self.name = name

    @property
    def type(self) -> TensorType:
        t = self.value.type
        assert isinstance(t, TensorType)
        return t

    @property
    def shape(self) -> Shape:
        return Shape(self.type.shape)

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def ndim(self) -> int:
        return len(self.type.shape)

    # `x.size` (NumPy's element count, callable as torch's `x.size(d)`) and `x.numel()`:
    # lang/torch_names.py adds them.

    def __repr__(self) -> str:
        return f"Tensor({self.name}: {self.type})"

    # In host code, `x[:, :-1]` is a view (lang/views.py `tensor_index`) and `x[:, -1] = 0`
    # a store of its own loop (lang/host_stores.py); those modules set these.
    host_index: Any = None
    host_store: Any = None

    def __getitem__(self, idx: Any) -> Any:
        if current().depth == "host":
            return self.host_index(idx)
        items = list(idx) if isinstance(idx, tuple) else [idx]
        if any(it is None for it in items):  # `w[None, :]`: the load, with new axes of 1
            return _with_new_axes(self, items)
        return self.load(idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        if current().depth == "host":
            self.host_store(idx, value)
        else:
            self.store(idx, value)

    def load(self, idx: Any, mask: Any = None, other: Any = None,
             hints: dict[str, str] | None = None) -> TileValue:
        """`self[idx]`, and with `mask` (td.load) only where it holds; elsewhere `other`.
        `hints`: Triton's cache hints (tiledsl/lang/access.py)."""
        tr = current()
        operands, full, sliced = _indices(tr, self, idx, reading=True)
        attrs: dict[str, Any] = ({"full": full} if full else {}) | sliced | (hints or {}) | \
            locked(tr)
        check_read_write(tr, self, operands, attrs, writing=False,
                         mask=None if mask is None else to_value(mask).value)
        if any(is_shifted(o) for o in operands):  # lanes shifted off the tensor read 0
            attrs["other"] = zero(self.dtype)
        mask = _with_jagged(tr, self, operands, full, sliced, mask)
        if mask is not None:
            operands.append(_access_mask(tr, self, operands, full, mask, sliced))
            attrs["mask"] = True
            if isinstance(other, TileValue):  # a runtime fill (tl.load's `other=` tensor):
                loaded = TileValue(tr.emit("load", [self.value, *operands], attrs)[0])
                return where(TileValue(operands[-1]), loaded, cast(other, self.dtype))
            if other is not None:
                attrs["other"] = _other(tr, self, other)
        return TileValue(tr.emit("load", [self.value, *operands], attrs)[0])

    def store(self, idx: Any, value: Any, mask: Any = None,
              hints: dict[str, str] | None = None, disjoint: bool = False) -> None:
        """`self[idx] = value`, and with `mask` (td.store) only where it holds (`hints`: as
        `load`'s). `disjoint`: the author says no other program touches what it writes, so
        the race check takes their word (the NumPy backend checks it: disjoint.py)."""
        tr = current()
        read_only(tr, self, "store into")
        operands, full, sliced = _indices(tr, self, idx)
        from tiledsl.ir.ops import indexed_shape
        shape = indexed_shape(self.type, [o.type for o in operands], full,
                              sliced.get("slices", ()))
        v = written_value(self, shape, value, "storing", "cannot store",
                          _flat_hint(self, len(operands)))
        checked = None if mask is None else to_value(mask).value  # (the races' checks)
        attrs = ({"full": full} if full else {}) | sliced | locked(tr)
        if not disjoint:
            check_store(tr, self.name, operands, v.value, checked, target=self.value,
                        attrs=attrs)
            check_overlap(tr, self, operands, attrs, mask=checked)
            check_read_write(tr, self, operands, attrs, writing=True, mask=checked)
        mask = _with_jagged(tr, self, operands, full, sliced, mask)
        if mask is not None:
            operands.append(_access_mask(tr, self, operands, full, mask, sliced))
            attrs["mask"] = True
        attrs.update((hints or {}) | ({"disjoint": True} if disjoint else {}))
        tr.emit("store", [self.value, *operands, v.value], attrs)  # (the checks' own dict: one
        # that waits for its loop may still mark the store, races.py `_authors_word`)

    def __len__(self) -> int:
        return self.shape[0]

    # Views that share the tensor's memory (x.reshape, x.view, x.permute, ...), made in host
    # code: views.py adds them.
    @property
    def T(self) -> Tensor:
        return self.permute(tuple(reversed(range(self.ndim))))

    def __iter__(self) -> Any:
        return self._values(f"cannot iterate over tensor '{self.name}'")

    def tolist(self) -> Any:
        """torch's `x.tolist()` in host code: of a tensor computed from small integer or bool
        arguments, their values (frontend/valued_args.py)."""
        return self._values(f"'{self.name}'.tolist(): the tensor's values are the kernel's "
                            "data")

    def __array__(self, *_: Any, **__: Any) -> Any:
        return self._values(f"NumPy's conversion of tensor '{self.name}': its values are the "
                            "kernel's data")

    def _values(self, message: str) -> Any:
        from tiledsl.frontend.valued_args import need_values
        need_values([self])
        current().fail(TraceError, message,
                       hint=f"cut it into tiles: for t in td.tile({self.name}.shape[0]): "
                            f"... {self.name}[t] ...")

    def _no_math(self, *_: Any) -> Any:
        tiles = ", ".join(("tm", "tn", "tk", "tl")[:max(1, min(self.ndim, 4))])
        no_math(self, f"{self.name}[{tiles}]")

    def item(self) -> Any:
        """torch's `x.item()`: a value of the data, which the kernel is traced without; of a
        one-element tensor in host code, read on the device where it is used (host_scalars.py)."""
        if current().depth == "host" and all(d == 1 for d in self.shape):
            return HostScalar(self)
        current().fail(TraceError, f"{self.name}.item() reads the tensor's data, which the "
                       "kernel is traced without: sizes and compile-time values come from "
                       "shapes and arguments",
                       hint="pass the number as an argument (the caller's x.item()), or keep "
                            "computing with the tensor: load it inside a grid")

    def __bool__(self) -> bool:
        """Inside the grid, Triton's `if weight_ptr:` (FlagGems' batch_norm, SGLang's
        `if kv_start_idx:`) asks whether an optional argument was given: a tensor is, None
        (a compile-time argument) is not. In host code torch would read the elements."""
        tr = current()
        if tr.depth != "host":
            return True
        tr.fail(TraceError, f"tensor '{self.name}' has no truth value in host code",
                hint=f"to test whether an optional argument was passed, write `if {self.name} "
                     "is not None:` (known when tracing; the kernel is traced for each case); "
                     f"to test its elements, reduce them inside a grid")

    def _bump(self, other: Any) -> Any:
        """`x_ptr + offs` outside a grid (inside one it is Triton's pointer: pointers.py sets
        `__add__` and `__sub__` to make one there)."""
        offsets = isinstance(other, (int, np.integer)) and not isinstance(other, bool) or \
            isinstance(other, TileValue) and other.dtype.is_int
        if offsets:
            current().fail(TraceError, f"tensor '{self.name}' + an offset in host code: Triton's "
                           "pointer arithmetic belongs inside the grid",
                           hint=f"for pid in td.grid(n): v = td.load({self.name} + pid * stride "
                                "+ cols, mask=...)")
        self._no_math()

    __add__ = __radd__ = __sub__ = _bump
    __rsub__ = __mul__ = __rmul__ = __matmul__ = _no_math
    __rmatmul__ = __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _no_math
    __mod__ = __rmod__ = __pow__ = __rpow__ = __and__ = __rand__ = __or__ = __ror__ = _no_math
    __xor__ = __rxor__ = __neg__ = __pos__ = __abs__ = __invert__ = _no_math
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _no_math  # type: ignore[assignment]
    __hash__ = object.__hash__


def written_value(t: Tensor, shape: tuple[Dim, ...], value: Any, doing: str, refused: str,
                  hint: str | None = None) -> TileValue:
    """`value` as what a store (or an atomic) writes into `t[...]` of `shape`: no float into an
    integer tensor (in a @triton.jit body, Triton's store casts it: FlagGems' `tl.store(out +
    offs, 1.0)` of its int `ones`), broadcast to the access's shape, cast to the tensor's
    dtype. `doing` and `refused` word the errors ("storing", "cannot store")."""
    tr = current()
    v = to_value(value)
    if v.dtype.is_float and not t.dtype.is_float and not tr.triton_body:
        what = "a tile of Python floats" if v.weak else f"a {v.dtype} tile"
        tr.fail(DTypeError, f"{doing} {what} into {t.dtype} tensor '{t.name}'",
                hint="cast explicitly with .astype(...) if truncation is intended"
                + (" (Triton's tl.store would truncate silently), or write ints: "
                   "td.where(c, 1, 0)" if v.weak else ""))
    if not broadcastable(v.shape, shape) and len(v.shape) <= len(shape):
        v = _expand_to_rank(tr, v, len(shape))
    if not broadcastable(v.shape, shape):
        tr.fail(ShapeError, f"{refused} a tile of shape {tr.describe_shape(v.shape)} into "
                f"'{t.name}[...]' of shape {tr.describe_shape(shape)}", hint=hint)
    return broadcast_to(cast(v, t.dtype), shape)


def _indices(tr: Tracer, t: Tensor, idx: Any, reading: bool = False
             ) -> tuple[list[Value], tuple[int, ...], dict]:
    """Index operands (ranges, integer scalars and tiles), the dims taken whole by `:` or a
    slice, and the `slices` attribute of the bounded or stepped ones (ir/slices.py)
    (`reading`: for a load, whose tiles may read an offsets tensor one longer)."""
    if tr.depth == "host":
        tr.fail(TraceError, f"tensor '{t.name}' can only be indexed inside a td.tile/td.grid loop")
    items = list(idx) if isinstance(idx, tuple) else [idx]
    if any(it is Ellipsis for it in items):
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (t.ndim - len(items) + 1)
    if len(items) > t.ndim:
        tr.fail(ShapeError, f"tensor '{t.name}' has {t.ndim} dimension(s) but is indexed with "
                f"{len(items)} indices")
    items += [slice(None)] * (t.ndim - len(items))
    operands: list[Value] = []
    full: list[int] = []
    sliced: dict[int, Slice] = {}
    for d, (it, extent) in enumerate(zip(items, t.shape)):
        if isinstance(it, ShiftedTile):
            operands.append(it.operand())
        elif isinstance(it, Tile):
            if it.range.stop and it.extent == UNBOUNDED and not it.range.indexes(extent):
                # no static bound: indexes as a tile shifted by 0 does, its lanes past the
                # tensor's edge masked (read 0, not stored)
                operands.append(shift(it, 0, 1, "+").operand())
                continue
            if it.range.stop and not it.range.indexes(extent):
                tr.fail(ShapeError, f"tile '{it.label}' runs to a runtime stop that can reach "
                        f"{it.extent}, past dimension {d} of '{t.name}', which has {extent} "
                        f"(shape {t.shape})",
                        hint=f"bound the stop: td.tile(td.minimum(stop, {extent}))")
            if not it.range.indexes(extent, reading and t.dtype.is_int):
                tr.fail(ShapeError, f"tile '{it.label}' covers {it.extent} elements but indexes "
                        f"dimension {d} of '{t.name}', which has {extent} (shape {t.shape})",
                        hint="each tile must index a dimension of the size it was made for"
                             + ("; a load from an integer tensor one longer reads its first n "
                                "entries (an offsets tensor of n + 1 entries: x_offsets[tb] and "
                                "x_offsets[tb.index + 1] with tb over n)"
                                if reading and t.dtype.is_int else "")
                             + ("; this one would run past the end (a masked access may: "
                                "td.load(x, [...], mask=m), Helion's extra_mask=)"
                                if extent < it.extent
                                else f" (is it this dimension's tile?); to cover only the "
                                f"first {it.extent}, index a view made before the loops: "
                                f"part = {t.name}[" + ":, " * d + f":{it.extent}]"))
            operands.append(it.value)
        elif isinstance(it, slice):
            whole = it.start is None and it.stop is None and it.step is None
            if not whole and (part := _slice(tr, t, d, it, extent)) is not None:
                sliced[d] = part
            full.append(d)
        elif isinstance(it, (int, np.integer)) and not isinstance(it, bool):
            i = int(it) + (extent if it < 0 else 0)
            if not 0 <= i < extent and "if" in tr.depths:  # (Liger's `for i in static_range(
                # MAX): if i < n: dV[i, ...]`): out of range only if the branch runs, which the
                # backends check then, as for a runtime scalar
                operands.append(constant(i, dtypes.index_dtype(max(extent, i + 1))).value)
                continue
            if not 0 <= i < extent:
                tr.fail(ShapeError, f"index {int(it)} is out of range for dimension {d} of "
                        f"'{t.name}' (size {extent})")
            operands.append(constant(i, dtypes.index_dtype(extent)).value)
        elif isinstance(it, TileValue) and it.dtype.is_int:
            operands.append(it.value)  # a scalar, or an index tile (a gather: ir/gathers.py)
        elif isinstance(it, TileValue):
            tr.fail(TraceError, f"tensor '{t.name}' indexed with a {it.type} value",
                    hint="index with tiles, integers, integer scalars or tiles, or `:`"
                         + ("; to select with a bool tile, load with td.load(x, [...], "
                            "mask=m) or use td.where" if it.dtype.is_bool else ""))
        else:
            tiles = isinstance(it, tuple) and it and all(isinstance(e, Tile) for e in it)
            tr.fail(TraceError, f"tensor '{t.name}' indexed with {type(it).__name__} {it!r}",
                    hint="index with tiles, integers, integer scalars or tiles, or `:`"
                         + (f"; {porting_hints.tile_tuple([e.extent for e in it])}"
                            if tiles else ""))
    _check_gather(tr, t, operands)
    return operands, tuple(full), {"slices": slices_attr(sliced)} if sliced else {}


def _slice(tr: Tracer, t: Tensor, d: int, it: slice, extent: int) -> Slice | None:
    """A bounded or stepped slice of dimension d (None when it is the whole dimension)."""
    if any(isinstance(p, TileValue) for p in (it.start, it.stop, it.step)):
        tr.fail(TraceError, f"tensor '{t.name}' sliced with a runtime bound: a slice's bounds "
                "fix the tile's shape, so they must be ints known when tracing",
                hint="for a runtime range loop over it: for tk in td.tile(n, start=a, stop=b)")
    try:
        part = normalize(it, extent)
    except ValueError as e:
        tr.fail(TraceError, f"tensor '{t.name}': {e}", hint="slice with ints from shapes, e.g. "
                f"{t.name}[tm, :n1] or {t.name}[tm, 1::2]; a runtime range needs a td.tile loop")
    if part is None:
        tr.fail(ShapeError, f"the slice {it.start}:{it.stop}:{it.step} of dimension {d} of "
                f"'{t.name}' (size {extent}) selects no element".replace("None", ""))
    return None if part == Slice(0, extent, 1) else part


def _with_new_axes(t: Tensor, items: list[Any]) -> TileValue:
    """`t[items]` where some items are None: the load of the others, then an axis of 1 where
    each None stands, as NumPy's basic indexing places it (ints drop their dimension)."""
    if items.count(Ellipsis) == 1:
        at = items.index(Ellipsis)
        real = sum(it is not None and it is not Ellipsis for it in items)
        items = items[:at] + [slice(None)] * max(t.ndim - real, 0) + items[at + 1:]
    kept = [it for it in items if it is not None]
    if any(isinstance(it, TileValue) and it.shape != () for it in kept):
        current().fail(TraceError, f"tensor '{t.name}' is indexed with None and an index tile "
                       "(a gather)", hint="gather first, then add the axis: v = x[idx]; "
                       "v[None, :]")
    v = t.load(tuple(kept))
    axis = 0
    for it in items + [slice(None)] * (t.ndim - len(kept)):
        if it is None:
            v = v.unsqueeze(axis)  # type: ignore[attr-defined]
            axis += 1
        elif isinstance(it, (slice, Tile, ShiftedTile)):
            axis += 1
    return v


def no_math(t: Tensor, example: str) -> NoReturn:
    """Fail on arithmetic with tensor `t`, which must be indexed first. Indexed in host code
    (`x[0]`, lang/views.py) it is a view of the tensor, not its elements: say so."""
    op = t.value.owner
    while op is not None and op.name == "tensor.reshape":
        op = op.operands[0].owner
    if op is not None and op.name == "tensor.slice":
        where = f" at line {op.loc.line}" if op.loc is not None else ""
        current().fail(TraceError, f"tensor '{t.name}' must be indexed before computing with it: "
                       f"indexed in host code{where}, before the tile loops, it is a view of the "
                       "tensor, not its elements",
                       hint="read the elements inside a td.tile/td.grid loop, where x[0] is a load")
    if current().depth == "host":  # torch's whole-tensor math in host code (Helion's wrapper)
        current().fail(TraceError, f"tensor '{t.name}' must be indexed before computing with "
                       "it: in host code a tensor is memory, not a value",
                       hint=f"compute inside the tile loop on what you load: for t in "
                            f"td.tile(n): v = {t.name}[t]; ... td.where(v < 0, v + n, v) ...")
    current().fail(TraceError, f"tensor '{t.name}' must be indexed before computing with it",
                   hint=f"load a tile first, e.g. {example}")


def need_static(v: Any) -> None:
    """Where a static int is needed: if `v` is computed from int arguments alone, the trace
    stops and the kernel traces again with them as Python ints (static_args.py)."""
    if isinstance(v, TileValue):
        check_static(v.value, current().int_params)


def _check_gather(tr: Tracer, t: Tensor, operands: list[Value]) -> None:
    """The index tiles of one access broadcast together (NumPy's rule; see ir/gathers.py)."""
    shapes = [o.type.shape for o in operands if is_index_tile(o.type)]  # type: ignore[union-attr]
    if len(shapes) > 1 and broadcast_dims(shapes) is None:
        tr.fail(ShapeError, f"the index tiles of '{t.name}[...]' have shapes "
                + " and ".join(tr.describe_shape(s) for s in shapes) + " which do not broadcast",
                hint="index tiles broadcast together as NumPy's integer arrays do: line them up "
                     "with v[:, None] / v[None, :]")


def _with_jagged(tr: Tracer, t: Tensor, operands: list[Value], full: tuple[int, ...],
                 sliced: dict, mask: Any) -> Any:
    """The user's mask, and the rows' masks of the td.jagged_tile loops the access uses."""
    if not tr.jagged:
        return mask
    from tiledsl.ir.ops import indexed_shape
    shape = indexed_shape(t.type, [o.type for o in operands], full, sliced.get("slices", ()))
    rows = tr.access_mask(tr, operands, shape)  # frontend/jagged.py's jagged_mask
    if rows is None:
        return mask
    return rows if mask is None else to_value(mask) & rows


def _access_mask(tr: Tracer, t: Tensor, operands: list[Value], full: tuple[int, ...],
                 mask: Any, sliced: dict) -> Value:
    """A load's or store's mask as a bool tile of the access's shape."""
    from tiledsl.ir.ops import indexed_shape
    shape = indexed_shape(t.type, [o.type for o in operands], full, sliced.get("slices", ()))
    m = to_value(mask)
    if not m.dtype.is_bool:
        tr.fail(DTypeError, f"the mask of an access to '{t.name}' must be bool, got {m.dtype}",
                hint="compare to make one, e.g. mask=tk.index[None, :] < lens[:, None]")
    if m.ndim > len(shape) or broadcast_dims([m.shape, shape]) != shape:
        tr.fail(ShapeError, f"a mask of shape {tr.describe_shape(m.shape)} does not broadcast to "
                f"'{t.name}[...]' of shape {tr.describe_shape(shape)}",
                hint=_flat_hint(t, len(operands)))
    return broadcast_to(m, shape).value


def _flat_hint(t: Tensor, indices: int) -> str | None:
    """For an access with fewer indices than `t` has dimensions: a port of Triton's flat
    pointer offsets (`x_ptr + row * stride + cols` on an N-D tensor)."""
    if indices >= t.ndim:
        return None
    return (f"{indices} index of {t.ndim} dimensions takes the others whole; a Triton pointer "
            f"offset is flat: index {t.name}.view(-1) with it, or index each dimension "
            f"({t.name}[row, cols])")


def _other(tr: Tracer, t: Tensor, other: Any) -> bool | int | float:
    """A masked load's fill value: a Python number the tensor's dtype holds (a runtime value
    is a select after the load: `Tensor.load`)."""
    if isinstance(other, constexpr):  # a module's `_MAX_INT8_VAL = tl.constexpr(127)`
        other = other.value
    if not isinstance(other, (bool, int, float, np.number)):
        tr.fail(TraceError, f"td.load: other= is a number or a scalar or tile value, got "
                f"{type(other).__name__}",
                hint="masked-off lanes take one value, e.g. other=0 or other=float('-inf')")
    if t.dtype.is_bool:
        return bool(other)
    if t.dtype.is_float:
        return float(other)
    if float(other) != int(other) or not _fits(int(other), t.dtype):
        tr.fail(DTypeError, f"td.load: other={other!r} is not a {t.dtype} value of '{t.name}'")
    return int(other)


def as_dtype(value: Any, what: str) -> DType:
    d = dtypes.from_any(value)
    if d is None:
        current().fail(DTypeError, f"{what}: {value!r} is not a tiledsl dtype",
                       hint="use td.float32, td.float16, td.bfloat16, td.int32, ...")
    return d


def constant(v: Any, dtype: DType, weak: bool = False) -> TileValue:
    if dtype.is_bool:
        v = bool(v)
    elif dtype.is_int:
        v = int(v)
    else:
        v = float(v)
    t = TileType((), dtype)
    return TileValue(current().emit("const", [], {"value": v}, [t])[0], weak)


def weak_dtype(v: Any) -> DType:
    """The IR type of a Python number: float64 keeps a float exact until it meets a typed tile
    (then it is rounded once, to that tile's dtype)."""
    if isinstance(v, (bool, np.bool_)):
        return dtypes.bool_
    if isinstance(v, (int, np.integer)):
        return dtypes.int32 if -2**31 <= int(v) < 2**31 else dtypes.int64
    return dtypes.float64


def _triton_constexpr(v: Any) -> bool:
    """Whether `v` is Triton's own `tl.constexpr(...)` (a module-level constant of Triton code)."""
    return type(v).__name__ == "constexpr" and (type(v).__module__ or "").startswith("triton.")


def to_value(v: Any) -> TileValue:
    """A TileValue from a tile value or a number (Python numbers are weak, NumPy scalars not)."""
    if isinstance(v, TileValue):
        return v
    if isinstance(v, Unmerged):
        v.fail()
    if isinstance(v, (np.generic,)) and dtypes.from_any(v.dtype) is not None:
        return constant(v.item(), dtypes.from_any(v.dtype))  # type: ignore[arg-type]
    if isinstance(v, (bool, int, float)):
        return constant(v, weak_dtype(v), weak=True)
    if isinstance(v, constexpr) or _triton_constexpr(v):  # a module's `tl.constexpr(0)`-style
        return to_value(v.value)  # constant (td's or Triton's own, FlagGems' randperm): its value
    if isinstance(v, BlockSize):  # the config's value: the kernel traces once per value
        return constant(int(v), weak_dtype(0), weak=True)
    if isinstance(v, (Tile, ShiftedTile)):
        what = "a shifted tile" if isinstance(v, ShiftedTile) else "tile"
        current().fail(TraceError, f"{what} '{v.label}' is not a value: it only indexes tensors",
                       hint=f"use {v.label}.index (plus the offset), {v.label}.begin or "
                            f"{v.label}.size")
    if isinstance(v, Tensor):
        no_math(v, f"{v.name}[tm, :]")
    if isinstance(v, HostScalar):  # a one-element tensor's x.item(): its element
        return v.load()
    if (call := foreign_calls.triton_call_in(foreign_calls.caller_frames(),
                                                      whole=v is None)) is not None:
        current().fail(TraceError, foreign_calls.message(call[0]), loc=call[1],
                       hint=foreign_calls.hint(call[0]))
    current().fail(TraceError, f"cannot use {type(v).__name__} {v!r:.60} in a tile expression",
                   hint="compile-time arguments (bool, str, None, callables) are Python values "
                        "while the kernel traces: branch on them with `if`, or call them")


def cast(v: TileValue, dtype: DType) -> TileValue:
    if v.dtype == dtype:
        return v
    return TileValue(current().emit("cast", [v.value], types=[v.type.with_dtype(dtype)])[0])


def _expand_to_rank(tr: Tracer, v: TileValue, rank: int) -> TileValue:
    while v.ndim < rank and v.ndim > 0:
        v = TileValue(tr.emit("expand_dims", [v.value], {"axis": 0})[0], v.weak)
    return v


def broadcast_shapes(tr: Tracer, shapes: Sequence[tuple[Dim, ...]]) -> tuple[Dim, ...]:
    rank = max(len(s) for s in shapes)
    out: list[Dim] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(dims) > 1:
            tr.fail(ShapeError, "shapes " + " and ".join(tr.describe_shape(s) for s in shapes)
                    + " do not broadcast", hint="tiles from different td.tile calls have "
                    "different block sizes; index with the same tile to line them up")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_to(v: TileValue, shape: tuple[Dim, ...]) -> TileValue:
    if v.shape == shape:
        return v
    tr = current()
    v = _expand_to_rank(tr, v, len(shape))
    return TileValue(tr.emit("broadcast", [v.value], types=[TileType(shape, v.dtype)])[0], v.weak)


def common_dtype(vals: Sequence[TileValue]) -> tuple[DType, bool]:
    """The dtype operands meet at, and whether the result stays weak."""
    strong = [v.dtype for v in vals if not v.weak]
    weak = [v.dtype for v in vals if v.weak]
    if not strong:
        out = weak[0]
        for d in weak[1:]:
            out = dtypes.promote(out, d) or out
        return out, True
    out = strong[0]
    for d in strong[1:]:
        p = _triton_int(out, d) if current().triton_body else None
        p = p or dtypes.promote(out, d)
        if p is None:
            current().fail(DTypeError, f"dtypes {out} and {d} do not mix",
                           hint="cast one side with .astype(...) (uint64 meets a signed int only "
                                "so: NumPy's float64 would round it)")
        out = p
    for d in weak:  # a weak number only lifts the kind (int tile * 2.5 -> float32)
        if d.is_float and not out.is_float:
            out = dtypes.float32
        elif d.is_int and out.is_bool:
            out = dtypes.int32
    return out, False


def _triton_int(a: DType, b: DType) -> DType | None:
    """Triton's meeting of a signed and an unsigned int, in a @triton.jit body (C's rule: the
    unsigned one where it is as wide, else the signed one: `pid.to(tl.uint64) * B + offs` is
    uint64, where NumPy's rule has no int); None for any other pair."""
    if not (a.is_int and b.is_int) or a.is_unsigned == b.is_unsigned:
        return None
    unsigned, signed = (a, b) if a.is_unsigned else (b, a)
    return unsigned if unsigned.bits >= signed.bits else signed


def coerce(vals: Sequence[Any], dtype: DType | None = None) -> tuple[list[TileValue], bool]:
    """Operands converted to one dtype and one shape (explicit cast and broadcast ops)."""
    tvs = [to_value(v) for v in vals]
    common, weak = common_dtype(tvs)
    dtype = dtype or common
    shape = broadcast_shapes(current(), [v.shape for v in tvs])
    return [broadcast_to(cast(v, dtype), shape) for v in tvs], weak


_NAMES = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
          "pow": "**", "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "eq": "==", "ne": "!=", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">="}


def _int_literal(v: TileValue) -> int | None:
    """The value of a Python int written in the kernel (a weak integer constant), else None."""
    owner = v.value.owner
    if v.weak and v.dtype.is_int and owner is not None and owner.name == "const":
        return int(owner.attrs["value"])
    return None


def _fits(value: int, dtype: DType) -> bool:
    info = np.iinfo(dtype.np)
    return int(info.min) <= value <= int(info.max)


def _python_ints_in_range(name: str, tvs: list[TileValue], dtype: DType) -> DType:
    """NumPy 2's rule for a Python int outside an integer tile's range: a comparison is exact
    (made here in int64), arithmetic (and td.where) is an error, as NumPy raises OverflowError;
    never a silent wrap. An int argument's value is checked when the kernel is called
    (`kernel.narrowed_ints`); comparisons with it are made in int64."""
    if not dtype.is_int:
        return dtype
    for v in tvs:
        n = _int_literal(v)
        if n is None and v.weak and v.dtype.is_int and dtype.bits < 64 and \
                name in _COMPARISONS:
            dtype = dtypes.int64  # an int argument's value is not known here: compare exactly
        if n is None or _fits(n, dtype):
            continue
        if name in _COMPARISONS and _fits(n, dtypes.int64) and dtype != dtypes.uint64:
            dtype = dtypes.int64
        else:
            current().fail(DTypeError, f"the Python integer {n} is out of range for {dtype} "
                           f"in '{_NAMES.get(name, name)}' (NumPy raises OverflowError)",
                           hint="cast the tile first, e.g. x.astype(td.int64)")
    return dtype


_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def _float_meets_ints(tvs: list[TileValue]) -> bool:
    """Whether a Python float (weak) meets integer or bool tiles and no float tile."""
    return any(v.weak and v.dtype.is_float for v in tvs) and \
        not any(not v.weak and v.dtype.is_float for v in tvs)


def _int_power(base: TileValue, exponent: TileValue) -> TileValue | None:
    """`x ** n` for an integer or bool tile and a Python int n >= 0: exact, in the tile's
    integer dtype (as NumPy), by repeated squaring; None when this rule does not apply."""
    n = _int_literal(exponent)
    if base.weak or base.dtype.is_float or n is None:
        return None
    if n < 0:
        current().fail(DTypeError, f"an integer tile to the negative power {n} (NumPy raises "
                       "ValueError)", hint="cast the tile to a float dtype first")
    if base.dtype.is_bool:
        base = cast(base, dtypes.int32)
    result: TileValue | None = None
    square = base
    while n:
        if n & 1:
            result = square if result is None else binary("mul", result, square)
        n >>= 1
        if n:
            square = binary("mul", square, square)
    return result if result is not None else binary("add", binary("mul", base, 0), 1)


def binary(name: str, a: Any, b: Any) -> TileValue:
    tvs = [to_value(a), to_value(b)]
    if name == "pow" and (power := _int_power(*tvs)) is not None:
        return power
    dtype, weak = common_dtype(tvs)
    dtype = _python_ints_in_range(name, tvs, dtype)
    if name in _COMPARISONS and _float_meets_ints(tvs):
        dtype = dtypes.float64  # exact for every int32 (as NumPy compares): x == 16777217.0
    if name in ("div", "pow") + MATH_BINARY and not dtype.is_float:
        dtype = dtypes.float64 if weak else dtypes.float32  # Python ints: 7 / 2 is a float
    if name in ("div", "mod") and dtype.is_float and dtype.bits == 16:
        dtype = dtypes.float32  # Triton's rule: 16-bit `/` and `%` compute and give float32
    if name in ("and", "or", "xor", "shl", "shr") and dtype.is_float:
        current().fail(DTypeError, f"'{_NAMES[name]}' needs integer or bool operands, got {dtype}",
                       hint="td.bitcast(x, td.int32) reads a float's bits as an integer")
    if dtype.is_bool:  # NumPy 2's rules: + and * are or and and, -, // and % are refused
        name, dtype = _on_bools(name)
    ops, _ = coerce(tvs, dtype)
    if name in ("floordiv", "mod") and current().triton_body and not all(
            o.value.owner is not None and o.value.owner.name == "const" for o in tvs):
        return _truncated(name, ops, weak)  # (of numbers written in the body: Python's)
    out = current().emit(name, [o.value for o in ops])[0]
    return TileValue(out, weak)


def _truncated(name: str, ops: list[TileValue], weak: bool) -> TileValue:
    """Triton's `//` and `%` of runtime values in a @triton.jit body (tiles, and scalar
    arguments: Triton's int32): C's, rounding the quotient toward zero (LLVM's sdiv and srem;
    a float `%` is fmod, its sign the dividend's), where tiledsl's own round it down as
    Python's. FlagGems' remainder and floor_divide correct Triton's results toward Python's,
    so Python's would be corrected twice."""
    tr = current()
    a, b = ops
    if a.dtype.is_float:
        op = "fmod" if name == "mod" else name
        return TileValue(tr.emit(op, [a.value, b.value])[0], weak)
    floor = TileValue(tr.emit(name, [a.value, b.value])[0], weak)
    if a.dtype.is_unsigned:
        return floor
    rem = floor if name == "mod" else TileValue(tr.emit("mod", [a.value, b.value])[0], weak)
    apart = (rem != 0) & ((a < 0) ^ (b < 0))  # the floor went one past zero: step back
    apart = TileValue(apart.value, weak=False)  # (a select of weak ints stays their dtype:
    # of two Python ints, td.where would make NumPy's int64, and `//` keeps its operands')
    out = FUNCTIONS["where"](apart, floor - b if name == "mod" else floor + 1, floor)
    if out.value.owner is not None and out.value.owner.name == "where":  # the Triton backend
        out.value.owner.attrs["c_division"] = name  # writes Triton's own `//` or `%` for it
    return TileValue(out.value, weak)


def _on_bools(name: str) -> tuple[str, DType]:
    """The op and dtype of arithmetic on two bools, as NumPy 2 computes it: `+` is or, `*` is
    and, `//`, `%` and shifts compute in int8; `-` raises (as NumPy's TypeError)."""
    if name == "sub":
        current().fail(DTypeError, "'-' is not defined on bools (NumPy raises TypeError)",
                       hint="use '^' for bools that differ, or cast first: x.astype(td.int32)")
    if name in ("floordiv", "mod", "shl", "shr"):
        return name, dtypes.int8
    return {"add": "or", "mul": "and"}.get(name, name), dtypes.bool_


def unary(name: str, a: Any) -> TileValue:
    v = to_value(a)
    from tiledsl.ir.ops import FLOAT_UNARY
    if name in FLOAT_UNARY and not v.dtype.is_float:  # a Python int: float64, as np.exp(2)
        v = TileValue(cast(v, dtypes.float64 if v.weak else dtypes.float32).value, v.weak)
    if name in ("neg", "sign") and v.dtype.is_bool:
        what = "unary '-'" if name == "neg" else "td.sign"
        current().fail(DTypeError, f"{what} is not defined on bools (NumPy raises TypeError)",
                       hint="use '~' for logical not, or cast first: x.astype(td.int32)")
    if name == "abs" and v.dtype.is_bool:
        return v  # NumPy: abs of a bool is the bool
    return TileValue(current().emit(name, [v.value])[0], v.weak)


def positive(v: TileValue) -> TileValue:
    """`+x`: x itself, but not for bools (NumPy 2's `np.positive` raises on them)."""
    if v.dtype.is_bool:
        current().fail(DTypeError, "unary '+' is not defined on bools (NumPy raises TypeError)",
                       hint="cast first: x.astype(td.int32)")
    return v


def dot(a: Any, b: Any) -> TileValue:
    tr = current()
    if not isinstance(a, TileValue) or not isinstance(b, TileValue):
        bad = b if isinstance(a, TileValue) else a
        if isinstance(bad, Tensor):
            to_value(bad)
        tr.fail(TraceError, f"'@' needs two tiles, got {type(bad).__name__}")
    if a.ndim != b.ndim or a.ndim not in (2, 3):
        tr.fail(ShapeError, f"'@' needs two 2-D tiles (a matrix product) or two 3-D tiles (a "
                f"batch of them), got shapes {tr.describe_shape(a.shape)} and "
                f"{tr.describe_shape(b.shape)}")
    if a.ndim == 3 and a.shape[0] != b.shape[0]:
        tr.fail(ShapeError, f"'@' batch dimensions differ: {tr.describe_shape(a.shape)} @ "
                f"{tr.describe_shape(b.shape)}", hint="index both operands with the same "
                "batch tile (a[tb, tm, tk] @ b[tb, tk, tn])")
    if a.shape[-1] != b.shape[-2]:
        tr.fail(ShapeError, f"'@' contraction dimensions differ: {tr.describe_shape(a.shape)} @ "
                f"{tr.describe_shape(b.shape)}", hint="index both operands with the same tile "
                "along the contracted dimension (a[tm, tk] @ b[tk, tn])")
    if a.dtype != b.dtype and a.dtype.is_float and b.dtype.is_float and a.dtype.bits != b.dtype.bits:
        wide = a.dtype if a.dtype.bits > b.dtype.bits else b.dtype  # NumPy's matmul promotes:
        a, b = cast(a, wide), cast(b, wide)  # float32 @ float16 is float32 (Helion's SE-net
        # backward, where tiledsl's `@` of 16-bit tiles made its float32 operand)
    if a.dtype != b.dtype:
        tr.fail(DTypeError, f"'@' operand dtypes differ: {a.dtype} @ {b.dtype}",
                hint="cast one side with .astype(...)")
    if tr.jagged:  # contracted along a td.jagged_tile's axis: each row's own lanes (jagged.py)
        for side, axis in ((0, a.ndim - 1), (1, b.ndim - 2)):
            x = (a, b)[side]
            rows = tr.jagged_rows(tr, x.value, axis)
            if rows is not None:
                masked = where(rows, x, constant(0, x.dtype))
                a, b = (masked, b) if side == 0 else (a, masked)
    return TileValue(tr.emit("dot", [a.value, b.value])[0])


def torch_axis(what: str, axis: Any, keepdims: bool, torch: dict[str, Any]) -> tuple[Any, bool]:
    """(axis, keepdims) from NumPy's names, torch's `dim=` / `keepdim=` or Triton's
    `keep_dims=`."""
    unknown = set(torch) - {"dim", "keepdim", "keep_dims"}
    if unknown or ("dim" in torch and axis is not None):
        current().fail(TraceError, f"{what}() got an unexpected keyword argument "
                       f"{sorted(unknown)[0] if unknown else 'dim'!r}",
                       hint="the axis is axis= (NumPy) or dim= (torch), and keepdims=, "
                            "keepdim= or keep_dims=")
    return torch.get("dim", axis), torch.get("keepdim", torch.get("keep_dims", keepdims))


def reduce(kind: str, x: Any, axis: Any, keepdims: bool) -> TileValue:
    v = to_value(x)
    tr = current()
    if axis is None:
        axes = list(range(v.ndim))
    else:
        axes = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    norm = []
    for a in axes:
        if isinstance(a, TileValue):
            need_static(a)
            tr.fail(ShapeError, f"td.{kind}: axis must be a constant int, not a tile value or a "
                    "kernel argument", hint="the axis fixes the result's shape at trace time")
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)) or \
                not -v.ndim <= a < v.ndim:
            tr.fail(ShapeError, f"td.{kind}: axis {a!r} is not an axis of a {v.ndim}-D tile")
        if int(a) % v.ndim in norm:
            tr.fail(ShapeError, f"td.{kind}: axis {axis!r} names an axis twice")
        norm.append(int(a) % v.ndim)
    if not isinstance(keepdims, (bool, np.bool_, int, np.integer)) or keepdims not in (0, 1):
        tr.fail(TraceError, f"td.{kind}: keepdims must be True or False, got {keepdims!r}")
    if kind in ARG_REDUCTIONS and len(norm) != 1:
        tr.fail(ShapeError, f"td.{kind} takes one axis, got {axis!r} for a {v.ndim}-D tile",
                hint=f"positions are along one axis: td.{kind}(x, axis=1)")
    if kind in ARG_REDUCTIONS and v.dtype.is_bool:
        v = cast(v, dtypes.int8)  # the first True (False), as NumPy
    out = v
    for a in sorted(set(norm), reverse=True):
        rows = tr.jagged_rows(tr, out.value, a) if tr.jagged else None
        if rows is not None:  # a td.jagged_tile's axis: each row's own lanes (jagged.py)
            out = _jagged_reduce(kind, out, a, bool(keepdims), rows)
            continue
        attrs = {"kind": kind, "axis": a, "keepdims": bool(keepdims)}
        out = TileValue(tr.emit("reduce", [out.value], attrs)[0], v.weak)
    return out


def _jagged_reduce(kind: str, v: TileValue, axis: int, keepdims: bool, rows: TileValue
                   ) -> TileValue:
    """`kind` along `axis` over the lanes `rows` keeps: the others hold its identity; a mean
    divides the rows' sums by their counts of lanes."""
    tr = current()
    attrs = {"kind": "sum" if kind == "mean" else kind, "axis": axis, "keepdims": keepdims}
    fill = 0 if kind == "mean" else dtypes.identity(kind, v.dtype)
    kept = where(rows, v, constant(fill, v.dtype))
    out = TileValue(tr.emit("reduce", [kept.value], attrs)[0], v.weak)
    if kind != "mean":
        return out
    counts = TileValue(tr.emit("reduce", [cast(rows, out.dtype).value],
                               dict(attrs, kind="sum"))[0])
    return out / counts


def cumsum(x: Any, axis: Any) -> TileValue:
    v = to_value(x)
    tr = current()
    if axis is None and v.ndim == 1:
        axis = 0
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or \
            not -v.ndim <= axis < v.ndim:
        tr.fail(ShapeError, f"td.cumsum: axis {axis!r} is not an axis of a {v.ndim}-D tile",
                hint="sums run along one axis: td.cumsum(x, axis=1)")
    attrs = {"axis": int(axis) % v.ndim}
    return TileValue(tr.emit("cumsum", [v.value], attrs)[0], v.weak)


def where(cond: Any, x: Any, y: Any) -> TileValue:
    c = to_value(cond)
    if c.dtype.is_int:  # Triton's: a nonzero int is true
        c = binary("ne", c, 0)
    if not c.dtype.is_bool:
        current().fail(DTypeError, f"td.where: the condition must be bool (or an int), got "
                       f"{c.dtype}", hint="compare to make a mask, e.g. td.where(x > 0, x, 0.0)")
    tvs = [to_value(x), to_value(y)]
    dtype, weak = common_dtype(tvs)
    dtype = _python_ints_in_range("where", tvs, dtype)
    shape = broadcast_shapes(current(), [c.shape, tvs[0].shape, tvs[1].shape])
    ops = [broadcast_to(c, shape)] + [broadcast_to(cast(v, dtype), shape) for v in tvs]
    return TileValue(current().emit("where", [o.value for o in ops])[0], weak)

