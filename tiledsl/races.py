"""Write races between grid programs: a store that leaves out a grid dimension.

The programs of a grid run in parallel (in any order on a GPU). A store inside the grid whose
indices do not depend on one of its dimensions has every program along that dimension write the
same elements; unless they all write the same values, the result depends on the block sizes and
on the order the programs run in. The check runs while tracing, so every backend rejects the
kernel at the user's line, before any config is chosen.
"""

from __future__ import annotations

from typing import Any

from tiledsl.errors import TraceError
from tiledsl.ir.core import Block, Op, Value, loop_inits, walk
from tiledsl.ir.slices import Slice, slices_of
from tiledsl.ir.types import RangeType
from tiledsl.tracer import Tracer

# Dependence on something the check cannot follow (a value carried around a loop): assume all.
_ANY = frozenset({None})


def _owners(tr: Tracer) -> dict[int, Op]:
    """The op owning each open block (by id), the grid's and each enclosing loop's: an op is
    appended to its parent block before its body is traced, so it is the parent's last op."""
    return {id(child): parent.ops[-1] for parent, child in zip(tr.blocks, tr.blocks[1:])
            if parent.ops}


def _depends(v: Value, axes: set[Value], owners: dict[int, Op], tr: Tracer,
             memo: dict[int, frozenset]) -> frozenset:
    """The grid dimensions (range values) `v` depends on; `_ANY` where that cannot be told."""
    hit = memo.get(id(v))
    if hit is not None:
        return hit
    memo[id(v)] = frozenset()  # SSA has no cycles; this only guards against revisiting
    if v in axes:
        out = frozenset({v})
    elif v.owner is not None:
        op = v.owner
        out = _ANY if op.regions else frozenset().union(
            *(_depends(o, axes, owners, tr, memo) for o in op.operands))
    else:  # an argument of an open block: a loop's range, or a value carried around it
        out = frozenset()
        for block in tr.blocks[1:]:
            if v in block.args:
                op = owners.get(id(block))
                if op is None or op.name != "for" or \
                        block.args.index(v) >= int(op.attrs.get("ranges", 1)):
                    out = _ANY
                else:  # a loop range depends on its runtime stop and start, or first tile
                    bounds = len(op.operands) - len(loop_inits(op))
                    out = frozenset().union(
                        *(_depends(o, axes, owners, tr, memo) for o in op.operands[:bounds]))
                break
    memo[id(v)] = out
    return out


def _programs_vary(r: Value) -> bool:
    """Whether more than one program may run along this grid dimension under some config."""
    t = r.type
    assert isinstance(t, RangeType)
    return t.extent > 1 and not (isinstance(t.block, int) and t.block >= t.extent)


def check_store(tr: Tracer, tensor: str, indices: list[Value], value: Value) -> None:
    """Fail when a store inside the grid races between programs (see the module's docstring)."""
    if len(tr.depths) < 2 or tr.depths[1] != "grid":
        return
    axes = [a for a in tr.blocks[1].args if isinstance(a.type, RangeType)]
    owners = _owners(tr)
    memo: dict[int, frozenset] = {}
    used = frozenset().union(*(_depends(i, set(axes), owners, tr, memo) for i in indices))
    if _ANY <= used:
        return
    missing = [a for a in axes if a not in used and _programs_vary(a)]
    if not missing:
        return
    values = _depends(value, set(axes), owners, tr, memo)
    racing = [a for a in missing if a in values or _ANY <= values]
    if not racing:
        return  # every program along those dimensions writes the same values
    names = ", ".join(f"'{a.hint}'" for a in racing)
    tr.fail(TraceError,
            f"this store to '{tensor}' does not use grid dimension {names}: every program along "
            f"it writes the same elements of '{tensor}' with different values, so the result "
            "would depend on the block sizes and on the order the programs run in",
            hint="index the store with that tile, or make it a nested (sequential) loop and "
                 "combine across it, e.g. `for tm in td.tile(m): acc = ...; for tn in "
                 "td.tile(n): acc += ...`")


