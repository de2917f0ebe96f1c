"""Barriers between accesses to the same memory in one program (one generated kernel).

The threads of a Triton program each hold part of a tile, and which part depends on the tile's
shape, the config and the layout the compiler picks for each access. Two accesses to the same
elements in one program may then run on different threads, with nothing ordering them:
`fused_add_rms_norm` stores `residual` in its first loop and reloads it in its second, with
another block size, and a thread may read an element before the thread that stores it has
(read after write); a loop that reads `x` for a sum followed by one that writes `x` in place
may overwrite what a slower thread has yet to read (write after read); two stores may land in
either order. `tl.debug_barrier()` (CUDA's `__syncthreads`) makes every access of every
thread before it visible to every access after it, as Helion and Inductor emit it.

A pair of accesses to the same memory (one root tensor: an argument or an allocation, through
its views), at least one of them writing, needs a barrier between them, unless they reach
disjoint elements (`out[tm, :n1]` and `out[tm, n1:]`, or two constant indices) or it is the
in-place update `x[idx] = f(x[idx])` that Triton code writes without one:

- a load and a later store of the same tensor at the same indices (the same values, no index
  tile) in the same block, indexed by every enclosing loop's range (each trip touches its own
  elements), where the stored value depends on the loaded one. Where the layouts of the two
  differ, the compiler converts the value through shared memory behind a barrier of its own;
  where they agree, each element is stored by a thread that loaded it. One case remains: a
  tile with fewer lanes than the program has threads (or broadcast, which Triton may load in
  a replicated layout) has several threads loading one element, and a late one may read the
  new value (triton-lang/triton#1615). That is harmless when the loaded value flows only
  into the store, and otherwise the pair takes a barrier too.

Every other pair takes one: at the block that holds both (their innermost common block), a
barrier before the op there that contains the later access; and where that block runs in a
loop, one before the op that contains the earlier access too (it orders the later access of
one trip before the earlier access of the next). A barrier already placed between them
serves; a barrier between two loops runs once, not per trip.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator

from tiledsl.ir.core import Block, Op, Value, loop_carried, loop_ranges, walk
from tiledsl.ir.gathers import access_parts, gathers
from tiledsl.ir.slices import slices_of
from tiledsl.ir.ops import MIXES_LANES, WRITES, has_trait
from tiledsl.ir.types import Dim, TensorType, TileType
from tiledsl.ir.views import in_root, root

Path = tuple[tuple[Block, int], ...]  # (block, index of the op in it), from the kernel's region
_REPLICATING = frozenset({"broadcast", "expand_dims"})  # may make Triton load a replicated copy


def barrier_points(region: Block, block_of: Callable[[Dim], int], threads: int) -> set[Op]:
    """The ops of a grid's `region` (at any depth) that a `tl.debug_barrier()` must precede;
    `block_of` gives a tile dimension's lanes under the config, `threads` the program's."""
    owners: dict[int, Op] = {}  # id(block) -> the op whose region it is
    accesses = list(_accesses(region, (), owners))
    users: dict[Value, list[Op]] = {}
    for op in walk(region):
        for o in op.operands:
            users.setdefault(o, []).append(op)
    linear: list[tuple[Block, int, int]] = []  # a barrier before an op in (lo, hi] of block
    wrap: list[tuple[Block, int, int]] = []  # in (hi, len) or [0, lo]: across a loop's trips
    for i, (x, px) in enumerate(accesses):
        for y, py in accesses[i + 1:]:
            if root(x.operands[0]) is not root(y.operands[0]) or _disjoint(x, y):
                continue
            if not (_writes(x) or _writes(y)) or _in_place(x, px, y, py, users, owners,
                                                               block_of, threads):
                continue
            block, lo, hi = _common(px, py)
            if lo != hi:
                linear.append((block, lo, hi))
            if not _trips_disjoint(x, px, y, block):
                wrap.append((block, lo, hi))
    points: dict[int, set[int]] = {}
    blocks: dict[int, Block] = {}
    for block, lo, hi in sorted(linear, key=lambda t: t[2]):  # interval stabbing, greedily
        chosen = points.setdefault(id(block), set())
        blocks[id(block)] = block
        if not any(lo < p <= hi for p in chosen):
            chosen.add(hi)
    for block, lo, hi in wrap:
        chosen = points.setdefault(id(block), set())
        blocks[id(block)] = block
        if not any(p > hi or p <= lo for p in chosen):
            chosen.add(lo)
    return {blocks[b].ops[p] for b, ps in points.items() for p in ps}


def _accesses(block: Block, path: Path, owners: dict[int, Op]) -> Iterator[tuple[Op, Path]]:
    """Loads, stores and atomics under `block`, in program order, with their paths."""
    for i, op in enumerate(block.ops):
        here = path + ((block, i),)
        if op.name == "load" or has_trait(op.name, WRITES):
            yield op, here
        for region in op.regions:
            owners[id(region)] = op
            yield from _accesses(region, here, owners)


def _writes(op: Op) -> bool:
    return has_trait(op.name, WRITES)


def _disjoint(x: Op, y: Op) -> bool:
    """Whether two accesses of one root tensor reach no common element: along some dimension,
    disjoint slices or different constants (`out[tm, :n1]` and `out[tm, n1:]`), in the root's
    coordinates where they go through parts of it (`left, right = out[:, :n1], out[:, n1:]`).
    Through other views their dimensions do not correspond."""
    a, b = _root_reach(x), _root_reach(y)
    return a is not None and b is not None and \
        any(i is not None and j is not None and not _meet(i, j) for i, j in zip(a, b))


def _root_reach(op: Op) -> list[range | None] | None:
    """`_reach` of an access in its root tensor's coordinates (None through a reshape or
    permute)."""
    t, maps = op.operands[0].type, in_root(op.operands[0])
    if maps is None or not isinstance(t, TensorType):
        return None
    return [r if r is None else range(a + k * r.start, a + k * r.stop, k * r.step)
            for r, (a, k) in zip(_reach(t.shape, op), maps)]


def _meet(i: range, j: range) -> bool:
    """Whether two ranges of indices share one."""
    if not i or not j or i[-1] < j[0] or j[-1] < i[0]:
        return False
    small, large = (i, j) if len(i) <= len(j) else (j, i)
    return small.step == large.step == 1 or any(k in large for k in small)


def _reach(shape: tuple[int, ...], op: Op) -> list[range | None]:
    """Per dimension of an access, the indices it reaches where they are known: a slice or
    `:`, or a constant (None: any)."""
    full, sliced = op.attrs.get("full", ()), slices_of(op.attrs)
    indices = iter(access_parts(op)[0])
    out: list[range | None] = []
    for d, extent in enumerate(shape):
        if d in full:
            part = sliced.get(d)
            out.append(range(extent) if part is None else part.indices())
            continue
        out.append(_index_range(next(indices)))
    return out


def _index_range(v: Value) -> range | None:
    """The indices a scalar or index tile reaches where they are known: a constant, or a
    static `td.arange` plus a constant (the unrolled column chunks of Triton's layer norm,
    `off + tl.arange(0, BLOCK)`)."""
    while v.owner is not None and v.owner.name in _REPLICATING | {"reshape"}:
        v = v.owner.operands[0]
    op = v.owner
    if op is None:
        return None
    if op.name == "const" and isinstance(op.attrs["value"], int):
        return range(op.attrs["value"], op.attrs["value"] + 1)
    n = op.result.type.shape[0] if op.name == "arange" else None  # type: ignore[union-attr]
    if isinstance(n, int):
        return range(op.attrs["start"], op.attrs["start"] + n)
    if op.name in ("add", "sub"):
        a, b = (_index_range(o) for o in op.operands)
        if a is not None and b is not None and (len(a) == 1 or len(b) == 1):
            if op.name == "sub":
                if len(b) != 1:
                    return None
                return range(a.start - b.start, a.stop - b.start)
            return range(a.start + b.start, a.stop + b.stop - 1)
    return None


def _common(px: Path, py: Path) -> tuple[Block, int, int]:
    """The innermost block holding both accesses, and the positions there of the ops that
    contain each (equal when they lie in two branches of one `if`)."""
    for k, ((bx, ix), (_, iy)) in enumerate(zip(px, py)):
        if ix != iy or px[k + 1][0] is not py[k + 1][0]:
            return bx, ix, iy
    raise AssertionError("two accesses on one path")


def _trips_disjoint(x: Op, path: Path, y: Op, block: Block) -> bool:
    """Whether no trip of a loop enclosing `block` (on `path`) accesses with `x` what another
    trip accesses with `y`: every such loop indexes one dimension of both with its range
    (`x[tm, tk]` and `x[tm, tk]` under `for tk`), or there is no such loop."""
    for b, i in path:
        if b is block:
            return True
        op = b.ops[i]
        if op.name == "while" or op.name == "for" and not all(_indexes(x, y, r)
                                                               for r in loop_ranges(op)):
            return False  # (a `while` loop's trips have no range to tell them apart)
    return True


def _indexes(x: Op, y: Op, r: Value) -> bool:
    """Whether accesses `x` and `y` of one tensor both index one dimension with range `r`."""
    if x.operands[0] is not y.operands[0]:
        return False
    return any(a is r and b is r for a, b in zip(_by_dim(x), _by_dim(y)))


def _by_dim(op: Op) -> list[Value | None]:
    """An access's index per tensor dimension (None for `:` and slices)."""
    full = op.attrs.get("full", ())
    indices = iter(access_parts(op)[0])
    t = op.operands[0].type
    assert isinstance(t, TensorType)
    return [None if d in full else next(indices) for d in range(len(t.shape))]


