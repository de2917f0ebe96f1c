"""Views: new shapes and axis orders of tiles (`v.reshape`, `v.permute`, `td.join`, `td.split`,
`td.stack`) and of tensors in host code (`x.reshape`, `x.view`, `x.permute`, `x.transpose`,
`x.flatten`, `x.unsqueeze`, `x.squeeze`, and indexing: `x[:, :-1]`, `x[0]`, `x[..., ::2]`,
`x[:, None]`), spelled as in PyTorch and Helion.

A tile's block-size axes keep their own axes through a reshape (their sizes are only known once
a config is chosen): only runs of constant axes between them merge or split, as RoPE's
`x.reshape(tb, tt, 2, half)` does. A tensor view never copies: it shares its tensor's memory
(reads see, and stores write, the original), so a layout that cannot be viewed with the new
shape is an error when the kernel runs, as torch's `view`.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from tiledsl import dtypes
from tiledsl.dtypes import DType
from tiledsl.errors import DTypeError, ShapeError, TraceError
from tiledsl.ir.ops import reshape_groups
from tiledsl.ir import views
from tiledsl.ir.slices import Slice, normalize, to_attr
from tiledsl.ir.types import Dim
from tiledsl.frontend.block_sizes import BlockSize, shape_dim
from tiledsl.frontend.symdims import SymDim
from tiledsl.frontend.tracer import current
from tiledsl.frontend.zero_d_memory import as_memory
from tiledsl.frontend.values import (
    Tensor, Tile, TileValue, broadcast_shapes, need_static, to_value,
)
from tiledsl.frontend.values import broadcast_to as broadcast_to_shape


def _shape_args(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """`f(a, b)` and `f((a, b))` / `f([a, b])` alike, as torch's reshape and permute."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _axis(a: Any, rank: int, what: str) -> int:
    need_static(a)  # an int argument (attorch's GLU `x.chunk(2, dim=dim)`): traced as that int
    if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or not -rank <= a < rank:
        current().fail(ShapeError, f"{what}: {a!r} is not an axis of a {rank}-D value")
    return int(a) % rank


def _permutation(dims: tuple[Any, ...], rank: int, what: str) -> tuple[int, ...]:
    perm = tuple(_axis(d, rank, what) for d in _shape_args(dims))
    if sorted(perm) != list(range(rank)):
        current().fail(ShapeError, f"{what}: {perm} is not a permutation of {rank} axes",
                       hint=f"name every axis once, e.g. .permute({', '.join(map(str, reversed(range(rank))))})")
    return perm


def _swap(rank: int, a: Any, b: Any, what: str) -> tuple[int, ...]:
    perm = list(range(rank))
    i, j = _axis(a, rank, what), _axis(b, rank, what)
    perm[i], perm[j] = perm[j], perm[i]
    return tuple(perm)


# ---- tiles --------------------------------------------------------------------------------
def _tile_shape(v: TileValue, shape: tuple[Any, ...]) -> tuple[Dim, ...]:
    """Entries are tiles (their block size), positive ints, and at most one -1."""
    tr = current()
    dims: list[Dim | None] = []
    for s in _shape_args(shape):
        need_static(s)  # an int argument as a size: traced as a static int
        if isinstance(s, Tile):
            dims.append(s.range.block)
        elif isinstance(s, BlockSize):  # td.register_block_size's symbol
            dims.append(shape_dim(s))
        elif isinstance(s, str) and s in tr.symbols:  # an entry of a tile value's `.shape`
            dims.append(s)
        elif isinstance(s, (int, np.integer)) and not isinstance(s, bool) and (s >= 1 or s == -1):
            dims.append(None if s == -1 else int(s))
        else:
            tr.fail(ShapeError, f"reshape: shape entries are tiles, a tile value's .shape "
                    f"entries, positive ints or one -1, got {s!r}")
    if dims.count(None) > 1:
        tr.fail(ShapeError, "reshape: only one dimension can be -1")
    if None in dims:
        known = [d for d in dims if d is not None]
        if any(isinstance(d, str) for d in known) or any(isinstance(d, str) for d in v.shape):
            blocks = [d for d in v.shape if isinstance(d, str)]
            rest = [d for d in dims if isinstance(d, str)]
            if blocks != rest:
                tr.fail(ShapeError, "reshape: -1 cannot stand for a tile's block size",
                        hint="name the tile in the shape, e.g. v.reshape(tm, 2, -1)")
        size = math.prod(d for d in v.shape if isinstance(d, int))
        part = math.prod(d for d in known if isinstance(d, int))
        if part == 0 or size % part:
            tr.fail(ShapeError, f"reshape: cannot infer -1 for shape {tr.describe_shape(v.shape)}")
        dims[dims.index(None)] = size // part
    return tuple(d for d in dims if d is not None)


