"""Block sizes the kernel reads: `bs = td.register_block_size(n)`, as Helion's
`hl.register_block_size`.

It makes one tunable block-size symbol (a `block_sizes[i]` param of the config space, like a
`td.tile` call site's) for tiles over a dimension of `n` elements, before the loops that use
it: `td.tile(n, block_size=bs)` cuts with it (two loops that pass one `bs` share one block
size) and tile shapes take it as a dimension (`td.zeros((tm, bs))`, a lane accumulator whose
width is the block of a later loop). `min=`/`max=` bound the powers of two the tuner tries.

A tile reads its own block size and position with `t.block_size` and `t.id` (`t.begin //
t.block_size`, ops `tile.block_size` and `tile.id`), e.g. to index per-program partial results.

Host code may read `bs` as an int (`td.cdiv(m, bs)` rows of such a partial-result buffer,
Helion's `(m + bs - 1) // bs`). Configs set block sizes at code generation, so a read makes
the block size act as a registered knob too (tiledsl/frontend/tunables.py): the kernel is traced once
per value a config gives it, and every backend runs the trace of its config's value, whose
tensor shapes are plain ints. A kernel whose host code never reads `bs` has one trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tiledsl.errors import Loc, TraceError, user_loc
from tiledsl.frontend.static_args import need_static
from tiledsl.frontend.symdims import SymDim
from tiledsl.frontend.tracer import current
from tiledsl.frontend.tunables import PowerOfTwo
from tiledsl.ir.core import Value, block_index

DEFAULT_BLOCK = 64  # a block symbol's default: the largest choice up to this


@dataclass(frozen=True)
class BlockSize:
    """A registered block size: its symbol and the extent of the dimension it cuts."""

    symbol: str
    extent: int
    loc: Loc | None

    def __repr__(self) -> str:
        return f"BlockSize({self.symbol} over {self.extent})"

    def __index__(self) -> int:
        """The config's value, read by host code (`td.cdiv(m, bs)` rows of a partial-result
        buffer): the kernel is traced once per value it takes, as for a registered knob."""
        tr = current()
        i = block_index(tr.symbols)[self.symbol]
        choices = symbol_choices(tr.symbols[self.symbol])
        name = f"block_sizes[{i}]"
        tr.tunables[name] = PowerOfTwo(choices[0], choices[-1], default_block(choices))
        return int(tr.knobs.get(name, default_block(choices)))

    __int__ = __index__

    def __add__(self, o: int) -> int:
        return int(self) + o

    def __radd__(self, o: int) -> int:
        return o + int(self)

    def __sub__(self, o: int) -> int:
        return int(self) - o

    def __rsub__(self, o: int) -> int:
        return o - int(self)

    def __mul__(self, o: int) -> int:
        return int(self) * o

    __rmul__ = __mul__

    def __floordiv__(self, o: int) -> int:
        return int(self) // o

    def __rfloordiv__(self, o: int) -> int:
        return o // int(self)

    def __mod__(self, o: int) -> int:
        return int(self) % o

    def __rmod__(self, o: int) -> int:  # Helion's `assert m_dim % block_m == 0`
        return o % int(self)

    def __neg__(self) -> int:
        return -int(self)


def _pow2(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1 \
        and not v & (v - 1)


def register_block_size(n: int, upper: int | None = None, /, *, min: int | None = None,
                        max: int | None = None) -> BlockSize:
    """A tunable block size for tiles over `n` elements (powers of two, from `min` to `max` where
    given), for `td.tile(n, block_size=bs)` and tile shapes; call it outside the tile loops.

    `td.register_block_size(lo, hi)` is Helion's two-argument form: the powers of two from `lo`
    up to `hi` (or up to the next power of two, where `hi` is a dimension's size, whose loops it
    may then cut)."""
    if upper is not None:
        return _bounded(n, upper)
    tr = current("td.register_block_size()")
    if tr.depth != "host":
        tr.fail(TraceError, "td.register_block_size() is called inside a tile loop",
                hint="register block sizes before the loops, where the kernel allocates outputs")
    if hasattr(n, "value") and isinstance(n.value, Value):  # an int argument: compile-time
        need_static(n.value, tr.int_params)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        tr.fail(TraceError, f"td.register_block_size(n): n is the size of the dimension the block "
                f"cuts, a positive int, got {n!r}",
                hint="a size computed at run time: pass it as a compile-time argument "
                     "(td.constexpr), or register the block for the largest size it takes")
    for what, v in (("min", min), ("max", max)):
        if v is not None and not _pow2(v):
            tr.fail(TraceError, f"td.register_block_size(): {what}= must be a power of two, "
                    f"got {v!r}")
    if min is not None and max is not None and min > max:
        tr.fail(TraceError, f"td.register_block_size(): min={min} is above max={max}")
    plain = int.__int__(n)  # a SymDim keeps its expression in `extent` (torch.compile)
    name = tr.new_symbol(plain, user_loc(), low=min, high=max)
    tr.labels[name] = f"block_size({plain})"
    return BlockSize(name, n if isinstance(n, SymDim) else plain, user_loc())


def _bounded(lo: int, hi: int) -> BlockSize:
    """Helion's `hl.register_block_size(min, max)`: `max` may be a dimension's size."""
    tr = current("td.register_block_size()")
    for v in (lo, hi):
        if hasattr(v, "value") and isinstance(v.value, Value):  # an int argument: compile-time
            need_static(v.value, tr.int_params)
    for what, v in (("min", lo), ("max", hi)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            tr.fail(TraceError, f"td.register_block_size(min, max): {what} must be a positive "
                    f"int, got {v!r}")
    if not _pow2(lo):
        tr.fail(TraceError, f"td.register_block_size(min, max): min must be a power of two, "
                f"got {lo!r}")
    if lo > hi:
        tr.fail(TraceError, f"td.register_block_size(min, max): min={lo} is above max={hi}")
    return register_block_size(hi, min=int(lo), max=int(hi) if _pow2(hi) else None)


def tile_block(bs: BlockSize, size: int) -> str:
    """The symbol `td.tile(size, block_size=bs)` cuts with, checking the extents agree."""
    tr = current()
    if bs.symbol not in tr.symbols:
        tr.fail(TraceError, "td.tile(): block_size= is a block size registered by another kernel")
    _not_open(bs, f"td.tile({size}, block_size=...)", "give the inner loop a block size of its "
              "own (td.tile(n) or another td.register_block_size)")
    if size != bs.extent:
        # a loop over another size (Helion's `(lo, hi)` form cuts tiles of any size, and a
        # one-argument form may be the largest block: `hl.register_block_size(min(256, m))`):
        # a symbol of this size that takes the registered block size, as Helion's loops share
        # it (attention_backward's config gives one block per registration)
        key = ("free", bs.symbol, size)
        if key not in tr.sites:
            tr.sites[key] = tr.new_symbol(size, bs.loc, tied=bs.symbol)
            tr.labels[tr.sites[key]] = tr.labels.get(bs.symbol, bs.symbol)
        return tr.sites[key]
    return bs.symbol


def bounded_choices(choices: tuple[int, ...], low: int | None, high: int | None
                    ) -> tuple[int, ...]:
    """A block symbol's powers of two (1 up to its extent's), within a registered `min`/`max`
    (which may reach past the extent: such tiles are masked like any ragged edge)."""
    lo = low or 1
    hi = high or max(choices[-1], lo)
    return tuple(1 << j for j in range(lo.bit_length() - 1, hi.bit_length()))


def symbol_choices(sym: Any) -> tuple[int, ...]:
    """The block sizes a registered symbol (the tracer's `Symbol`) may take."""
    return bounded_choices(_powers(sym.extent), sym.low, sym.high)


def _powers(extent: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to the smallest power of two >= extent: a block symbol's choices."""
    top = 1 << max(0, extent - 1).bit_length()
    return tuple(1 << j for j in range(top.bit_length()))


def default_block(choices: tuple[int, ...]) -> int:
    return max(c for c in choices if c <= max(choices[0], DEFAULT_BLOCK))


def shape_dim(bs: BlockSize) -> str:
    """The dimension a registered block size gives a tile shape (`td.zeros((tm, bs))`): inside
    a loop that cuts with it, that loop's tile dimension (lanes past a ragged edge are masked
    as the tile's), as Helion's kl_div means `hl.zeros([block_size_m, block_size_n])` there."""
    tr = current()
    for block in tr.blocks:  # (a loop over another size cuts with a symbol tied to it)
        for a in block.args:
            cut = getattr(a.type, "block", None)
            if isinstance(cut, str) and tr.symbols[cut].tied == bs.symbol:
                return cut
    return bs.symbol


def _not_open(bs: BlockSize, what: str, hint: str) -> None:
    """A loop cut with a block size inside a loop it cuts: two loops of one symbol would share
    its tiles' masks."""
    tr = current()
    for block in tr.blocks:
        for a in block.args:
            if getattr(a.type, "block", None) == bs.symbol:
                tr.fail(TraceError, f"{what} uses the registered block size of the enclosing loop "
                        f"over '{a.hint}' inside that loop",
                        hint=hint)
