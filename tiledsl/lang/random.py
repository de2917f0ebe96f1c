"""Random numbers in a kernel: `td.rand(seed, offsets)` and family, Triton's `tl.rand` family.

Counter-based (Philox 4x32-10): each lane's numbers are a function of the seed and its offset
alone, so a kernel draws the same numbers under every config and on every backend, and a host
function (`td.philox`) computes them too. Seeded dropout keeps no mask in memory: the backward
pass draws it again from the seed.

The NumPy and spatial backends equal Triton's interpreter bit for bit. Compiled for a GPU,
`rand` and `randint` stay bit for bit (integer arithmetic, then a correctly rounded conversion
and product), while `randn` calls the GPU's log, sin, cos and an approximate square root, so it
may differ from the CPU's in the last bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tiledsl.errors import DTypeError, TraceError, user_loc
from tiledsl.frontend.tracer import Tracer, active, current
from tiledsl import dtypes
from tiledsl.frontend.values import TileValue, broadcast_shapes, broadcast_to, constant, \
    to_value, where
from tiledsl.lang import bits as _bits  # noqa: F401 (x.to(dtype, bitcast=True))

_HOST_HINT = "on the host, td.philox.{name}(seed, offsets) gives the numbers td.{name} draws"


def _seed(tr: Tracer, name: str, seed: Any, offsets: TileValue | None = None) -> TileValue:
    """The seed as a value: an integer scalar, or (for the draws of `offsets`) a tile of
    seeds, one per offset."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)) and \
            not -2**63 <= int(seed) < 2**63:
        tr.fail(DTypeError, f"td.{name}: the seed {int(seed)} does not fit in int64",
                hint="a seed is a 64-bit integer; Triton reads a uint64 seed's bits, so "
                     f"{int(seed)} is the same seed as {int(seed) - 2**64}")
    v = to_value(seed)
    if v.shape != () and v.dtype.is_int and offsets is not None:  # a seed per lane (TritonBench's multinomial
        if len(v.shape) > len(offsets.shape) or any(  # sampling loads them)
                a != 1 and a != b for a, b in zip(v.shape[::-1], offsets.shape[::-1])):
            tr.fail(DTypeError, f"td.{name}: seeds of shape {tr.describe_shape(v.shape)} for "
                    f"offsets of shape {tr.describe_shape(offsets.shape)}",
                    hint="give one seed, or one per offset")
        return broadcast_to(v, offsets.shape)
    if not v.dtype.is_int:
        got = f"a {v.dtype} scalar" if v.shape == () else \
            f"a tile of shape {tr.describe_shape(v.shape)} ({v.dtype})"
        tr.fail(DTypeError, f"td.{name}: the seed must be an integer scalar or tile, got {got}",
                hint=f"pass an int (a kernel argument or a constant): td.{name}(seed, t.index)")
    return v


def _offsets(tr: Tracer, name: str, offsets: Any) -> TileValue:
    v = to_value(offsets)
    if not v.dtype.is_int:
        tr.fail(DTypeError, f"td.{name}: offsets must be an integer tile, got {v.dtype}",
                hint=f"number the lanes with integers, e.g. td.{name}(seed, t.index) or "
                     f"td.{name}(seed, tm.index[:, None] * n + tn.index[None, :])")
    return v


def _random(name: str, seed: Any, offsets: Any, n_rounds: Any = 10) -> list[TileValue]:
    if active() is None:
        raise TraceError(f"td.{name}() can only be used inside a @td.tile_kernel function",
                         loc=user_loc(), hint=_HOST_HINT.format(name=name))
    tr = current()
    o = _offsets(tr, name, offsets)
    s = _seed(tr, name, seed, o)
    attrs = {} if n_rounds == 10 else {"n_rounds": _rounds(tr, name, n_rounds)}
    return [TileValue(r) for r in tr.emit(name, [s.value, o.value], attrs, hint=name)]