def reshape(x: Any, *shape: Any) -> TileValue:
    """The tile's elements in row-major order in a new shape (torch's `reshape`/`view`)."""
    current("reshape")
    v = to_value(x)
    return _reshape_to(v, _tile_shape(v, shape))


def _reshape_to(v: TileValue, new: tuple[Dim, ...]) -> TileValue:
    tr = current()
    if reshape_groups(v.shape, new) is None:
        tr.fail(ShapeError, f"cannot reshape a tile of shape {tr.describe_shape(v.shape)} to "
                f"{tr.describe_shape(new)}", hint="a tile's block-size axes keep their own "
                "axes and order (their sizes are chosen by the config); only the constant "
                "dimensions between them can be merged or split, with equal products")
    if new == v.shape:
        return v
    return TileValue(tr.emit("reshape", [v.value], {"shape": new})[0], v.weak)


def permute(x: Any, *dims: Any) -> TileValue:
    """The tile with its axes reordered: result axis i is axis dims[i] (torch's `permute`)."""
    tr = current("permute")
    v = to_value(x)
    perm = _permutation(dims, v.ndim, "permute")
    if perm == tuple(range(v.ndim)):
        return v
    return TileValue(tr.emit("transpose", [v.value], {"perm": perm})[0], v.weak)


def transpose(x: Any, a: Any = 0, b: Any = 1) -> TileValue:
    """The tile with axes a and b swapped (torch's `transpose`)."""
    v = to_value(x)
    return permute(v, _swap(v.ndim, a, b, "transpose"))


def unsqueeze(x: Any, axis: Any) -> TileValue:
    """A new axis of 1 at `axis` (negative counts from the end of the result)."""
    tr = current("unsqueeze")
    v = to_value(x)
    at = _axis(axis, v.ndim + 1, "unsqueeze")
    return TileValue(tr.emit("expand_dims", [v.value], {"axis": at})[0], v.weak)


def expand(x: Any, *shape: Any) -> TileValue:
    """The tile broadcast to `shape` (torch's `expand`): entries are tiles, ints, or -1 to keep
    a dimension; axes of 1 grow and new axes lead."""
    return _expand(x, shape, "expand")


def broadcast_to(x: Any, *shape: Any) -> Any:
    """Triton's `tl.broadcast_to(x, shape)`: `expand`'s rule; of a tensor in host code, its
    read-only expanded view (`tensor_expand`)."""
    if isinstance(x, Tensor):
        return tensor_expand(x, *shape)
    return _expand(x, shape, "broadcast_to")


def broadcast(a: Any, b: Any) -> tuple[TileValue, TileValue]:
    """Triton's `tl.broadcast(a, b)`: both broadcast to their common shape."""
    tr = current("broadcast")
    u, v = to_value(a), to_value(b)
    shape = broadcast_shapes(tr, [u.shape, v.shape])
    return broadcast_to_shape(u, shape), broadcast_to_shape(v, shape)


def _expand(x: Any, shape: tuple[Any, ...], what: str) -> TileValue:
    tr = current(what)
    v = to_value(x)
    dims = _shape_args(shape)
    lead = len(dims) - v.ndim
    new: list[Dim] = []
    for i, s in enumerate(dims):
        if isinstance(s, Tile):
            new.append(s.range.block)
        elif isinstance(s, BlockSize):  # td.register_block_size's symbol
            new.append(shape_dim(s))
        elif isinstance(s, str) and s in tr.symbols:  # an entry of a tile value's `.size()`
            new.append(s)
        elif isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s == -1 and i >= lead:
            new.append(v.shape[i - lead])
        elif isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 1:
            new.append(int(s))
        else:
            tr.fail(ShapeError, f"{what}: shape entries are tiles, a tile value's .shape "
                    f"entries, positive ints or -1 (keep), got {s!r}")
    return _expand_to(v, tuple(new))