# ---- overlapping stores ---------------------------------------------------------------------
# Two different stores of one grid that may write the same element of a tensor race: they may
# run in different programs (`out[tm] = a; out[tm + 1] = b`), and even in one program the
# threads that write an element for each store differ. Stores whose elements provably differ
# (disjoint static slices or constant indices: `out[tm, :n1] = a; out[tm, n1:] = b`) pass; the
# same access written twice (same tiles, same offsets) keeps program order, as before.

_Key = tuple


def _key(v: Value) -> _Key:
    """What an index operand selects, compared by structure (`tm + 1` traced twice is equal)."""
    op = v.owner
    if op is not None and op.name == "const":
        return ("const", op.attrs["value"])
    if op is not None and op.name == "tile.shift":
        return ("shift", id(op.operands[0]), _key(op.operands[1]))
    return ("value", id(v))


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


def _access(shape: tuple[int, ...], indices: list[Value], attrs: dict
            ) -> list[tuple[_Key, Slice | None]]:
    """Per tensor dimension: what the index is (`_key`) and the indices it can reach."""
    full, sliced = attrs.get("full", ()), slices_of(attrs)
    it = iter(indices)
    out: list[tuple[_Key, Slice | None]] = []
    for d, extent in enumerate(shape):
        if d in full:
            part = sliced.get(d, Slice(0, extent, 1))
            out.append((("set", part), part))
            continue
        v = next(it)
        k = _key(v)
        out.append((k, Slice(k[1], 1, 1) if k[0] == "const" else _span(v)))
    return out


def _disjoint(a: Slice | None, b: Slice | None) -> bool:
    if a is None or b is None:
        return False
    x, y = a.indices(), b.indices()
    if x[-1] < y[0] or y[-1] < x[0]:
        return True
    return (a.step > 1 or b.step > 1) and not set(x).intersection(y)


def _path(block: Block, target: Op) -> list[tuple[Op, int]] | None:
    """The (op, region index) pairs from `block` down to the block holding `target`."""
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


def _exclusive(tr: Tracer, old: Op, new_keys: list[_Key], old_keys: list[_Key]) -> bool:
    """Whether the store being traced and `old` sit in different branches of one `if` that no
    loop of the grid encloses, and both index a dimension with the same grid tile: each program
    runs one branch once, and two programs write different elements along that dimension."""
    grid = {("value", id(a)) for a in tr.blocks[1].args if isinstance(a.type, RangeType)}
    if not any(k == j and k in grid for k, j in zip(new_keys, old_keys)):
        return False
    old_path = _path(tr.blocks[1], old) or []
    for (a, i), (b, j) in zip(old_path, _open_path(tr)):
        if a is not b or a.name != "if":
            return False
        if i != j:
            return True
    return False


def check_overlap(tr: Tracer, tensor: Any, indices: list[Value], attrs: dict,
                  atomic: bool = False) -> None:
    """Fail when this store to `tensor` and an earlier store of the same grid may write the same
    element (see above). Atomics (`atomic`) combine with each other in any order, but not with a
    store. Stores in the two branches of an `if` directly in the grid that share a grid tile
    never meet (`if ignored: dx[tb, t1] = 0 else: dx[tb, t2] = ...`)."""
    if len(tr.depths) < 2 or tr.depths[1] != "grid":
        return
    shape = tensor.type.shape
    new = _access(shape, indices, attrs)
    for op in walk(tr.blocks[1]):
        if op.name not in ("store", "atomic") or op.operands[0] is not tensor.value or \
                (atomic and op.name == "atomic"):
            continue
        old = _access(shape, op.operands[1:-1], op.attrs)
        old_keys, new_keys = [k for k, _ in old], [k for k, _ in new]
        if old_keys == new_keys or any(_disjoint(a, b) for (_, a), (_, b) in zip(old, new)) or \
                _exclusive(tr, op, new_keys, old_keys):
            continue
        line = f"line {op.loc.line}" if op.loc is not None else "an earlier store"
        this, that = ("atomic", "store") if atomic else ("store", op.name)
        tr.fail(TraceError,
                f"this {this} to '{tensor.name}' may write elements that the {that} at {line} "
                "writes too: grid programs (and the threads of one program) run in parallel, so "
                "which value lands would not be defined",
                hint="write each element once: store disjoint ranges (out[tm, :n1] = a; "
                     "out[tm, n1:] = b), or combine the values before one store")
