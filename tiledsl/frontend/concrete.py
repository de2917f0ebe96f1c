"""The race check's last resort: the elements every program touches, computed (races.py).

Where separation.py cannot show that two accesses of one grid keep apart, and what they depend
on is known while tracing, this module computes, for every program of the grid, the elements of
the root tensor each access touches, and compares them. Known while tracing: the grid's
positions (its blocks fixed: ints, or block sizes the host code read), constants and static
ints, `td.arange` lanes, and the masks and `if` conditions computed from those with integer
and bool arithmetic. A tile loop inside the grid contributes all its tiles (one program's
iterations run in order, so only their union matters; its mask is then left out). A condition
that cannot be computed counts as taken; an index or a view that cannot be computed (a load, a
counted loop's counter, a runtime scalar) leaves the pair undecided, and the check refuses it as
before. Liger's kernels store through flat views at offsets such as `(bh // H) * sb + (bh % H)
* sh + rows * sm + cols`, unroll stores with `tl.static_range`, or guard a role with `if pid ==
E`: exact for the trace's shapes, which the kernel is traced for.

At most 2**22 (program, element) pairs per access are computed; past that, undecided. An
access compared with many (an unrolled loop's stores against its loads) computes its elements
once (`Tracer.race_memo`, up to 2**23 int64s per trace).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tiledsl.frontend.separation import Programs
from tiledsl.frontend.tracer import Tracer
from tiledsl.ir.core import Block, Op, Value
from tiledsl.ir.ops import BINARY, COMPARE, indexed_shape
from tiledsl.ir.slices import Slice, slices_of
from tiledsl.ir.types import RangeType, TensorType, TileType
from tiledsl.ir.views import in_root, offset_of, root, strides_of

LIMIT = 1 << 22
MEMO_LIMIT = 1 << 23  # int64s kept for the next pair (accesses' elements, their spans)
_NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide,
          "mod": np.mod, "minimum": np.minimum, "maximum": np.maximum, "and": np.bitwise_and,
          "or": np.bitwise_or, "xor": np.bitwise_xor, "eq": np.equal, "ne": np.not_equal,
          "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}
assert set(_NUMPY) <= set(BINARY) | set(COMPARE)


@dataclass(frozen=True)
class Access:
    """A load, store or atomic: the tensor (a view or a root), its index operands and attrs
    (`full`, `slices`), its mask, and the (op, region) pairs that hold it below the grid."""

    tensor: Value
    indices: list[Value]
    attrs: dict
    mask: Value | None
    path: list[tuple[Op, int]]


def meet(tr: Tracer, a: Access, b: Access | None = None, slots: bool = False) -> bool | None:
    """Whether two programs touch one element, through `a` in one and `b` in the other (through
    `a` in both, where `b` is None); None where undecided. Two accesses whose indices both
    read scalars from one tensor (a cache line, `line = tl.load(idx + b)`) are compared again
    with those scalars as `_Evaluator.slots` takes them."""
    used: tuple[set, set] | None = (set(), set()) if slots else None
    ea = _elements(tr, a, None, used and used[0])
    eb = ea if b is None else _elements(tr, b, None, used and used[1])
    if (ea is None or eb is None) and b is not None and not slots:
        return meet(tr, a, b, slots=True)
    if ea is None or eb is None or used is not None and (used[0] != used[1] or
                                                          len(used[0]) != 1):
        return None  # (one slot, read alike: its addresses stand for its values)
    if ea[2] is not None or eb[2] is not None:  # some dimension's index unknown: compare the
        common = _known(a, ea) & _known(b if b is not None else a, eb)  # others, in the root
        if not common:
            return None
        ea = _elements(tr, a, common, used and used[0])
        eb = ea if b is None else _elements(tr, b, common, used and used[1])
        if ea is None or eb is None:
            return None
    lo_a, hi_a, elems_a = _spans_of(tr, ea)
    if b is None:
        return bool(np.any(lo_a != hi_a))
    lo_b, hi_b, elems_b = _spans_of(tr, eb)
    _, ia, ib = np.intersect1d(elems_a, elems_b, assume_unique=True, return_indices=True)
    one = (lo_a[ia] == hi_a[ia]) & (lo_b[ib] == hi_b[ib]) & (lo_a[ia] == lo_b[ib])
    return not bool(np.all(one))


def _known(acc: Access, got: tuple[Any, Any, frozenset | None]) -> frozenset:
    """The root dimensions whose positions `_elements` computed for `acc` (all, where none
    was unknown)."""
    base = root(acc.tensor).type
    assert isinstance(base, TensorType)
    return got[2] if got[2] is not None else frozenset(range(len(base.shape)))


def _elements(tr: Tracer, acc: Access, dims: frozenset | None = None,
              slots: set | None = None) -> tuple[Any, Any, frozenset | None] | None:
    """(root element, program, None) of every pair `acc` touches, over the trips of the
    counted loops that hold it too; where some dimension's index cannot be computed, or
    `dims` asks, the element's position along the root dimensions `dims` (or those known),
    and those dimensions; None where undecided. With `slots`, loaded scalars are slots
    (`_Evaluator.slots`), and the set collects them."""
    key = None if slots is not None else _key(tr, acc, dims)
    if key is not None and key in tr.race_memo:
        return tr.race_memo[key]
    grid = _Evaluator(tr)
    if grid.counts is None:
        return None
    loops = []
    for op, _ in acc.path:
        if op.name == "while":
            loops += grid.counters(tr, op)
    ev = _Evaluator(tr, loops) if loops else grid
    ev.slots = slots
    got = None if ev.counts is None else ev.elements(acc, dims)
    if key is not None:
        _remember(tr, key, got, 0 if got is None else 2 * got[0].size)
    return got


def _remember(tr: Tracer, key: tuple, value: Any, size: int) -> None:
    """Keep `value` (of `size` int64s) in `Tracer.race_memo`, within its budget."""
    memo = tr.race_memo
    used = memo.get("used", 0)
    if used + size <= MEMO_LIMIT:
        memo[key], memo["used"] = value, used + size


def _spans_of(tr: Tracer, got: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
    """`_spans` of the elements and programs `_elements` gave, computed once for a kept one
    (the key holds the array, so its id is not reused)."""
    key = ("spans", id(got[0]))
    if key in tr.race_memo:
        return tr.race_memo[key][1]
    spans = _spans(got[0], got[1])
    _remember(tr, key, (got[0], spans), 3 * spans[2].size)
    return spans


def _key(tr: Tracer, acc: Access, dims: frozenset | None) -> tuple:
    """What `_elements` of `acc` depends on: the access, the grid it is in, and the loops'
    counters and steps the trace knows so far (they only grow). The key holds its values, so
    their ids are not reused while it is kept (`Tracer.race_memo`)."""
    shape = (tuple(acc.attrs.get("full", ())), repr(acc.attrs.get("slices", ())))
    return (tr.blocks[1], acc.tensor, tuple(acc.indices), acc.mask, tuple(acc.path), shape,
            dims, len(tr.counters), len(tr.inductions))


def _spans(elems: Any, progs: Any) -> tuple[Any, Any, Any]:
    """Per distinct element, the lowest and highest program touching it, and the elements."""
    order = np.lexsort((progs, elems))
    elems, progs = elems[order], progs[order]
    starts = np.flatnonzero(np.r_[True, elems[1:] != elems[:-1]]) if elems.size else \
        np.zeros(0, np.int64)
    ends = np.r_[starts[1:], elems.size][:starts.size] - 1
    return progs[starts], progs[ends], elems[starts]


def _yields_false(region: Block) -> bool:
    """Whether an `if` branch only yields the constant False."""
    y = region.ops[-1] if region.ops else None
    return y is not None and y.name == "yield" and len(y.operands) == 1 and \
        y.operands[0].owner is not None and y.operands[0].owner.name == "const" and \
        y.operands[0].owner.attrs["value"] is False


class _Evaluator:
    """Values over every program of the grid: int64 or bool arrays of shape `counts + tile
    shape` (or broadcastable to it: 1 along the grid dimensions a value does not vary with)."""

    def __init__(self, tr: Tracer, loops: list[_Counter] | tuple = ()) -> None:
        self.tr = tr
        self.progs = Programs(tr)
        self.axes = self.progs.axes
        self.loops = {c.value: (i, c) for i, c in enumerate(loops)}
        counts = []
        for a in self.axes:
            block = self.progs._block(a)
            if block is None:
                self.counts = None
                return
            counts.append(-(-a.type.extent // block))  # type: ignore[union-attr]
        self.counts: tuple[int, ...] | None = tuple(counts)
        # the grid's dimensions, then each counted loop's trips (one program's, in order)
        self.dims = self.counts + tuple(c.trips for c in loops)
        self.mesh = np.indices(self.dims, dtype=np.int64)
        self.memo: dict[int, Any] = {}
        # where a set, an int scalar an index loads from a computed address is a slot: the
        # address itself stands for it (distinct where the addresses are, equal where they
        # are: the loaded values' contract, as a scatter's indices'); the set collects the
        # slots the positions stand on. Only indices' positions take slots (`_placed`),
        # through ops that keep distinct values distinct; masks, tests, loop bounds never do.
        self.slots: set | None = None
        self._slotting = False
        self._slot_memo: dict[int, Any] = {}
        self._slotted: set[int] = set()  # ids of values computed from slots
        self._keys: dict[int, Any] = {}  # and the slot each stands for: (tensor, inner slot)

    @property
    def rank(self) -> int:
        return len(self.dims)

    def counters(self, tr: Tracer, op: Op) -> list[_Counter]:
        """The counters of `while` loop `op` over `range(start, stop, step)` (loops.py records
        them in `Tracer.counters`): `start` and `stop` computed in every program."""
        out = []
        for arg in op.regions[0].args:
            if arg not in tr.counters or arg not in tr.counter_steps:
                continue
            start, stop = (self.value(v) for v in tr.counters[arg])
            step = tr.counter_steps[arg]
            if start is None or stop is None or step <= 0:
                continue
            trips = int(np.max(-(-(np.asarray(stop) - start) // step), initial=0))
            if 0 <= trips <= LIMIT:  # (none: the accesses in it touch nothing)
                out.append(_Counter(arg, start, step, stop, trips))
        return out

    def elements(self, acc: Access, dims: frozenset | None = None
                 ) -> tuple[Any, Any, frozenset | None] | None:
        """(root element, program, None) of every pair `acc` touches; with an unknown index
        or `dims`, positions along some root dimensions only (`_elements`); None where
        undecided."""
        assert self.counts is not None
        if self._touches_nothing(acc):  # a mask false in every lane, a branch no program takes
            return np.zeros(0, np.int64), np.zeros(0, np.int64), None
        t = acc.tensor.type
        assert isinstance(t, TensorType)
        base = root(acc.tensor).type
        assert isinstance(base, TensorType)
        contiguous = self.tr.strides(root(acc.tensor))  # (an argument's layout: its own)
        strides = strides_of(acc.tensor, contiguous)
        full = acc.attrs.get("full", ())
        try:
            shape = indexed_shape(t, [i.type for i in acc.indices], full,
                                  acc.attrs.get("slices", ()))
        except Exception:  # noqa: BLE001 - the tracer has checked it; undecided otherwise
            return None
        layout_axes = _axes(t, acc.indices, full, len(shape))
        if strides is None or layout_axes is None:
            return None
        fixed = [self._dim(d) for d in shape]
        it = iter(acc.indices)
        for d, extent in enumerate(t.shape):  # a tile loop's axis holds all its tiles' lanes
            v = None if d in full else next(it)
            if v is not None and isinstance(v.type, RangeType) and v not in self.axes:
                fixed[layout_axes[d][0]] = min(extent, v.type.extent)
        if any(d is None for d in fixed) or \
                math.prod(self.counts) * math.prod(fixed) > LIMIT:  # type: ignore[arg-type]
            return None
        lanes = tuple(fixed)  # type: ignore[arg-type]
        if math.prod(self.dims) * math.prod(lanes) > LIMIT:
            return None
        placed = self._placed(acc, t, lanes, layout_axes)
        if placed is None:
            return None
        positions, valid, union = placed
        known = frozenset(d for d, p in enumerate(positions) if p is not None)
        partial = dims is not None or len(known) < len(positions)
        if not partial:
            flat = np.int64(offset_of(acc.tensor, contiguous))
            for pos, stride in zip(positions, strides):
                flat = flat + pos * stride
        else:  # along the root's own dimensions: the tensor is the root or slices of it
            maps = in_root(acc.tensor)
            use = known if dims is None else dims
            if maps is None or not use <= known:
                return None
            flat = np.int64(0)
            for d in sorted(use):
                start, step = maps[d]
                flat = flat + (start + step * positions[d]) * contiguous[d]
        if acc.mask is not None and not union:
            m = self._mask(acc.mask)
            if m is not None:
                valid = valid & self._lift(m, len(lanes))
        for j, (_, counter) in enumerate(self.loops.values()):  # the trips each program runs
            valid = valid & self._lift(self._counter(counter, j) < self._grid(counter.stop),
                                       len(lanes))
        for op, region in acc.path:
            if op.name == "if":  # (the branch taken: a superset of the programs that take it)
                c = self._mask(op.operands[0]) if region == 0 else self.value(op.operands[0])
                if c is not None:
                    taken = c.astype(bool) if region == 0 else ~c.astype(bool)
                    valid = valid & self._lift(taken, len(lanes))
        full_shape = self.dims + lanes
        flat = np.broadcast_to(flat, full_shape)
        valid = np.broadcast_to(valid, full_shape)
        program = np.broadcast_to(np.arange(math.prod(self.counts)).reshape(
            self.counts + (1,) * (len(self.loops) + len(lanes))), full_shape)
        return flat[valid], program[valid], (known if dims is None else dims) if partial \
            else None

    def _touches_nothing(self, acc: Access) -> bool:
        """Whether the access's mask is false in every lane of every program, or one of the
        branches around it is taken by no program (FlagGems' placeholder slots: sizes 0, so
        the index divides by 0 where no lane is in range)."""
        tests = [self._mask(acc.mask)] if acc.mask is not None else []
        for op, region in acc.path:
            if op.name == "if":
                c = self._mask(op.operands[0]) if region == 0 else self.value(op.operands[0])
                tests.append(None if c is None else c.astype(bool) if region == 0 else
                             ~c.astype(bool))
        return any(t is not None and not np.any(t) for t in tests)

    def _mask(self, v: Value) -> Any:
        """Mask `v`, or where part of an `and` cannot be computed, the rest (it keeps as
        many lanes or more: a superset of the elements); None where nothing can be. An `and`
        in an `if` test is an `if` whose second branch yields False (branches.py `_short`)."""
        op = v.owner
        if op is not None and op.name == "if" and len(op.results) == 1 and \
                _yields_false(op.regions[1]):
            parts = [self.value(op.operands[0]), self._mask(op.regions[0].ops[-1].operands[0])]
            known = [np.asarray(p) for p in parts if p is not None]
            if not known:
                return None
            both = [x.reshape((1,) * (self.rank - x.ndim) + x.shape) for x in known]
            return np.logical_and.reduce(np.broadcast_arrays(*both))
        if op is None or op.name != "and" or not v.type.dtype.is_bool:  # type: ignore[union-attr]
            return self.value(v)
        parts = [self._mask(o) for o in op.operands]
        if all(p is not None for p in parts):
            return np.logical_and(*self._aligned(parts, op))
        return next((p for p in parts if p is not None), None)

    def _placed(self, acc: Access, t: TensorType, lanes: tuple[int, ...],
                layout_axes: tuple[tuple[int, ...], ...]
                ) -> tuple[list[Any], Any, bool] | None:
        """Per tensor dimension, its positions placed on the access's lanes; the lanes in
        range; whether a tile loop's union replaced some axis (its mask is then left out)."""
        full = acc.attrs.get("full", ())
        sliced = slices_of(acc.attrs)
        it = iter(acc.indices)
        positions, valid, union = [], np.bool_(True), False
        for d, extent in enumerate(t.shape):
            axes = layout_axes[d]
            if d in full:
                part = sliced.get(d, Slice(0, extent, 1))
                positions.append(self._along(np.asarray(part.indices(), np.int64), axes[0],
                                             len(lanes)))
                continue
            v = next(it)
            if isinstance(v.type, RangeType):
                got = self._range(v, axes[0], len(lanes), extent)
                if got is None:
                    return None
                pos, ok, whole = got
                positions.append(pos)
                valid = valid & ok
                union |= whole
                continue
            self._slotting = self.slots is not None  # (positions alone take slots)
            try:
                x = self.value(v)
            finally:
                self._slotting = False
            if x is not None and id(v) in self._slotted:  # (one slot chain per position)
                self.slots.add(self._keys[id(v)])  # type: ignore[union-attr]
            if x is None:  # (unknown: the pair is compared along the other dimensions)
                positions.append(None)
                continue
            rank = len(v.type.shape)  # type: ignore[union-attr]
            positions.append(self._onto(x, rank, axes, len(lanes)))
        return positions, valid, union

    def _range(self, r: Value, axis: int, rank: int, extent: int) -> tuple[Any, Any, bool] | None:
        """A tile's positions on `axis`: a grid tile's lanes in each program, or the union of a
        tile loop's (all of its extent, whatever its block)."""
        rt = r.type
        assert isinstance(rt, RangeType)
        if rt.shifted:
            return None
        if r in self.axes:
            block = self.progs._block(r)
            assert block is not None
            coords = self.mesh[self.axes.index(r)] * block
            lanes = np.arange(block, dtype=np.int64)
            pos = self._lift(coords, rank) + self._along(lanes, axis, rank)
            return pos, pos < min(extent, rt.extent), False
        pos = np.arange(min(extent, rt.extent), dtype=np.int64)
        return self._along(pos, axis, rank), np.bool_(True), True

    def _grid(self, x: Any) -> Any:
        """A value over the grid's programs alone, with this mesh's loop dimensions."""
        x = np.asarray(x)
        if x.ndim == 0:
            return x
        return x.reshape(x.shape + (1,) * len(self.loops))

    def _counter(self, c: _Counter, j: int) -> Any:
        """Loop `c`'s counter at each of its trips, in each program."""
        assert self.counts is not None
        return self._grid(c.first) + c.step * self.mesh[len(self.counts) + j]

    def _dim(self, d: Any) -> int | None:
        return self.progs._fixed_dim(d)

    def _lift(self, x: Any, rank: int) -> Any:
        """A value of the grid's dimensions (a scalar per program), with `rank` lane axes."""
        x = np.asarray(x)
        return x.reshape(x.shape + (1,) * (self.rank + rank - x.ndim))

    def _along(self, lanes: Any, axis: int, rank: int) -> Any:
        """1-D `lanes` on lane axis `axis` of `rank`, the same in every program."""
        shape = [1] * (self.rank + rank)
        shape[self.rank + axis] = lanes.size
        return lanes.reshape(shape)

    def _onto(self, x: Any, own: int, axes: tuple[int, ...], rank: int) -> Any:
        """A value with `own` lane axes placed on the access's lane axes `axes` (an index
        tile's; none for a scalar), broadcast along the others."""
        x = np.asarray(x)
        x = x.reshape((1,) * (self.rank + own - x.ndim) + x.shape)
        shape = list(x.shape[:self.rank]) + [1] * rank
        for k, a in enumerate(axes[len(axes) - own:] if own else ()):
            shape[self.rank + a] = x.shape[self.rank + k]
        return x.reshape(shape)

    def _slot(self, v: Value) -> Any:
        """Loaded scalar `v` as a slot (see `slots`): its address, or None."""
        op = v.owner
        assert op is not None and self.slots is not None
        shape = v.type.shape  # type: ignore[union-attr]
        if shape or op.attrs.get("mask") or len(op.operands) != 2:
            return None
        at = self.value(op.operands[1])
        if at is None:
            return None
        # a slot read at an address another slot gives (vLLM's `idx_seq = tl.load(batch +
        # pid)`, then `tl.load(cache_indices + idx_seq)`): the two loads' one chain, whose
        # values the inner address stands for (distinct maps compose into a distinct one)
        key = (op.operands[0], self._keys.get(id(op.operands[1])))
        self._slotted.add(id(v))
        self._keys[id(v)] = key
        return np.asarray(at, np.int64)

    def _from_slots(self, v: Value) -> Any:
        """`v` computed from slots where its op keeps distinct values distinct (a slot plus
        or minus a value, times a nonzero one, cast, broadcast or reshaped); else None."""
        op = v.owner
        assert op is not None
        mine = [id(o) in self._slotted for o in op.operands]
        if op.name in ("add", "sub") and sum(mine) == 1 or \
                op.name in ("cast", "broadcast", "reshape", "expand_dims", "neg"):
            pass
        elif op.name == "mul" and sum(mine) == 1:
            other = self.value(op.operands[mine.index(False)])
            if other is None or np.any(np.asarray(other) == 0):
                return None
        else:
            return None
        if op.name == "cast" and not v.type.dtype.is_int:  # type: ignore[union-attr]
            return None
        self._slotted.add(id(v))
        self._keys[id(v)] = self._keys.get(id(op.operands[mine.index(True)]))
        return _UNSET  # (computed as any other op)

    def value(self, v: Value) -> Any:
        """`v` over every program, or None where it cannot be computed while tracing."""
        memo = self._slot_memo if self._slotting else self.memo
        hit = memo.get(id(v), _UNSET)
        if hit is _UNSET:
            memo[id(v)] = None
            hit = memo[id(v)] = self._value(v)
        return hit

    def _value(self, v: Value) -> Any:
        op = v.owner
        t = v.type
        if op is None and v in self.loops:
            j, counter = self.loops[v]
            return self._counter(counter, j)
        if op is None and v in self.progs.tr.inductions:
            got = self._induction(v)  # (a start it steps from: its slots, moved)
            first = id(self.progs.tr.inductions[v][0])
            if first in self._slotted:
                self._slotted.add(id(v))
                self._keys[id(v)] = self._keys.get(first)
            return got
        if op is not None and op.name == "if" and isinstance(t, TileType) and t.rank == 0:
            got = self._chosen(op, op.results.index(v))
            return None if got is None or self._slotted & {id(o) for o in op.operands} \
                else got  # (a test on a slot is no test of the values)
        if op is not None and op.name == "while" and isinstance(t, TileType) and t.dtype.is_int:
            return self._exit(op, op.results.index(v))
        if op is None or op.regions or not isinstance(t, TileType) or \
                not (t.dtype.is_int or t.dtype.is_bool):
            return None
        if op.name == "const":
            return np.asarray(op.attrs["value"])
        if op.name == "arange":
            n = self._dim(t.shape[0])
            return None if n is None else \
                self._along(np.arange(n, dtype=np.int64) + op.attrs["start"], 0, 1)
        if op.name in ("tile.begin", "tile.id", "tile.index", "tile.size"):
            return self._tile(op)
        if op.name == "load":
            return self._slot(v) if self._slotting else None
        args = [self.value(o) for o in op.operands]
        if any(a is None for a in args):
            return None
        if any(id(o) in self._slotted for o in op.operands) and self._from_slots(v) is None:
            return None
        if op.name == "cast":
            return args[0].astype(bool if t.dtype.is_bool else np.int64)
        if op.name in ("broadcast", "reshape"):
            shape = [self._dim(d) for d in t.shape]
            if any(d is None for d in shape):
                return None
            x = args[0]
            own = len(op.operands[0].type.shape)  # type: ignore[union-attr]
            x = x.reshape((1,) * (self.rank + own - x.ndim) + x.shape)
            lead = x.shape[:self.rank]
            if op.name == "reshape":
                return np.broadcast_to(x, lead + x.shape[self.rank:]).reshape(
                    lead + tuple(shape))  # type: ignore[operator]
            x = x.reshape(lead + (1,) * (len(shape) - own) + x.shape[self.rank:])
            return np.broadcast_to(x, lead + tuple(shape))  # type: ignore[operator]
        if op.name == "expand_dims":
            own = len(op.operands[0].type.shape)  # type: ignore[union-attr]
            x = args[0].reshape((1,) * (self.rank + own - args[0].ndim) + args[0].shape)
            return np.expand_dims(x, self.rank + op.attrs["axis"])
        if op.name == "neg":
            return -args[0]
        if op.name == "not":
            return ~args[0]
        if op.name == "where":
            return np.where(*self._aligned(args, op))
        if op.name in _NUMPY and len(args) == 2:
            if op.name in ("floordiv", "mod") and np.any(np.asarray(args[1]) == 0):
                return None
            return _NUMPY[op.name](*self._aligned(args, op))
        return None

    def _induction(self, v: Value) -> Any:
        """A value a counted loop carries and steps by a fixed amount each trip (a pointer
        bump, `off += P * HW`: `Tracer.inductions`): its first value plus the amount times the
        trip, in each program."""
        first, amount, counter, _, sign = self.progs.tr.inductions[v]
        if counter not in self.loops:
            return None
        a, d = self.value(first), self.value(amount)
        if a is None or d is None:
            return None
        d = sign * np.asarray(d)
        own = len(v.type.shape)  # type: ignore[union-attr]
        j, _ = self.loops[counter]
        trip = self.mesh[len(self.counts) + j]  # type: ignore[arg-type]
        lifted = [np.asarray(x) for x in (a, d)]
        a, d = (x.reshape((1,) * (self.rank + own - x.ndim) + x.shape) for x in lifted)
        return a + d * trip.reshape(trip.shape + (1,) * own)

    def _exit(self, op: Op, k: int) -> Any:
        """Result `k` of counted loop `op` where it is a value the loop steps by a fixed amount
        (`Tracer.inductions`): `first + amount * trips` after its last trip, in each program
        (mamba's SSD backward zeroes the rest of a row through the pointer its first loop
        left: `for start_n in range(hi, chunk_size, BLOCK_N): tl.store(ddAcs_ptrs + ...)`)."""
        tr = self.progs.tr
        arg = op.regions[0].args[k]
        if arg not in tr.inductions:
            return None
        first, amount, counter, step, sign = tr.inductions[arg]
        bounds = [self.value(x) for x in tr.counters.get(counter, ())]
        a, d = self.value(first), self.value(amount)
        if len(bounds) != 2 or any(x is None for x in (*bounds, a, d)):
            return None
        start, stop = (np.asarray(x) for x in bounds)
        trips = np.maximum(-(-(stop - start) // step), 0)
        own = len(arg.type.shape)  # type: ignore[union-attr]
        trips = trips.reshape((1,) * (self.rank - trips.ndim) + trips.shape + (1,) * own)
        a, d = (np.asarray(x).reshape((1,) * (self.rank + own - np.ndim(x)) + np.shape(x))
                for x in (a, d))
        return a + sign * d * trips

    def _chosen(self, op: Op, k: int) -> Any:
        """Scalar result `k` of an `if` whose branches only yield values computed here (the
        `and` of a runtime test, `if last and k < 1:`, is such an `if`: branches.py)."""
        sides = [self.value(r.ops[-1].operands[k]) if r.ops and r.ops[-1].name == "yield"
                 else None for r in op.regions]
        cond = self.value(op.operands[0])
        if cond is None or any(x is None for x in sides):
            return None
        grid = [np.asarray(x) for x in (cond, *sides)]
        return np.where(*(x.reshape((1,) * (self.rank - x.ndim) + x.shape) for x in grid))

    def _aligned(self, args: list[Any], op: Op) -> list[Any]:
        """Binary operands with their grid axes first, lane axes after (a scalar has none)."""
        out = []
        for a, o in zip(args, op.operands):
            own = len(o.type.shape)  # type: ignore[union-attr]
            a = np.asarray(a)
            out.append(a.reshape((1,) * (self.rank + own - a.ndim) + a.shape))
        rank = max(len(o.type.shape) for o in op.operands)  # type: ignore[union-attr]
        return [a.reshape(a.shape[:self.rank] + (1,) * (self.rank + rank - a.ndim)
                          + a.shape[self.rank:]) for a in out]

    def _tile(self, op: Op) -> Any:
        """A grid tile's begin, id, size or lanes in each program (other tiles: None)."""
        r = op.operands[0]
        if r not in self.axes:
            return None
        rt = r.type
        assert isinstance(rt, RangeType)
        block = self.progs._block(r)
        assert block is not None
        coords = self.mesh[self.axes.index(r)]
        begin = coords * block
        if op.name == "tile.id":
            return coords
        if op.name == "tile.begin":
            return begin
        if op.name == "tile.size":
            return np.minimum(block, rt.extent - begin)
        return self._lift(begin, 1) + self._along(np.arange(block, dtype=np.int64), 0, 1)


@dataclass(frozen=True)
class _Counter:
    """A counted loop's counter over `range(first, stop, step)`: `first` and `stop` in every
    program (over the grid's dimensions), at most `trips` trips."""

    value: Value
    first: Any
    step: int
    stop: Any
    trips: int


def _axes(t: TensorType, indices: list[Value], full: tuple, rank: int
          ) -> tuple[tuple[int, ...], ...] | None:
    from tiledsl.ir.gathers import layout
    try:
        out = layout(t, [i.type for i in indices], full).axes
    except Exception:  # noqa: BLE001 - the tracer has checked the access
        return None
    return out if all(a < rank for axes in out for a in axes) else None


_UNSET = object()