def expand_as(x: Any, other: Any) -> TileValue:
    """The tile broadcast to `other`'s shape (torch's `expand_as`)."""
    current("expand_as")
    return _expand_to(to_value(x), to_value(other).shape)


def _expand_to(v: TileValue, new: tuple[Dim, ...]) -> TileValue:
    tr = current()
    lead = len(new) - v.ndim
    if lead < 0 or any(d not in (1, new[i + lead]) for i, d in enumerate(v.shape)):
        tr.fail(ShapeError, f"cannot expand a tile of shape {tr.describe_shape(v.shape)} to "
                f"{tr.describe_shape(new)}", hint="only axes of 1 grow (and new axes lead), as "
                "torch's expand")
    return broadcast_to_shape(v, new)


def _squeezed(shape: tuple, axis: Any, dim: Any, what: str) -> set[int]:
    """The axes of 1 that torch's `squeeze(dim)` drops: `dim` an axis or a tuple of axes
    (torch 2), or None for all; an axis of another size stays, as in torch."""
    if axis is not None and dim is not None:
        current().fail(TraceError, f"{what}: give the axis once, as axis= or dim=")
    axis = dim if axis is None else axis
    named = range(len(shape)) if axis is None else \
        [_axis(a, len(shape), what) for a in (axis if isinstance(axis, (tuple, list)) else [axis])]
    return {a for a in named if shape[a] == 1}


def squeeze(x: Any, axis: Any = None, *, dim: Any = None) -> TileValue:
    """Without axes of 1 (`axis` names one or a tuple; None drops all). As torch's, an axis of
    another size stays: a block-size axis is never dropped (Helion's `v.squeeze(0)` on a
    `[tile]`)."""
    v = to_value(x)
    axes = _squeezed(v.shape, axis, dim, "squeeze")
    return _reshape_to(v, tuple(d for i, d in enumerate(v.shape) if i not in axes))


def flatten(x: Any) -> TileValue:
    """The tile as one axis: its constant elements, or one block-size axis with axes of 1."""
    v = to_value(x)
    blocks = [d for d in v.shape if isinstance(d, str)]
    if not blocks:
        return _reshape_to(v, (math.prod(v.shape),))  # type: ignore[arg-type]
    if len(blocks) == 1 and all(d == 1 for d in v.shape if isinstance(d, int)):
        return _reshape_to(v, (blocks[0],))
    return _reshape_to(v, (-1,))  # refused, with the reason


def gather(src: Any, index: Any, axis: int) -> TileValue:
    """`tl.gather(src, index, axis)`: `out[..., i, ...] = src[..., index[..., i, ...], ...]`
    along `axis`, within the tile (the index tile's shape; the other axes as the source's)."""
    tr = current("td.gather()")
    s, i = to_value(src), to_value(index)
    need_static(axis)  # an int argument: traced as that int
    if isinstance(axis, bool) or not isinstance(axis, int) or not -s.ndim <= axis < s.ndim:
        tr.fail(ShapeError, f"td.gather: axis {axis!r} is not an axis of a {s.ndim}-D tile")
    return TileValue(tr.emit("gather", [s.value, i.value], {"axis": axis % s.ndim})[0])


def join(a: Any, b: Any) -> TileValue:
    """Two tiles side by side along a new last axis of 2 (`tl.join`, Helion's `hl.join`)."""
    tr = current("td.join()")
    x, y = to_value(a), to_value(b)
    if x.shape != y.shape:
        tr.fail(ShapeError, f"td.join: the tiles' shapes differ: {tr.describe_shape(x.shape)} "
                f"and {tr.describe_shape(y.shape)}")
    if x.dtype != y.dtype:
        from tiledsl.frontend.values import coerce
        (x, y), _ = coerce([x, y])
    return TileValue(tr.emit("join", [x.value, y.value])[0], x.weak and y.weak)