def _in_place(x: Op, px: Path, y: Op, py: Path, users: dict[Value, list[Op]],
              owners: dict[int, Op], block_of: Callable[[Dim], int], threads: int) -> bool:
    """Whether load `x` and store `y` are an in-place update that needs no barrier (above)."""
    if x.name != "load" or y.name != "store" or px[:-1] != py[:-1] or px[-1][0] is not py[-1][0]:
        return False
    indices = access_parts(x)[0]
    if x.operands[0] is not y.operands[0] or gathers(x) or gathers(y) or \
            len(indices) != len(access_parts(y)[0]) or \
            any(a is not b for a, b in zip(indices, access_parts(y)[0])) or \
            any(x.attrs.get(k) != y.attrs.get(k) for k in ("full", "slices")):
        return False
    if not _trips_disjoint(x, px, y, py[-1][0]):  # each trip must touch its own elements
        return False
    flow = _flow(x.result, users, owners)
    if y not in flow:
        return False
    if all(op is y or not (_writes(op) or op.regions or op.name == "yield") for op in flow):
        return True  # the loaded value reaches nothing but the store
    t = x.result.type
    assert isinstance(t, TileType)
    lanes = math.prod(block_of(d) for d in t.shape)
    return lanes >= threads and not _replicable(x.result, users)


