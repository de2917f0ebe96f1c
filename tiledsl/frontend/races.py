"""Races between the programs of a grid, refused while tracing.

The programs of a grid run in parallel (in any order on a GPU), so a grid must not have two
programs touch one element where one of them writes it. Three checks, each at the user's line
and before any config is chosen, so every backend rejects the kernel the same way:

- `check_store`: a store whose indices do not separate a grid dimension (separation.py: they
  leave it out, or compute with it in a way that can repeat, `s[t.begin // (2 * B)]`) has
  several programs along it write the same elements; unless they all write the same values,
  the result depends on the block sizes and on the order the programs run in;
- `check_overlap`: two stores (or a store and an atomic) of one grid that may write one element
  in two programs;
- `check_read_write`: a load of elements another program of the grid writes (in place).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from tiledsl.errors import Loc, TraceError, user_loc
from tiledsl.ir.core import Block, Op, Value, loop_inits, upstream, walk
from tiledsl.ir.slices import Slice, slices_of
from tiledsl.ir.types import RangeType
from tiledsl.ir.views import root, root_coords
from tiledsl.frontend import concrete
from tiledsl.frontend.separation import ANY, Programs
from tiledsl.frontend.static_args import StaticNeeded, int_arguments, need_static_in
from tiledsl.frontend.tracer import Tracer


# While one access is checked: each op's path in the grid's block, by id (`_indexed`)
_INDEXED: dict[int, dict[int, list[tuple[Op, int]]] | None] = {}


def _paths(block: Block, prefix: tuple = ()) -> dict[int, list[tuple[Op, int]]]:
    out: dict[int, list[tuple[Op, int]]] = {}
    for op in block.ops:
        out[id(op)] = list(prefix)
        for i, region in enumerate(op.regions):
            out.update(_paths(region, (*prefix, (op, i))))
    return out


def _indexed(check: Callable[..., None]) -> Callable[..., None]:
    """`check` of one access with the paths of the grid's ops found once, not once per earlier
    access it is compared with (a loop unrolled many times has many: torchao's Hadamard
    butterfly spent 46 s of a 154 s trace in `_path`). No op is emitted while it runs."""
    @functools.wraps(check)
    def run(tr: Tracer, *args: Any, **kwargs: Any) -> None:
        if len(tr.depths) < 2 or tr.depths[1] != "grid" or id(tr.blocks[1]) in _INDEXED:
            return check(tr, *args, **kwargs)
        _INDEXED[id(tr.blocks[1])] = None  # (built by `_path` if the check needs it)
        try:
            return check(tr, *args, **kwargs)
        finally:
            del _INDEXED[id(tr.blocks[1])]
    return run


def _waits(tr: Tracer, later: Loc | None, again: Callable[[Loc | None], None]) -> bool:
    """Inside a counted loop, a check that fails waits to run `again` once the loop's body is
    traced, with its steps known (loops.py `_inductions`), at the access's line `later` (the
    innermost loop's, then each enclosing one's). Whether it waits."""
    if not tr.deferred:
        return False
    where = later or user_loc()
    tr.deferred[-1].append(lambda: again(where))
    return True


@_indexed
def check_store(tr: Tracer, tensor: str, indices: list[Value], value: Value,
                mask: Value | None = None, later: Loc | None = None,
                target: Value | None = None, attrs: dict | None = None,
                path: list | None = None) -> None:
    """Fail when a store inside the grid races between programs (see the module's docstring):
    its indices must separate every grid dimension (separation.py) the value depends on. A
    `mask` of `td.arange` lanes below constants narrows those lanes (a padded block). Inside
    a counted loop, an index from a value the loop carries is checked again when the loop's
    body is traced (`later`: the store's line), once its step each trip is known
    (`Tracer.inductions`)."""
    if len(tr.depths) < 2 or tr.depths[1] != "grid" or (attrs or {}).get("locked"):
        return  # (a store under a lock: its programs take turns, locks.py)
    indices = list(indices)  # (a check that waits keeps them: the caller appends the mask)
    path = _open_path(tr) if path is None else path  # (the store's, when checked later)
    progs = Programs(tr)
    if mask is not None:
        progs.bound_lanes(mask)
    deps = frozenset().union(*(progs.depends(i) for i in indices))
    used = frozenset().union(*(progs.separates(i) for i in indices)) | progs.jointly(indices)
    missing = [a for a in progs.varying() if a not in used]
    if not missing:
        return
    values = progs.value_depends(value)
    racing = [a for a in missing if a in values or ANY <= values]
    if not racing:
        return  # every program along those dimensions writes the same values
    # with the int arguments of the indices and the mask as constants, trace again
    need_static_in([*indices, *([mask] if mask is not None else [])], tr.int_params)
    names = ", ".join(f"'{a.hint}'" for a in racing)
    if ANY <= deps and _waits(tr, later, lambda where: check_store(
            tr, tensor, indices, value, mask, where, target, attrs, path)):
        return
    if ANY <= deps or later is not None:  # a value carried around a loop, or out of an `if`
        need_static_in([*(i.amount for i in tr.inductions.values()),  # the steps' and the
                        *(b for bounds in tr.counters.values() for b in bounds)],  # loops'
                       tr.int_params)  # bounds' int arguments as constants, then again (a
        # layer norm's `for row in range(row_start, min(row_start + rows, M))`)
    if target is not None and concrete.meet(
            tr, concrete.Access(target, indices, attrs or {}, mask, path)) is False:
        return  # each program's elements, computed, are its own (concrete.py)
    if _authors_word(tr, attrs, (indices, mask), carried=ANY <= deps):
        return
    if ANY <= deps:
        tr.fail(TraceError,
                f"the index of this store to '{tensor}' is computed from a value that a loop "
                "carries (or an `if` yields), which the race check cannot follow: two programs "
                f"along grid dimension {names} might write the same elements",
                hint="index with the loop's own counter or tile (for row in range(start, end): "
                     "x[row * stride + cols] = ...), or step the carried offset by a constant "
                     "in a loop over runtime bounds (off += stride)" + _DISJOINT, loc=later)
    if any(a in deps for a in racing) and _stepped(tr, indices):
        tr.fail(TraceError,
                f"the index of this store to '{tensor}' is stepped by a loop from a start that "
                f"does not tell the programs along grid dimension {names} apart, or whose "
                "trips reach past it, which can give two of its programs the same elements",
                hint="start each program at its own elements (off = pid * rows * stride, or a "
                     "start it loads, as vLLM's varlen `bos = tl.load(cu_seqlens + pid)`), or "
                     "index with the loop's own counter: x[row * stride + cols]" + _DISJOINT,
                loc=later)
    if any(a in deps for a in racing):
        how = "and from values loaded from memory (a count or offset the caller passes, " \
            "which the check cannot bound), in a way that can give two of its programs the " \
            "same elements" if _loads_upstream(indices, mask) else "in a way that can give " \
            "two of its programs the same elements (`//`, `%`, a min or max, a sum of two " \
            "grid indices or of a tile and a vector)"
        tr.fail(TraceError,
                f"the index of this store to '{tensor}' is computed from grid dimension {names} "
                f"{how}: where two of them write an element with different values, which "
                "one lands would depend on the order the programs run in (the check cannot "
                "tell whether the values agree)",
                hint="index with the tile itself or its `t.id` / `t.begin` (out[t.id] = ...), "
                     "combine the values with an atomic (td.atomic_add(out, [i], v)), or write "
                     "each program's part to a separate output and reduce it in a second grid"
                     + _DISJOINT, loc=later)
    tr.fail(TraceError,
            f"this store to '{tensor}' does not use grid dimension {names}: every program along "
            f"it writes the same elements of '{tensor}' with different values, so the result "
            "would depend on the block sizes and on the order the programs run in",
            hint="index the store with that tile, or make it a nested (sequential) loop and "
                 "combine across it, e.g. `for tm in td.tile(m): acc = ...; for tn in "
                 "td.tile(n): acc += ...`", loc=later)


_DISJOINT = ("; where the caller guarantees the programs write apart (distinct slots in a "
             "mapping it passes), say so: td.store(..., disjoint=True), which the NumPy backend "
             "checks on the data it runs")


def _both_locked(attrs: dict, op: Op) -> bool:
    """Two accesses made under a lock: the programs holding it take turns (locks.py; the NumPy
    backend checks that one lock guards each element)."""
    return bool(attrs.get("locked") and op.attrs.get("locked"))


def _terms(v: Value) -> list[Value]:
    """The terms `v` adds up (through casts and broadcasts)."""
    op = v.owner
    if op is not None and op.name in ("cast", "broadcast"):
        return _terms(op.operands[0])
    if op is not None and op.name == "add":
        return _terms(op.operands[0]) + _terms(op.operands[1])
    return [v]


def _authors_word(tr: Tracer, attrs: dict | None, *accesses: tuple[list[Value], Value | None],
                  carried: bool = False) -> bool:
    """Inside a `@triton.jit` body (a launch as written), a store the check cannot tell apart
    where one of the accesses is indexed or masked by values loaded from memory (FlagGems'
    index kernel, moe_align_block_size's `range(cumsum[pid], cumsum[pid + 1])`, a paged KV
    cache's loaded slot), or (`carried`) whose index a loop carries (a persistent matmul's
    `tile_id += NUM_SMS` under `if ki == 0`, stream-K's `start_iter = end_iter`), is the
    author's word that the programs write apart, as `td.store(..., disjoint=True)` says it:
    Triton has no race check, and `tl.store` no way to say so. It becomes such a store
    (`attrs`, the store's own), which the NumPy backend checks on the data it runs
    (disjoint.py). Whether it did."""
    if not tr.triton_body or attrs is None or not carried and \
            not Programs(tr).from_memory([v for ix, m in accesses for v in (*ix, m)]):
        return False
    attrs["disjoint"] = "triton"  # (the word is implied: the NumPy backend's error says so)
    return True


def _left_to_data(progs: Programs, tensor: Any, mine: list[Value], theirs: list[Value]) -> bool:
    """Whether two accesses that the check cannot tell apart differ by a loaded column alone
    (`_loaded_column`): the data says whether they meet, and the NumPy backend records the
    programs' accesses to the tensor on each run (`tracked`, disjoint.py)."""
    rank = len(root(tensor.value).type.shape)
    sides = [side for side in (mine, theirs) if any(progs.loaded(v) for v in side)]
    return bool(sides) and all(_loaded_column(progs, rank, side) for side in sides)


def _loaded_column(progs: Programs, rank: int, indices: list[Value]) -> bool:
    """Whether a flat index into a tensor of two or more dimensions adds a value read from
    memory, as it is, to terms that tell the programs apart: a column within the program's row
    (Liger's cross entropy, `X_ptr += pid * stride` then `tl.load(X_ptr + y)` at its label),
    which only the data keeps in the row. A loaded value scaled to a line (a cache slot,
    `cs + line * (D * S)`) is a slot, which the check compares itself."""
    if len(indices) != 1 or rank < 2:
        return False
    terms = _terms(indices[0])
    loaded = [_terms(t)[0] for t in terms if progs.loaded(t)]
    return all(t.owner is not None and t.owner.name == "load" for t in loaded) and \
        any(progs.depends(t) and not progs.loaded(t) for t in terms)


def _loads_upstream(indices: list[Value], mask: Value | None) -> bool:
    """Whether a store's indices or mask are computed from a value loaded from memory."""
    return any(v.owner is not None and v.owner.name == "load"
               for v in upstream([*indices, *([mask] if mask is not None else [])]))


def _replicated(tr: Tracer, store: Op) -> bool:
    """Whether every program makes `store` alike: at the grid body's top level, its indices,
    mask and value the same in each (SGLang's ep_scatter_1 writes one cumsum from every
    program). A load after it reads what this program stored, or the same values another did."""
    if store not in tr.blocks[1].ops:
        return False
    progs = Programs(tr)
    return all(not progs.depends(v) for v in store.operands[1:])


def _stepped(tr: Tracer, indices: list[Value]) -> bool:
    """Whether an index is computed from a value a loop steps each trip (`off += stride`)."""
    return any(v in tr.inductions for v in upstream(indices))


# ---- overlapping stores ---------------------------------------------------------------------
# Two stores of one grid that may write the same element of a tensor race when they may do so
# in two programs (`out[tm] = a; out[tm + 1] = b`). They pass when:
# - each program keeps to its own elements through both (`_own_elements`: along every grid
#   dimension the programs vary in, both index the tensor with the same expression that gives
#   each program its own elements, such as the grid tile, a `td.grid` index, or a block-1 tile's
#   `.begin`). One program's stores then land in program order: the Triton backend puts a
#   barrier between them (lowering/backends/triton/barriers.py), since different threads write
#   an element for each store. Liger's cross_entropy writes a row's gradient in a loop, then
#   `X[r, y] -= 1`; in the two branches of an `if`, `dx[r, t] = 0` / `dx[r, t] = ...`;
# - their elements provably differ (disjoint static slices or constant indices:
#   `out[tm, :n1] = a; out[tm, n1:] = b`, or offsets an index never bridges);
# - they are the same access written twice, run alike by every program (`_alike`).

_Key = tuple


def _span(v: Value) -> Slice | None:
    """The indices a range, or a range shifted by a constant, can reach (None: unknown)."""
    t, op = v.type, v.owner
    if isinstance(t, RangeType) and not t.shifted:
        return Slice(0, t.extent, 1)
    if op is not None and op.name == "tile.shift":
        amount = op.operands[1].owner
        if amount is not None and amount.name == "const":
            return Slice(int(amount.attrs["value"]), t.extent, 1)  # type: ignore[union-attr]
    return None


def _access(progs: Programs, shape: tuple[int, ...], indices: list[Value], attrs: dict
            ) -> list[tuple[_Key, Slice | None, Value | None]]:
    """Per tensor dimension: what the index is (`Programs.key`, by structure: `tm + 1` traced
    twice is equal), the indices it can reach, and its value (None for `:` and slices)."""
    full, sliced = attrs.get("full", ()), slices_of(attrs)
    it = iter(indices)
    out: list[tuple[_Key, Slice | None, Value | None]] = []
    for d, extent in enumerate(shape):
        if d in full:
            part = sliced.get(d, Slice(0, extent, 1))
            out.append((("set", part), part, None))
            continue
        v = next(it)
        k = progs.key(v)
        out.append((k, Slice(k[1], 1, 1) if k[0] == "const" else _span(v), v))
    return out


def _disjoint(a: Slice | None, b: Slice | None) -> bool:
    if a is None or b is None:
        return False
    x, y = a.indices(), b.indices()
    if x[-1] < y[0] or y[-1] < x[0]:
        return True
    return (a.step > 1 or b.step > 1) and not set(x).intersection(y)


def _never_meet(progs: Programs, a: tuple, b: tuple) -> bool:
    """Whether one tensor dimension's indices of two accesses (as `_access` gives them) never
    meet: disjoint slices, or offsets that the index's coefficients never bridge (`2 * g` and
    `2 * g + 1`, separation.py's `never_meet`)."""
    return _disjoint(a[1], b[1]) or \
        a[2] is not None and b[2] is not None and progs.never_meet(a[2], b[2])


def _path(block: Block, target: Op) -> list[tuple[Op, int]] | None:
    """The (op, region index) pairs from `block` down to the block holding `target`."""
    if id(block) in _INDEXED:  # (found once per check, at its first need: `_indexed`)
        index = _INDEXED[id(block)]
        if index is None:
            index = _INDEXED[id(block)] = _paths(block)
        return index.get(id(target))
    for op in block.ops:
        if op is target:
            return []
        for i, region in enumerate(op.regions):
            below = _path(region, target)
            if below is not None:
                return [(op, i), *below]
    return None


def _open_path(tr: Tracer) -> list[tuple[Op, int]]:
    """The (op, region index) pairs from the grid's block down to the block being traced."""
    return [(parent.ops[-1], next(i for i, r in enumerate(parent.ops[-1].regions) if r is child))
            for parent, child in zip(tr.blocks[1:], tr.blocks[2:])]


def _own_elements(progs: Programs, a: list, b: list) -> bool:
    """Whether two programs never touch one element through accesses `a` and `b` (as `_access`
    gives them): for every grid dimension along which programs vary, both index some tensor
    dimension with the same expression (a block-1 tile and its `.begin` alike) and it separates
    that grid dimension (separation.py), so each program keeps to its own elements."""
    # a `// c`, `% c` pair (`jointly`) among the dimensions both index alike
    pair = progs.jointly([x[2] for x, y in zip(a, b) if x[2] is not None and x[0] == y[0]])
    return all(d in pair or any(x[2] is not None and y[2] is not None and d in progs.separates(x[2])
                                and progs.position_key(x[2]) == progs.position_key(y[2])
                                for x, y in zip(a, b)) for d in progs.varying())


def _alike(tr: Tracer, progs: Programs, old: Op) -> bool:
    """Whether every program runs the store being traced and `old`, the same access written
    twice, alike (neither under an `if`, nor in a loop whose trip count depends on the grid), so
    each program's last write to an element is the same store, with the same value along the
    grid dimensions it leaves out (`check_store`). A store in one branch of an `if` on `tn` and
    the same access in the other (`out[tm] = 0` / `out[tm] = 1`) would race along `tn`."""
    def alike(path: list[tuple[Op, int]]) -> bool:
        return all(op.name == "for" and not any(
            progs.depends(v) for v in op.operands[:len(op.operands) - len(loop_inits(op))])
            for op, _ in path)
    return alike(_path(tr.blocks[1], old) or []) and alike(_open_path(tr))


def _under_masks(tr: Tracer, shared: Programs, mine: Value | None, theirs: Value | None,
                 guards: set | None = None) -> Programs:
    """The analysis for two accesses: `shared`, or where both are under one mask of `td.arange`
    lanes below constants, an analysis that counts those lanes only (`bound_lanes`)."""
    if mine is None or theirs is None or \
            shared.key(_unbroadcast(mine)) != shared.key(_unbroadcast(theirs)):
        return shared
    progs = Programs(tr, guards)
    progs.bound_lanes(mine)
    return progs


class _Made:
    """The analyses of one access being checked, made once per set of shared `if` branches
    (`_shared_ifs`), not once per earlier access it is compared with (an unrolled loop has
    hundreds: torchao's Hadamard butterfly)."""

    def __init__(self, tr: Tracer, shape: Any, indices: list[Value], attrs: dict,
                 mask: Value | None) -> None:
        self.tr, self.shape, self.indices, self.attrs, self.mask = tr, shape, indices, attrs, mask
        self._analyses: dict[frozenset, tuple[Programs, list]] = {}
        self._lanes: dict[frozenset, Programs] = {}
        self._ints: frozenset[str] | None = None

    def analysis(self, guards: set) -> tuple[Programs, list]:
        """The grid's analysis under `guards`, and the access's form in it (`_access`)."""
        key = frozenset(guards)
        if key not in self._analyses:
            shared = Programs(self.tr, guards)
            self._analyses[key] = shared, _access(shared, self.shape, self.indices, self.attrs)
        return self._analyses[key]

    def int_arguments(self) -> frozenset[str]:
        """The int arguments the access's indices and mask read (`_static_retry`)."""
        if self._ints is None:
            self._ints = int_arguments([*self.indices, *([self.mask] if self.mask is not None
                                                          else [])], self.tr.int_params)
        return self._ints

    def lanes(self, guards: set) -> Programs:
        """The analysis whose lanes the access's own mask bounds (`_masked`)."""
        key = frozenset(guards)
        if key not in self._lanes:
            self._lanes[key] = _masked(self.tr, self.mask, guards)
        return self._lanes[key]


def _shared_ifs(tr: Tracer, op: Op) -> set:
    """The branches of `if`s that hold both the access being traced and `op`: only their
    conditions bound both (`Programs._guard`)."""
    return set(_open_path(tr)) & set(_path(tr.blocks[1], op) or [])


def _unbroadcast(v: Value) -> Value:
    while v.owner is not None and v.owner.name == "broadcast":
        v = v.owner.operands[0]
    return v


def _masked(tr: Tracer, mask: Value | None, guards: set | None = None) -> Programs:
    """An analysis whose `td.arange` lanes are those `mask` keeps (`Programs.bound_lanes`)."""
    progs = Programs(tr, guards)
    if mask is not None:
        progs.bound_lanes(mask)
    return progs


def _mask_of(op: Op) -> Value | None:
    """The mask operand of a traced load or store (a store's value comes after it)."""
    if not op.attrs.get("mask"):
        return None
    return op.operands[-1] if op.name == "load" else op.operands[-2]


def _static_retry(tr: Tracer, made: _Made, op: Op) -> None:
    """Before refusing two accesses: where their indices or masks read int arguments, trace
    again with those as constants (static_args.py `need_static_in`)."""
    if not tr.int_params:
        return
    key = ("int arguments", op)  # (an earlier op, compared with many later accesses)
    if key not in tr.race_memo:
        tr.race_memo[key] = int_arguments(op.operands[1:], tr.int_params)
    found = made.int_arguments() | tr.race_memo[key]
    if found:
        raise StaticNeeded(found)


@_indexed
def check_overlap(tr: Tracer, tensor: Any, indices: list[Value], attrs: dict,
                  atomic: bool = False, mask: Value | None = None, later: Loc | None = None,
                  path: list | None = None) -> None:
    """Fail when this store to `tensor` and an earlier store of the same grid may write the same
    element in two programs (see above). Atomics (`atomic`) combine with each other in any
    order, but not with a store. Inside a counted loop, checked again later, as
    `check_read_write`."""
    if len(tr.depths) < 2 or tr.depths[1] != "grid":
        return
    indices = list(indices)  # (a check that waits keeps them: the caller appends the mask)
    path = _open_path(tr) if path is None else path  # (the access's, when checked later)
    shape = tensor.type.shape
    base = root(tensor.value)
    made = _Made(tr, shape, indices, attrs, mask)
    for op in walk(tr.blocks[1]):
        if op.name not in ("store", "atomic") or root(op.operands[0]) is not base or \
                (atomic and op.name == "atomic") or op.attrs.get("disjoint") or \
                _both_locked(attrs, op):
            continue  # (a disjoint store is its author's word, checked by NumPy: disjoint.py)
        guards = _shared_ifs(tr, op)
        shared, mine = made.analysis(guards)
        progs = _under_masks(tr, shared, mask, _mask_of(op) if op.name == "store" else None,
                             guards)
        new = mine if progs is shared else _access(progs, shape, indices, attrs)
        if op.operands[0] is tensor.value:
            old = _access(progs, shape, op.operands[1:-1], op.attrs)
            lanes = (made.lanes(guards),
                     _masked(tr, _mask_of(op) if op.name == "store" else None, guards))
            if _own_elements(progs, new, old) or _own_windows(progs, new, old, lanes) \
                    or [k for k, _, _ in old] == [k for k, _, _ in new] and _alike(tr, progs, op) \
                    or any(_never_meet(progs, a, b) for a, b in zip(old, new)):
                continue
        elif _apart_views(progs, (tensor.value, new), (op.operands[0], op.operands[1:-1], op)):
            continue
        _static_retry(tr, made, op)
        if _waits(tr, later, lambda where: check_overlap(tr, tensor, indices, attrs, atomic,
                                                         mask, where, path)):
            return
        if _computed_apart(tr, (tensor.value, indices, attrs, mask, path), op):
            continue
        if not atomic and op.name == "store" and _left_to_data(
                Programs(tr), tensor, indices, op.operands[1:-1]):
            attrs["tracked"] = op.attrs["tracked"] = True  # (as in check_read_write)
            continue
        if not atomic and op.name == "store" and _authors_word(
                tr, attrs, (indices, mask), (op.operands[1:-1], _mask_of(op))):
            op.attrs["disjoint"] = "triton"  # (both stores: each one's word)
            continue
        line = f"line {op.loc.line}" if op.loc is not None else "an earlier store"
        this, that = ("atomic", "store") if atomic else ("store", op.name)
        tr.fail(TraceError,
                f"this {this} to '{tensor.name}' may write elements that the {that} at {line} "
                "writes too: grid programs (and the threads of one program) run in parallel, so "
                "which value lands would not be defined", loc=later,
                hint="write each element once: store disjoint ranges (out[tm, :n1] = a; "
                     "out[tm, n1:] = b), or combine the values before one store"
                     + (_DISJOINT if not atomic and (_loads_upstream(indices, mask) or
                                                     _loads_upstream(op.operands[1:-1], None))
                        else ""))


def _computed_apart(tr: Tracer, mine: tuple[Value, list[Value], dict, Value | None, list],
                    op: Op) -> bool:
    """Whether the access being traced (its tensor, indices, attrs, mask and path) and traced
    access `op` are apart in every program, by their elements computed for each
    (concrete.py)."""
    tensor, indices, attrs, mask, path = mine
    theirs = op.operands[0].type
    n = len(theirs.shape) - len(op.attrs.get("full", ()))  # type: ignore[union-attr]
    their_mask = op.operands[1 + n] if op.attrs.get("mask") else None
    a = concrete.Access(tensor, indices, attrs, mask, path)
    b = concrete.Access(op.operands[0], op.operands[1:1 + n], op.attrs, their_mask,
                        _path(tr.blocks[1], op) or [])
    return concrete.meet(tr, a, b) is False


# ---- reads of what other programs write -----------------------------------------------------
# A tensor written in place by a grid and read in the same grid races when a program may read an
# element another program writes: programs run in any order, so the read sees the old or the new
# value (an in-place shift `x[i + 1, tn] = x[i, tn]`, or `x[:, tn] -= x[:, :1]`, which reads the
# column the first program writes). A load and a store are apart when some dimension's indices
# are disjoint (static slices, constants), or when, for every grid dimension along which
# programs vary, they index some tensor dimension with the same expression and it separates that
# grid dimension (separation.py): then each program reads only what it writes itself
# (`x[tm, tn] = x[tm, tn] * 2`). Atomics are exempt: they are how programs combine.

def _apart(progs: Programs, store: list, load: list,
           lanes: tuple[Programs, Programs] | None = None) -> bool:
    """Whether no program reads, through `load`, an element another writes through `store`
    (both as `_access` gives them, for one tensor value)."""
    if any(_never_meet(progs, s, l) for s, l in zip(store, load)):
        return True
    return _own_elements(progs, store, load) or _own_windows(progs, store, load, lanes)


def _own_windows(progs: Programs, a: list, b: list,
                 lanes: tuple[Programs, Programs] | None = None) -> bool:
    """Whether every grid dimension along which programs vary is kept apart by one tensor
    dimension that both accesses index as `c * p + w`, their windows `w` spanning less than
    `|c|` together (`Programs.window`). `lanes`: the analyses whose `td.arange` lanes each
    access's own mask bounds (`_masked`), for the windows."""
    pa, pb = lanes or (progs, progs)
    kept: set[tuple] = set()
    apart: frozenset = frozenset()  # by windows over several positions (`shared_window`)
    for x, y in zip(a, b):
        if x[2] is None or y[2] is None:
            continue
        wx, wy = pa.window(x[2]), pb.window(y[2])
        if wx is not None and wy is not None and wx[:2] == wy[:2] and \
                max(wx[3], wy[3]) - min(wx[2], wy[2]) < abs(wx[1]):
            kept.add(wx[0])
        apart |= pa.shared_window(x[2], y[2], pb)
    return all(("tile.begin", id(d)) in kept or ("tile.id", id(d)) in kept or d in apart
               for d in progs.varying())


# ---- accesses through two views of one tensor ------------------------------------------------
# Views made by indexing in host code (`lo, hi = out[:, :n1], out[:, n1:]`) are parts of their
# root: an access through one is an access to the root at the slices' starts and steps. Two
# accesses through different such views are compared in the root's coordinates, dimension by
# dimension: they are apart where some dimension's elements never meet (`_never_meet`). Through
# a reshape or a permute they are not comparable (they stay refused). As for one view, each
# program may also keep to its own elements (`_own_elements`) through both.

def _apart_views(progs: Programs, mine: tuple[Value, list], theirs: tuple[Value, list, Op]
                 ) -> bool:
    """Whether no two programs touch one element through an access (`_access`'s form, through
    tensor `mine[0]`) and op `theirs` (through another view of the same root, with its
    indices)."""
    other, indices, op = theirs
    a = _in_root(mine[0], mine[1])
    shape = other.type.shape  # type: ignore[union-attr]
    b = _in_root(other, _access(progs, shape, indices, op.attrs))
    return a is not None and b is not None and _apart(progs, a, b)


def _in_root(v: Value, access: list) -> list | None:
    """`access` through tensor `v` in the coordinates of its root (`views.root_coords`). A
    dimension a slice moves keeps its reach, moved; its value is dropped (it indexes other
    coordinates). A dimension an int index dropped is that constant (`out[..., 1]`)."""
    coords = root_coords(v)
    if coords is None:
        return None
    return [(("const", a), Slice(a, 1, 1), None) if d is None else
            access[d] if (a, k) == (0, 1) else _moved(access[d], a, k) for d, a, k in coords]


def _moved(entry: tuple, start: int, step: int) -> tuple:
    key = ("moved", start, step, entry[0])
    span = entry[1]
    if span is None:
        return (key, None, None)
    return (key, Slice(start + span.start * step, span.size, span.step * step), None)


@_indexed
def check_read_write(tr: Tracer, tensor: Any, indices: list[Value], attrs: dict,
                     writing: bool, mask: Value | None = None, later: Loc | None = None,
                     path: list | None = None) -> None:
    """Fail when this load of `tensor` (or store to it, `writing`) and a store (or load) traced
    earlier in the same grid may touch an element in two different programs (see above). Two
    accesses under one `mask` of `td.arange` lanes below constants count those lanes only.
    Inside a counted loop, a failing pair is checked again (`later`, the access's line) once
    the loop's body is traced, with its carried values' steps known (`Tracer.inductions`)."""
    if len(tr.depths) < 2 or tr.depths[1] != "grid":
        return
    indices = list(indices)  # (a check that waits keeps them: the caller appends the mask)
    path = _open_path(tr) if path is None else path  # (the access's, when checked later)
    base, other = root(tensor.value), "load" if writing else "store"
    ops = [op for op in walk(tr.blocks[1]) if op.name == other and root(op.operands[0]) is base
           and not op.attrs.get("disjoint")  # (its author's word, checked by NumPy)
           and not _both_locked(attrs, op)]
    if not ops:
        return
    made = _Made(tr, tensor.type.shape, indices, attrs, mask)
    for op in ops:
        if not writing and _replicated(tr, op):
            continue
        guards = _shared_ifs(tr, op)
        shared, mine = made.analysis(guards)
        progs = _under_masks(tr, shared, mask, _mask_of(op), guards)
        this = mine if progs is shared else _access(progs, tensor.type.shape, indices, attrs)
        theirs = op.operands[1:] if writing else op.operands[1:-1]
        if op.operands[0] is tensor.value:
            that = _access(progs, tensor.type.shape, theirs, op.attrs)
            lanes = (made.lanes(guards), _masked(tr, _mask_of(op), guards))  # (this, that)
            if _apart(progs, *((this, that, lanes) if writing
                               else (that, this, (lanes[1], lanes[0])))):
                continue
        elif _apart_views(progs, (tensor.value, this), (op.operands[0], theirs, op)):
            continue
        _static_retry(tr, made, op)
        if _waits(tr, later, lambda where: check_read_write(tr, tensor, indices, attrs, writing,
                                                            mask, where, path)):
            return
        if _computed_apart(tr, (tensor.value, indices, attrs, mask, path), op):
            continue
        if _left_to_data(shared, tensor, indices, theirs):
            attrs["tracked"] = op.attrs["tracked"] = True  # the data's to say, which the
            continue  # NumPy backend checks on each run (disjoint.py)
        if _authors_word(tr, attrs if writing else op.attrs, (indices, mask),
                         (theirs, _mask_of(op))):
            continue  # (the store's word covers the reads of what it writes: disjoint.py)
        line = f"line {op.loc.line}" if op.loc is not None else f"an earlier {other}"
        what = f"this store to '{tensor.name}' may write elements that the load at {line} " \
               "reads" if writing else \
               f"this load of '{tensor.name}' may read elements that the store at {line} writes"
        tr.fail(TraceError,
                f"{what} in another program of the grid: its programs run in parallel and in "
                "any order, so the load would see the old or the new values", loc=later,
                hint="read and write the same elements in each program (x[tm, tn] = x[tm, tn] "
                     "* 2), write the result to a separate output, or split the kernel into two "
                     "grids (one that writes, then one that reads); atomics (td.atomic_add) "
                     "combine values across programs")