def split(x: Any) -> tuple[TileValue, TileValue]:
    """The two halves of a tile whose last axis is 2 (`tl.split`, Helion's `hl.split`)."""
    tr = current("td.split()")
    v = to_value(x)
    if not v.shape or v.shape[-1] != 2:
        tr.fail(ShapeError, f"td.split needs a tile whose last axis is 2, got shape "
                f"{tr.describe_shape(v.shape)}", hint="reshape or permute first, e.g. "
                "td.split(v.reshape(tm, -1, 2))")
    lo, hi = tr.emit("split", [v.value])
    return TileValue(lo, v.weak), TileValue(hi, v.weak)


def stack(values: Sequence[Any], axis: int = 0, *, dim: int | None = None) -> TileValue:
    """Two tiles stacked along a new `axis` (torch's `dim=`; a join and a permute): torch's
    `stack`."""
    tr = current("td.stack()")
    axis = axis if dim is None else dim
    if not isinstance(values, (list, tuple)) or len(values) != 2:
        tr.fail(ShapeError, f"td.stack takes two tiles, got "
                f"{len(values) if isinstance(values, (list, tuple)) else type(values).__name__}",
                hint="stack pairs, or build larger tiles with td.join and reshape")
    joined = join(values[0], values[1])
    at = _axis(axis, joined.ndim, "td.stack")
    perm = list(range(joined.ndim - 1))
    perm.insert(at, joined.ndim - 1)
    return permute(joined, tuple(perm))


# ---- tensors ------------------------------------------------------------------------------
def _host(t: Tensor, what: str) -> None:
    tr = current(what)
    if tr.depth != "host":
        tr.fail(TraceError, f"{what}: views of tensor '{t.name}' are made in host code, before "
                "the tile loops", hint=f"view it before the loops, e.g. x2 = {t.name}.reshape(...)")


def _tensor_view(t: Tensor, name: str, attrs: dict[str, Any], label: str) -> Tensor:
    v = current().emit(name, [t.value], attrs, hint=t.value.hint)[0]
    return Tensor(v, label)


def tensor_reshape(t: Tensor, *shape: Any, what: str = "reshape") -> Tensor:
    """The tensor's elements in row-major order with a new shape, sharing its memory; where
    its layout gives no such view, `reshape` and `flatten` copy it first (torch's; a copy grid,
    which stores through the result do not reach t), and `view` is an error."""
    _host(t, f"{t.name}.{what}")
    tr = current()
    dims = list(_shape_args(shape))
    for s in dims:
        need_static(s)  # an int argument as a size: the kernel traces it as a static int
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not (s >= 1 or s == -1):
            tr.fail(ShapeError, f"{t.name}.{what}: shape entries are positive ints and at most "
                    f"one -1, got {s!r}")
    if dims.count(-1) > 1:
        tr.fail(ShapeError, f"{t.name}.{what}: only one dimension can be -1")
    size = math.prod(t.shape)  # Python arithmetic keeps argument sizes symbolic (symdims.py)
    if -1 in dims:
        part = math.prod(d for d in dims if d != -1)
        if size % part:
            tr.fail(ShapeError, f"{t.name}.{what}: cannot view shape {t.shape} as {tuple(dims)}")
        dims[dims.index(-1)] = size // part
    new = tuple(d if isinstance(d, SymDim) else int(d) for d in dims)
    if math.prod(new) != size:
        tr.fail(ShapeError, f"{t.name}.{what}: cannot view shape {t.shape} ({size} elements) "
                f"as {new} ({math.prod(new)} elements)")
    if new == t.shape:
        return t
    base = views.root(t.value)
    # the trace is for its arguments' layouts (row-major unless the spec says otherwise) and
    # allocations are row-major: whether a view exists is known now (an argument no kernel
    # can address, NumPy's x[::-1], is traced as row-major and checked where it runs)
    laid = views.strides_of(t.value, tr.strides(base))
    if laid is None or views.reshape_strides(t.shape, laid, new) is None:
        if what in ("reshape", "flatten"):  # torch's copy where no view can be
            return tensor_reshape(t.clone(memory_format="contiguous"), *shape, what=what)
        laid_out = f"laid out with strides {tr.layouts[base]}" if base in tr.layouts \
            else "permuted"
        tr.fail(ShapeError, f"{t.name}.{what}: a view of shape {new} of this tensor "
                f"({laid_out}) would need a copy, and views of tensors never copy",
                hint="index the tensor as it is, or copy it first: x.contiguous() (or "
                     "x.clone()) is a grid of its own")
    return _tensor_view(t, "tensor.reshape", {"shape": new}, f"{t.name}.{what}{new}")