def _rounds(tr: Tracer, name: str, n_rounds: Any) -> int:
    """Philox's round count (Triton's `n_rounds=`, a compile-time int; 10 by default)."""
    n_rounds = getattr(n_rounds, "value", n_rounds)  # (a td.constexpr)
    if not isinstance(n_rounds, (int, np.integer)) or isinstance(n_rounds, bool) or n_rounds < 0:
        tr.fail(DTypeError, f"td.{name}: n_rounds is a non-negative int known when tracing, "
                f"got {n_rounds!r}")
    return int(n_rounds)


def rand(*args: Any, n_rounds: Any = 10, **kwargs: Any) -> TileValue:
    """Uniform float32 in [0, 1), one per offset: Triton's `tl.rand(seed, offset)`, bit for
    bit. `seed` is an integer scalar (or a tile of seeds, one per offset), `offset` an
    integer tile (typically `t.index`). Helion's
    `hl.rand([tile_m, tile_n], seed=s)` draws them at each element's row-major index over the
    tiles' whole dimensions (`helion_offsets`)."""
    kwargs.pop("device", None)
    if len(args) == 1 and isinstance(args[0], (list, tuple)) and set(kwargs) == {"seed"}:
        return _random("rand", kwargs["seed"], helion_offsets(args[0]), n_rounds)[0]
    names = ("seed", "offset")
    given = dict(zip(names, args)) | {("offset" if k == "offsets" else k): v
                                      for k, v in kwargs.items()}
    if len(args) > 2 or set(given) != set(names):
        current().fail(TraceError, "td.rand(seed, offset) (Triton's) or td.rand([tiles], "
                       "seed=s) (Helion's)")
    return _random("rand", given["seed"], given["offset"], n_rounds)[0]


def helion_offsets(shape: Any) -> TileValue:
    """Helion's Philox offsets for `hl.rand(shape, seed=...)`: each element's row-major index
    over the whole dimensions of the tiles in `shape` (an int stands for `td.arange` over it)."""
    from tiledsl.frontend.values import Tile
    from tiledsl.lang.arange import arange
    from tiledsl.lang.views import reshape
    dims = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    extents = [d.extent if isinstance(d, Tile) else int(d) for d in dims]
    offset: Any = 0
    stride = 1
    for i in range(len(dims) - 1, -1, -1):
        d = dims[i]
        index = d.index if isinstance(d, Tile) else arange(0, int(d))
        view = [1] * len(dims)
        view[i] = index.shape[0]
        offset = reshape(index.to(dtypes.int64), tuple(view)) * stride + offset
        stride *= extents[i]
    return to_value(offset)


def randn(seed: Any, offsets: Any, n_rounds: Any = 10) -> TileValue:
    """Standard normal float32, one per offset (Box-Muller): Triton's `tl.randn`."""
    return _random("randn", seed, offsets, n_rounds)[0]


def randint(seed: Any, offsets: Any, n_rounds: Any = 10) -> TileValue:
    """32 random bits per offset, as int32: the bits of Triton's `tl.randint` (a uint32)."""
    return _random("randint", seed, offsets, n_rounds)[0]


def rand4x(seed: Any, offsets: Any, n_rounds: Any = 10) -> tuple[TileValue, ...]:
    """Four independent uniform tiles per offset: Triton's `tl.rand4x`."""
    return tuple(_random("rand4x", seed, offsets, n_rounds))


def randn4x(seed: Any, offsets: Any, n_rounds: Any = 10) -> tuple[TileValue, ...]:
    """Four independent normal tiles per offset: Triton's `tl.randn4x`."""
    return tuple(_random("randn4x", seed, offsets, n_rounds))


def randint4x(seed: Any, offsets: Any, n_rounds: Any = 10) -> tuple[TileValue, ...]:
    """Four words of random bits per offset, as int32 (Philox's whole output, the cheapest way
    to draw many numbers): Triton's `tl.randint4x`."""
    return tuple(_random("randint4x", seed, offsets, n_rounds))