def _replicable(v: Value, users: dict[Value, list[Op]]) -> bool:
    """Whether a loaded tile may get a replicated layout: its elementwise descendants (up to
    the first op that mixes lanes, which fixes its operand's layout) broadcast it."""
    seen: set[Op] = set()
    todo = [v]
    while todo:
        for op in users.get(todo.pop(), []):
            if op.name in _REPLICATING:
                return True
            if op not in seen and not (has_trait(op.name, MIXES_LANES) or op.regions
                                       or op.name == "yield"):
                seen.add(op)
                todo += op.results
    return False


def _flow(v: Value, users: dict[Value, list[Op]], owners: dict[int, Op]) -> set[Op]:
    """The ops that `v` reaches through their operands (and loops' and branches' yields)."""
    seen: set[Op] = set()
    todo = [v]
    while todo:
        for op in users.get(todo.pop(), []):
            if op in seen:
                continue
            seen.add(op)
            todo += op.results
            if op.name == "yield":
                todo += _yielded_into(op, owners)
    return seen


def _yielded_into(op: Op, owners: dict[int, Op]) -> list[Value]:
    """What a `yield`'s operands become: its loop's or branch's results and carried values."""
    for region_id, owner in owners.items():
        for region in owner.regions:
            if id(region) == region_id and region.ops and region.ops[-1] is op:
                carried = loop_carried(owner) if owner.name == "for" else \
                    region.args if owner.name == "while" else []
                return list(owner.results) + list(carried)
    return []