def tensor_permute(t: Tensor, *dims: Any) -> Tensor:
    """The tensor with its dimensions reordered (torch's `permute`), sharing its memory."""
    _host(t, f"{t.name}.permute")
    perm = _permutation(dims, t.ndim, f"{t.name}.permute")
    if perm == tuple(range(t.ndim)):
        return t
    return _tensor_view(t, "tensor.permute", {"perm": perm}, f"{t.name}.permute{perm}")


def tensor_expand(t: Tensor, *sizes: Any) -> Tensor:
    """torch's `x.expand(*sizes)` (and `x.broadcast_to(shape)`, `torch.broadcast_to`) in host
    code: a view whose dimensions of 1 repeat (stride 0), -1 keeping a size; read-only."""
    _host(t, f"{t.name}.expand")
    tr = current()
    dims = list(_shape_args(sizes))
    lead = len(dims) - t.ndim
    if lead < 0:
        tr.fail(ShapeError, f"{t.name}.expand{tuple(dims)}: fewer dimensions than the tensor's "
                f"{t.ndim}")
    for s in dims:
        need_static(s)
    shape = tuple(t.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(dims))
    if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in shape) \
            or any(n not in (1, m) for n, m in zip(t.shape, shape[lead:])):
        tr.fail(ShapeError, f"{t.name}.expand{tuple(dims)}: a tensor of shape {t.shape} "
                "expands its dimensions of 1 (and new leading ones) only")
    if shape == tuple(t.shape):
        return t
    return _tensor_view(t, "tensor.expand", {"shape": tuple(int(s) for s in shape)},
                        f"{t.name}.expand{shape}")


def tensor_expand_as(t: Tensor, other: Any) -> Tensor:
    """torch's `x.expand_as(y)`: `x.expand(y.shape)`."""
    return tensor_expand(t, tuple(other.shape))


def _atleast(rank: int) -> Any:
    def fn(*tensors: Any) -> Any:
        """torch's `atleast_{rank}d` in host code: views with leading (and, from 1-D to 3-D,
        trailing) dimensions of 1; of a list or tuple, a tuple of them."""
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            return tuple(fn(t) for t in tensors[0])
        if len(tensors) > 1:
            return tuple(fn(t) for t in tensors)
        t = tensors[0]
        if not isinstance(t, Tensor):
            current().fail(TraceError, f"td.atleast_{rank}d takes tensors, got "
                           f"{type(t).__name__}")
        shape = tuple(t.shape)
        if len(shape) >= rank:
            return t
        new = {1: (1,), 2: (1, *shape) if shape else (1, 1),
               3: (1, *shape, 1) if len(shape) == 1 else (1, *shape) if shape else (1, 1, 1)}
        return tensor_reshape(t, new[rank], what=f"atleast_{rank}d")
    fn.__name__ = fn.__qualname__ = f"atleast_{rank}d"
    return fn


atleast_1d, atleast_2d, atleast_3d = _atleast(1), _atleast(2), _atleast(3)


def tensor_transpose(t: Tensor, a: Any = 0, b: Any = 1) -> Tensor:
    return tensor_permute(t, _swap(t.ndim, a, b, f"{t.name}.transpose"))


def tensor_unsqueeze(t: Tensor, axis: Any) -> Tensor:
    at = _axis(axis, t.ndim + 1, f"{t.name}.unsqueeze")
    return tensor_reshape(t, t.shape[:at] + (1,) + t.shape[at:], what="unsqueeze")


def tensor_squeeze(t: Tensor, axis: Any = None, *, dim: Any = None) -> Tensor:
    """torch's `x.squeeze(dim)` in host code: a view without those dimensions of 1."""
    axes = _squeezed(t.shape, axis, dim, f"{t.name}.squeeze")
    if not axes:
        return t
    shape = tuple(d for i, d in enumerate(t.shape) if i not in axes)
    return tensor_reshape(t, shape, what="squeeze")