def uint_to_uniform_float(x: Any) -> TileValue:
    """Triton's `tl.uint_to_uniform_float`: 32- or 64-bit random ints (as `td.randint`
    gives) to float32 in [0, 1), as Triton computes it: the bits read as signed, negative ones
    folded onto the non-negative (`-x - 1`), times the largest scale that keeps the maximum
    below 1."""
    tr = current("td.uint_to_uniform_float()")
    v = to_value(x)
    if not v.dtype.is_int or v.dtype.bits not in (32, 64) or v.weak:
        tr.fail(DTypeError, f"td.uint_to_uniform_float takes 32- or 64-bit int tiles, got "
                f"{'a Python int' if v.weak else v.dtype}", hint="td.randint(seed, offsets)")
    signed = v.to(f"int{v.dtype.bits}", bitcast=True)
    scale = 4.6566127342e-10 if v.dtype.bits == 32 else 1.0842020432385337e-19
    folded = where(signed < 0, -signed - 1, signed)
    return folded.astype("float32") * np.float32(scale)


def _counter(tr: Tracer, c: Any, i: int) -> TileValue:
    """A counter word as `tl.philox` takes it: a 32-bit int, its bits read as uint32."""
    if isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)) and \
            -2**31 <= int(c) < 2**32:
        return constant(int(c) % 2**32, dtypes.uint32)
    v = to_value(c)
    if not v.dtype.is_int or v.weak:
        tr.fail(DTypeError, f"td.philox: counter c{i} must be integers, got "
                f"{'a Python int past 32 bits' if v.weak else v.dtype}",
                hint="cast it, as FlagGems does: (offset & 0xFFFFFFFF).to(td.uint32)")
    if v.dtype.bits == 32:
        return v.to(dtypes.uint32, bitcast=True)
    return v.to(dtypes.uint32)  # modulo 2**32: uint32 + int32 is int64 here, uint32 in Triton


def philox_words(seed: Any, c0: Any, c1: Any, c2: Any, c3: Any,
                 n_rounds: int = 10) -> tuple[TileValue, ...]:
    """Triton's `tl.philox(seed, c0, c1, c2, c3, n_rounds)` inside a kernel (`td.philox(...)`):
    the four uint32 words of Philox 4x32 keyed by the seed, at the counters, which broadcast to
    one shape. A counter's low 32 bits count: a uint32 plus an int32 is an int64 in tiledsl
    (NumPy's rule) where Triton wraps it in uint32, and both give the same words; Triton's
    64-bit Philox (uint64 counters) is not supported. `td.philox(...)` on the host computes
    the same words."""
    tr = current("td.philox()")
    s = _seed(tr, "philox", seed)
    if not isinstance(n_rounds, (int, np.integer)) or isinstance(n_rounds, bool) or n_rounds < 0:
        tr.fail(DTypeError, f"td.philox: n_rounds is a non-negative int, got {n_rounds!r}")
    cs = [_counter(tr, c, i) for i, c in enumerate((c0, c1, c2, c3))]
    shape = broadcast_shapes(tr, [c.shape for c in cs])
    cs = [broadcast_to(c, shape) for c in cs]
    results = tr.emit("philox", [s.value, *(c.value for c in cs)], {"n_rounds": int(n_rounds)},
                      hint="word")
    return tuple(TileValue(r) for r in results)


def pair_uniform_to_normal(u1: Any, u2: Any) -> tuple[TileValue, TileValue]:
    """Triton's `tl.pair_uniform_to_normal`: two standard normals from two uniforms in [0, 1)
    (Box-Muller, in float32, the first uniform kept at 1e-7 or more), what `td.randn` applies
    to its first two words."""
    from tiledsl.frontend.td_names import FUNCTIONS as fn
    tr = current("td.pair_uniform_to_normal()")
    a, b = to_value(u1), to_value(u2)
    if not (a.dtype == b.dtype == dtypes.float32):
        tr.fail(DTypeError, f"td.pair_uniform_to_normal takes two float32 tiles, got "
                f"{a.dtype} and {b.dtype}", hint="td.uint_to_uniform_float(word) gives them")
    a = fn["maximum"](np.float32(1.0e-7), a)
    th = np.float32(6.283185307179586) * b
    r = fn["sqrt"](np.float32(-2.0) * fn["log"](a))
    return r * fn["cos"](th), r * fn["sin"](th)