def tensor_flatten(t: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """torch's `x.flatten(start_dim, end_dim)`: those dimensions merged into one."""
    if (start_dim, end_dim) == (0, -1):
        return tensor_reshape(t, t.size, what="flatten")
    a = _axis(start_dim, t.ndim, f"{t.name}.flatten")
    b = _axis(end_dim, t.ndim, f"{t.name}.flatten")
    merged = math.prod(t.shape[a:b + 1])
    return tensor_reshape(t, t.shape[:a] + (merged,) + t.shape[b + 1:], what="flatten")


def tensor_view_as(t: Tensor, other: Any) -> Tensor:
    """torch's `x.view_as(y)`: `x.view(y.shape)`."""
    return tensor_reshape(t, tuple(other.shape), what="view_as")


def tensor_narrow(t: Tensor, dim: Any, start: Any, length: Any) -> Tensor:
    """torch's `x.narrow(dim, start, length)`: `length` entries of dimension `dim` from `start`
    (negative: from the end), a view."""
    d = _axis(dim, t.ndim, f"{t.name}.narrow")
    start = start + t.shape[d] if isinstance(start, int) and start < 0 else start
    return tensor_index(t, (slice(None),) * d + (slice(start, start + length),))


def tensor_split(t: Tensor, sizes: Any, dim: Any = 0) -> tuple[Tensor, ...]:
    """torch's `x.split(size, dim)` (parts of `size` entries, the last smaller) and
    `x.split([a, b, ...], dim)` (parts of those sizes): views."""
    d = _axis(dim, t.ndim, f"{t.name}.split")
    n = t.shape[d]
    if isinstance(sizes, (list, tuple)):
        if sum(sizes) != n:
            current().fail(ShapeError, f"{t.name}.split({list(sizes)}, {dim}): the sizes add "
                           f"up to {sum(sizes)}, not dimension {d}'s {n}")
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        return tuple(tensor_narrow(t, d, a, k) for a, k in zip(starts, sizes))
    if isinstance(sizes, bool) or not isinstance(sizes, int) or sizes < 1:
        current().fail(ShapeError, f"{t.name}.split({sizes!r}): a part's size is a positive "
                       "int (or a list of sizes)")
    return tuple(tensor_narrow(t, d, a, min(sizes, n - a)) for a in range(0, n, sizes))


def tensor_chunk(t: Tensor, chunks: Any, dim: Any = 0) -> tuple[Tensor, ...]:
    """torch's `x.chunk(n, dim)` (`torch.chunk`: FlagGems' glu halves its input): parts of
    ceil(size / n) entries, the last smaller, at most n of them."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        current().fail(ShapeError, f"{t.name}.chunk({chunks!r}): the number of parts is a "
                       "positive int")
    n = t.shape[_axis(dim, t.ndim, f"{t.name}.chunk")]
    return tensor_split(t, max(1, -(-n // chunks)), dim)


def tensor_diagonal(t: Tensor, offset: int = 0, dim1: Any = 0, dim2: Any = 1) -> Tensor:
    """torch's `x.diagonal(offset, dim1, dim2)` (`torch.diagonal`: FlagGems' diag_embed writes
    through one): the elements `(i, i + offset)` of dimensions dim1 and dim2 (`(i - offset, i)`
    for a negative offset), as a last dimension, a view: the two dimensions merged into one,
    then every (n2 + 1)-th element of it."""
    for v in (offset, dim1, dim2):  # int arguments (FlagGems' diagonal_backward): static
        need_static(v)
    what = f"{t.name}.diagonal({offset}, {dim1}, {dim2})"
    a, b = _axis(dim1, t.ndim, what), _axis(dim2, t.ndim, what)
    if a == b or isinstance(offset, bool) or not isinstance(offset, int):
        current().fail(ShapeError, f"{what}: two different dimensions and an int offset")
    rest = [d for d in range(t.ndim) if d not in (a, b)]
    v = t if rest + [a, b] == list(range(t.ndim)) else tensor_permute(t, *rest, a, b)
    n1, n2 = v.shape[-2:]
    strides = v.stride()  # type: ignore[attr-defined]
    if strides[-2] != n2 * strides[-1]:
        current().fail(ShapeError, f"{what}: the two dimensions are not adjacent in memory "
                       f"(strides {strides[-2]} and {strides[-1]}), so no view of tiledsl's "
                       "reaches their diagonal", hint="take the diagonal of two dimensions "
                       "next to each other in memory (the last two of a row-major tensor), "
                       "or of x.contiguous() laid out so")
    k = min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2)
    if k < 1:
        current().fail(ShapeError, f"{what}: an offset past the {n1}x{n2} block leaves no "
                       "diagonal", hint="a tensor here has at least one element")
    flat = tensor_reshape(v, *v.shape[:-2], n1 * n2, what="diagonal")
    start = offset if offset >= 0 else -offset * n2
    return tensor_index(flat, (Ellipsis, slice(start, start + (k - 1) * (n2 + 1) + 1, n2 + 1)))


def tensor_index(t: Tensor, idx: Any) -> Tensor:
    """`x[:, :-1, :]`, `x[0]`, `x[..., ::2]`, `x[:, None]` in host code: the part of the tensor
    that torch's basic indexing selects, as a view sharing its memory. Bounds are ints known
    when tracing (int arguments become static); steps are positive, as torch's."""
    what = f"{t.name}[...]"
    tr = current(what)
    items = _index_items(t, idx, what)
    parts: dict[int, Slice] = {}
    shape: list[Any] = []  # the view's shape after ints drop and None adds dimensions
    dims = iter(range(t.ndim))
    for it in items:
        if it is None:
            shape.append(1)
            continue
        d = next(dims)
        part = _index_part(it, d, t.shape[d], what)
        if isinstance(it, slice):
            shape.append(part.size)
        if part != Slice(0, t.shape[d], 1):
            parts[d] = part
    out = t
    if parts:
        v = tr.emit("tensor.slice", [t.value], {"slices": to_attr(parts)}, hint=t.value.hint)[0]
        written = list(idx) if isinstance(idx, tuple) else [idx]  # as the user wrote it
        out = Tensor(v, f"{t.name}[{_index_text(written)}]")
    if tuple(shape) == out.shape:
        return out
    viewed = tensor_reshape(out, tuple(shape), what="index")  # `x[0]` of 1-D is 0-d, as torch's
    viewed.name = f"{t.name}[{_index_text(list(idx) if isinstance(idx, tuple) else [idx])}]"
    return viewed


def _index_part(it: Any, d: int, extent: int, what: str) -> Slice:
    """What entry `it` (a slice or an int) of a host index selects of dimension d."""
    tr = current()
    if isinstance(it, slice):
        for b in (it.start, it.stop, it.step):
            need_static(b)
        try:
            part = normalize(it, extent)
        except ValueError as e:
            tr.fail(TraceError, f"{what}: {e}",
                    hint="index tensors with tiles inside the loops; a view's bounds are ints")
        if part is None:
            tr.fail(ShapeError, f"{what}: the slice {it.start}:{it.stop}:{it.step} of "
                    f"dimension {d} (size {extent}) selects no element".replace("None", ""))
        return part
    need_static(it)
    if isinstance(it, bool) or not isinstance(it, (int, np.integer)):
        tr.fail(TraceError, f"{what}: index {it!r} of dimension {d}: in host code a tensor is "
                "indexed with ints, slices, None and ...",
                hint="gather and index with tiles inside the td.tile loops")
    at = int(it) + (extent if it < 0 else 0)
    if not 0 <= at < extent:
        tr.fail(ShapeError, f"{what}: index {int(it)} is out of range for dimension {d} "
                f"(size {extent})")
    return Slice(at, 1, 1)


def _index_items(t: Tensor, idx: Any, what: str) -> list[Any]:
    """The index's entries, one per dimension of `t` (and None for each new one)."""
    items = list(idx) if isinstance(idx, tuple) else [idx]
    if items.count(Ellipsis) > 1:
        current().fail(TraceError, f"{what}: an index can only have a single ellipsis ('...')")
    dims = sum(it is not None and it is not Ellipsis for it in items)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * max(t.ndim - dims, 0)
        dims = t.ndim if dims <= t.ndim else dims
    if dims > t.ndim:
        current().fail(ShapeError, f"{what}: tensor '{t.name}' has {t.ndim} dimension(s) but is "
                       f"indexed with {dims}")
    return items + [slice(None)] * (t.ndim - dims)


def _index_text(items: list[Any]) -> str:
    def one(it: Any) -> str:
        if not isinstance(it, slice):
            return "..." if it is Ellipsis else repr(it)
        text = ":".join("" if b is None else str(b) for b in (it.start, it.stop))
        return text if it.step is None else f"{text}:{it.step}"
    return ", ".join(map(one, items))


Tensor.host_index = tensor_index


# ---- the methods --------------------------------------------------------------------------
def tensor_view(t: Tensor, *shape: Any) -> Tensor:
    """torch's `x.view(*shape)`, or `x.view(dtype)`: x's bits read as a dtype as wide."""
    if len(shape) == 1 and dtypes.from_any(shape[0]) is not None and \
            not isinstance(shape[0], (int, np.integer)):
        return tensor_bitcast(t, dtypes.from_any(shape[0]))
    if len(shape) == 1 and type(shape[0]).__name__ == "dtype":  # torch's or NumPy's, unknown
        current(f"{t.name}.view(...)").fail(
            DTypeError, f"{t.name}.view({shape[0]}): tiledsl has no dtype {shape[0]}",
            hint="view it as a dtype tiledsl has, as wide (uint8 for an 8-bit one), and "
                 "convert where the result is used")
    return tensor_reshape(t, *shape, what="view")


def tensor_bitcast(t: Tensor, dtype: DType) -> Tensor:
    """`x.view(torch.float8_e4m3fn)` of a uint8 tensor (vLLM's fp8 KV cache): the same memory,
    read and written as `dtype`, which must be as wide as x's."""
    _host(t, f"{t.name}.view({dtype})")
    if dtype == t.dtype:
        return t
    if dtype.bits != t.dtype.bits or dtype.is_bool != t.dtype.is_bool:
        current().fail(DTypeError, f"{t.name}.view({dtype}): a {t.dtype} tensor's elements are "
                       f"{t.dtype.bits} bits, a {dtype}'s {dtype.bits}: a view reads the same "
                       "elements as another dtype of their width",
                       hint="view as a dtype of the same width (uint8 as float8_e4m3fn, int16 "
                            "as bfloat16), or convert the values with .to(dtype)")
    return _tensor_view(t, "tensor.bitcast", {"dtype": dtype.short}, f"{t.name}.view({dtype})")


def _host_viewed(method: Any) -> Any:
    """A view method of tile values that, in host code, takes a 0-d array argument as the
    tensor it is (attorch's `output_grad.flatten()`, then launched as a pointer): the trace
    stops and runs again with it as memory (frontend/zero_d_memory.py)."""
    def viewed(self: TileValue, *args: Any, **kwargs: Any) -> Any:
        if current().depth == "host":
            as_memory(self)
        return method(self, *args, **kwargs)
    viewed.__name__, viewed.__doc__ = method.__name__, method.__doc__
    return viewed


# Tile values and tensors have their views as methods too, spelled as torch's (`v.reshape(tm,
# 2, -1)`, `x.T`). This module adds them, so that values.py, which it builds on, needs no views
# (importing tiledsl imports this module).
for _cls, _methods in [
        (TileValue, {"reshape": reshape, "view": reshape, "permute": permute,
                     "transpose": transpose, "unsqueeze": unsqueeze, "expand": expand,
                     "expand_as": expand_as, "squeeze": squeeze, "flatten": flatten}),
        (Tensor, {"reshape": tensor_reshape, "view": tensor_view, "permute": tensor_permute,
                  "transpose": tensor_transpose, "unsqueeze": tensor_unsqueeze,
                  "squeeze": tensor_squeeze, "flatten": tensor_flatten,
                  "ravel": tensor_flatten, "view_as": tensor_view_as, "expand": tensor_expand,
                  "broadcast_to": tensor_expand, "expand_as": tensor_expand_as,
                  "narrow": tensor_narrow, "split": tensor_split, "chunk": tensor_chunk,
                  "diagonal": tensor_diagonal})]:
    for _name, _method in _methods.items():
        setattr(_cls, _name, _method if _cls is Tensor else _host_viewed(_method))
