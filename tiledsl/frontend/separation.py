"""Which grid programs an index tells apart: the analysis behind the race checks (races.py).

The programs of a grid run in parallel, in any order. An access `x[i0, i1, ...]` made by every
program touches a set of elements per program; two programs race on `x` when one writes an
element the other reads or writes. For an index expression this module tells:

- `depends(v)`: the grid dimensions (range values of the grid op) `v` depends on at all;
- `separates(v)`: whether programs that differ along the grid dimensions `v` depends on get
  disjoint index sets from it (then it returns them all, else nothing). A grid range does, and
  so does a loop range whose bounds depend on the grid when the programs' windows
  `[start, stop)` cannot meet (`_disjoint_windows`: `stop = start + c` with `c` at most the
  distance between two programs' starts, `[t.begin, t.end)` of a grid tile, both bounds
  loaded, as a jagged segment's `offsets[g]`, `offsets[g + 1]`, or a persistent loop's tiles
  `[p::P]` with distinct firsts below the stride); `td.tile(tq.end)` does not (every window
  starts at 0). So does an integer combination of tile positions (a range's lanes, `t.index`,
  `t.begin`, `t.id`, `t.begin // d` where d divides the block) plus anything the same in every
  program, when the combination is injective over the positions' extents: `t.begin + 3`,
  `2 * t.index`, `bi * h + hi` over `td.grid(b, h)`, `tm.index[:, None] * n + tn.index`.
  `//` otherwise, `%`, min/max and the like lose it (`t.begin // (2 * B)` is equal for two
  neighbouring programs), as do `tm + i` and `t.begin + i` for another grid index `i`, unless
  the values are evaluated for every program (`_program_values`: a scalar computed from the
  grid's indices, constants, `+ - * // %`, min and max, such as Triton's GROUP_SIZE_M program
  swizzle) and no two programs get the same ones (`_distinct`). An
  index computed from values loaded from memory (a scatter through an index tile,
  `out[idx[tb]]`) is trusted: distinct indices are the scatter's contract.
- `key(v)`: what `v` computes, compared by structure (`tm.begin` traced twice gives one key), so
  a load and a store written with the same index expression can be matched.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tiledsl import dtypes
from tiledsl.frontend.block_sizes import symbol_choices
from tiledsl.ir.core import (
    Op, Value, block_index, loop_first, loop_inits, loop_start, loop_stop,
)
from tiledsl.ir.types import RangeType, TileType
from tiledsl.frontend.tracer import Tracer

# Dependence on something the analysis cannot follow (a value carried around a loop).
ANY = frozenset({None})
_NONE: frozenset = frozenset()
_UNSET = object()
COUNTER_EXTENT = 2**31 - 1  # a counted loop's counter, as a position: no bound known

_INJECTIVE = ("neg", "cast", "broadcast", "expand_dims", "reshape", "transpose")  # 1 operand
_TRUSTED = ("load", "atomic")  # values read from memory: an index tile's values are the user's


class Programs:
    """The grid being traced (`tr.blocks[1]`): its dimensions and the analyses over them."""

    def __init__(self, tr: Tracer, guards: set | None = None) -> None:
        self.tr = tr
        self.axes = [a for a in tr.blocks[1].args if isinstance(a.type, RangeType)]
        # The op owning each open block: appended to its parent before its body is traced.
        self.owners = {id(child): parent.ops[-1] for parent, child in
                       zip(tr.blocks, tr.blocks[1:]) if parent.ops}
        self._deps: dict[int, frozenset] = {}
        self._value_deps: dict[int, frozenset] = {}
        self._sep: dict[int, frozenset] = {}
        self._keys: dict[int, tuple] = {}
        self._nodes: dict[tuple, int] = {}  # `_node`'s numbers
        self._loaded: dict[int, bool] = {}
        self._fixed: dict[int, bool] = {}  # _invariant's answers
        self._extents: dict[tuple, int] = {}  # a position variable (affine) -> its extent
        self._sources: dict[tuple, Value] = {}  # ... -> the range it is a position of
        self._computed: dict[tuple, Any] = {}  # a computed position -> its value per program
        self._numeric = False  # whether `affine` may make computed positions (`_by_program`)
        self._lane_bounds: dict[tuple, int] = {}  # an arange's key -> lanes a mask keeps
        self._sum_bounds: dict[tuple, int] = {}  # a sum's key -> the bound a mask keeps it below
        self._parts: dict[tuple, set[tuple]] = {}  # a bounded sum's position -> its positions
        self._mesh_made: Any = _UNSET  # `_mesh`, built on first use
        self._window_sources: dict[tuple, Value] = {}  # a `_window` position -> its value
        self._affines: dict[tuple, Any] = {}  # `affine`'s answers, and
        self._windows: dict[int, Any] = {}  # `_window`'s answers (an index is a DAG: a sort
        # network's is exponential as a tree); cleared when a mask bounds lanes anew
        self._guards: dict[tuple, int] = {}  # a position -> the bound an enclosing `if` keeps
        for parent, child in zip(tr.blocks[1:], tr.blocks[2:]):  # it below (`_guard`): each
            op = parent.ops[-1]  # open `if`, or (`guards`) those that hold another access too
            side = 0 if op.regions and op.regions[0] is child else 1
            if op.name == "if" and (guards is None or (op, side) in guards):
                self._guard(op.operands[0], side == 1)  # (the second branch: the test failed)

    def varying(self) -> list[Value]:
        """The grid dimensions along which more than one program may run under some config."""
        return [a for a in self.axes if _programs_vary(a)]

    # ---- dependence ---------------------------------------------------------------------
    def depends(self, v: Value) -> frozenset:
        """The grid dimensions `v` depends on; `ANY` where that cannot be told."""
        hit = self._deps.get(id(v))
        if hit is not None:
            return hit
        self._deps[id(v)] = _NONE  # SSA has no cycles; this only guards against revisiting
        if v in self.axes:
            out = frozenset({v})
        elif v.owner is not None:
            op = v.owner
            out = ANY if op.regions else self._union(op.operands)
        elif v in self.tr.counters:  # a counted loop's counter: from its bounds
            out = self._union(list(self.tr.counters[v]))
        elif v in self.tr.inductions:  # a value it steps each trip: first, step, counter
            out = self._union(list(self.tr.inductions[v][:3]))
        else:
            op = self._loop_of(v)
            out = self._union(op.operands[:len(op.operands) - len(loop_inits(op))]) \
                if op is not None else (ANY if self._carried(v) else _NONE)
        self._deps[id(v)] = out
        return out

    def value_depends(self, v: Value) -> frozenset:
        """The grid dimensions a stored value `v` depends on at a given element: as `depends`,
        but a loop range's lanes, `t.index`, `t.begin` and `t.id` count as positions, the same
        in every program at that element (where its bounds move with the program, they change
        which elements a program covers, not what its lanes hold there)."""
        hit = self._value_deps.get(id(v))
        if hit is not None:
            return hit
        self._value_deps[id(v)] = _NONE
        op = v.owner
        if op is None:  # a loop's range or counter: a position, like the element's index
            out = _NONE if self._loop_of(v) is not None or v in self.tr.counters \
                else self.depends(v)
        elif op.name in ("tile.index", "tile.begin", "tile.id") and \
                self._loop_of(op.operands[0]) is not None:
            out = _NONE
        elif op.regions:
            out = ANY
        else:
            out = frozenset().union(*(self.value_depends(o) for o in op.operands))
        self._value_deps[id(v)] = out
        return out

    def _union(self, values: list[Value]) -> frozenset:
        return frozenset().union(*(self.depends(o) for o in values))

    def _loop_of(self, v: Value) -> Op | None:
        """The `for` op whose range `v` is (a loop range depends on its runtime stop and start,
        or its first tile); None for anything else."""
        for block in self.tr.blocks[1:]:
            if v in block.args:
                op = self.owners.get(id(block))
                if op is not None and op.name == "for" and \
                        block.args.index(v) < int(op.attrs.get("ranges", 1)):
                    return op
                return None
        return None

    def _carried(self, v: Value) -> bool:
        return any(v in block.args for block in self.tr.blocks[1:])

    # ---- injectivity --------------------------------------------------------------------
    def separates(self, v: Value) -> frozenset:
        """The grid dimensions along which programs get disjoint indices from `v` (see the
        module's docstring): empty, or `depends(v)`."""
        hit = self._sep.get(id(v))
        if hit is None:
            hit = self._sep[id(v)] = self._separates(v)
        return hit

    def _separates(self, v: Value) -> frozenset:
        deps = self.depends(v)
        if not deps or ANY <= deps:
            return _NONE
        if v.owner is None and v not in self.tr.inductions:  # a grid or loop range
            return deps if self._disjoint_windows(v) else _NONE
        if self.loaded(v):  # a scatter's indices
            return deps
        form = self._numeric_affine(v)
        if form is None or not _injective([(c, self._extents[x]) for x, c in form.items()]):
            return _NONE
        if any(x in self._computed for x in form):  # distinct programs, distinct positions?
            return deps if self._distinct([form]) else _NONE
        covered = frozenset().union(*(self.depends(self._sources[x]) for x in form))
        return deps if covered == deps else _NONE

    def jointly(self, indices: list[Value]) -> frozenset:
        """The grid dimensions that a pair `x // c`, `x % c` among one access's `indices`
        separates together, where `x` does (`x` is `(x // c) * c + x % c`): the fused-attention
        tutorial's `off_z = off_hz // H`, `off_h = off_hz % H`."""
        parts: dict[tuple, dict[str, Value]] = {}
        for v in indices:
            op = v.owner
            if op is not None and op.name in ("floordiv", "mod") and \
                    _int_const(op.operands[1]) and _const(op.operands[1]) > 0:
                key = (self.key(op.operands[0]), _const(op.operands[1]))
                parts.setdefault(key, {})[op.name] = op.operands[0]
        out = frozenset().union(*(self.separates(p["floordiv"]) for p in parts.values()
                                  if len(p) == 2))
        forms = [f for f in map(self._numeric_affine, indices) if f is not None and
                 _injective([(c, self._extents[x]) for x, c in f.items()])]
        if any(x in self._computed for f in forms for x in f) and self._distinct(forms):
            out |= frozenset().union(*(self.depends(i) for i in indices)) - ANY
        return out

    def _numeric_affine(self, v: Value) -> dict[tuple, int] | None:
        """`affine(v)` where a scalar computed from program indices with `//`, `%`, min or max
        (a program swizzle) is a position of its own, its values evaluated per program."""
        self._numeric = True
        try:
            return self.affine(v)
        finally:
            self._numeric = False

    def affine(self, v: Value) -> dict[tuple, int] | None:
        key = (id(v), self._numeric)
        if key not in self._affines:  # (a copy: callers may change the form they get)
            self._affines[key] = self._affine(v)
        got = self._affines[key]
        return None if got is None else dict(got)

    def _affine(self, v: Value) -> dict[tuple, int] | None:
        form = self._affine_form(v)
        if form is None and self._numeric and _scalar(v):
            return self._by_program(v)
        return form

    def _affine_form(self, v: Value) -> dict[tuple, int] | None:
        """`v` as an integer combination of positions (a range's lanes, a tile's begin or id,
        each over [0, extent)) plus a scalar the same in every program and iteration (left
        out); None where it is not one. Each position is its own variable, so the combination
        is injective over them all (`_injective`) only if distinct programs get distinct
        elements."""
        op = v.owner
        if op is None:
            if isinstance(v.type, RangeType) and (v in self.axes or self._loop_of(v)):
                return self._position("index", v) if self._disjoint_windows(v) else None
            if v in self.tr.counters:  # the same in every program, or a position of its own
                return {} if not self.depends(v) else \
                    self._position("counter", v) if self._disjoint_windows(v) else None
            if v in self.tr.inductions:
                return self._induction(v)
            return None if self._carried(v) or not _scalar(v) else {}
        if not op.regions and self._invariant(v) and _scalar(_splatted(v)):
            return {}
        xs = op.operands
        if op.name in ("tile.index", "tile.begin", "tile.id"):
            return self._position(op.name[5:], xs[0])
        if op.name == "arange":  # lanes 0..n-1 (its start is a constant, left out)
            return self._lanes(v)
        if op.name == "floordiv" and self._divides_block(xs[0], xs[1]):
            begin = xs[0].owner
            assert begin is not None
            return self._position(f"begin//{_const(xs[1])}", begin.operands[0])
        if op.name in _INJECTIVE and len(xs) == 1:
            form = self.affine(xs[0])
            return None if form is None else \
                {x: -c for x, c in form.items()} if op.name == "neg" else form
        if op.name == "mul":
            for x, c in (xs, xs[::-1]):
                if _nonzero_const(c) and isinstance(_const(c), int):
                    form = self.affine(x)
                    return None if form is None else {k: n * _const(c) for k, n in form.items()}
            return None
        if op.name in ("add", "sub", "tile.shift"):
            a, b = self.affine(xs[0]), self.affine(xs[1])
            if a is None or b is None or self._within(a) & self._within(b):  # a position met
                return None                             # twice: its lanes may not line up
            sign = -1 if op.name == "sub" else 1
            return self._bounded({**a, **{x: sign * c for x, c in b.items()}}, v)
        return None

    def _bounded(self, form: dict[tuple, int], v: Value) -> dict[tuple, int]:
        """`form`, or where the access's mask keeps `v` below a bound (`bound_lanes`: Liger's
        column tiles, `cols = t * B + td.arange(0, B)` masked to `cols < n`), `v` as one
        position over [0, bound): the positions' values map to distinct sums from 0 up (all
        coefficients positive, injective), and the mask drops those past the bound, so the
        last tile of a row does not reach the next row's first elements."""
        bound = self._sum_bounds.get(self.key(v))
        terms = [(c, self._extents[x]) for x, c in form.items()]
        if bound is None or not form or any(c <= 0 for c in form.values()) or \
                not _injective(terms):
            return form
        constant = self._constant_part(v)
        if constant is None:
            return form
        x = ("sum", id(v))
        self._extents[x] = max(1, min(bound - constant, sum(c * (e - 1) for c, e in terms) + 1))
        self._sources[x] = v
        self._parts[x] = self._within(form)
        return {x: 1}

    def _within(self, form: dict[tuple, int]) -> set[tuple]:
        """The positions of `form`, those of its bounded sums (`_bounded`) too."""
        out: set[tuple] = set()
        for x in form:
            out |= self._parts.get(x, {x})
        return out

    def _constant_part(self, v: Value) -> int | None:
        """The constant that `v` adds to its affine form, where `v` is positions times
        constants and constants, summed; None where it holds anything else (a runtime `k` in
        `k + t * B + lanes` could move the sum below 0)."""
        op = v.owner
        if op is None:
            return 0 if self.affine(v) else None
        if op.name in ("tile.index", "tile.begin", "tile.id"):
            return 0
        if op.name == "arange":
            return int(op.attrs["start"])
        if op.name == "const":
            return _const(v) if _int_const(v) else None
        if op.name in ("broadcast", "expand_dims", "reshape", "cast"):
            return self._constant_part(op.operands[0])
        if op.name == "mul":
            for x, c in (op.operands, op.operands[::-1]):
                if _int_const(c) and (part := self._constant_part(x)) is not None:
                    return part * _const(c)
            return None
        if op.name in ("add", "sub"):
            a, b = (self._constant_part(x) for x in op.operands)
            return None if a is None or b is None else a - b if op.name == "sub" else a + b
        return None

    def _counter_extent(self, v: Value) -> int:
        """A bound on a counted loop's counter, as a position's extent: its largest stop over
        the programs where they can be evaluated and no start is negative, else
        COUNTER_EXTENT (a term of it then cannot sit below a larger coefficient)."""
        start, stop = self.tr.counters[v]
        starts, stops = self._program_values(start), self._program_values(stop)
        if starts is None or stops is None or not stops.size or starts.min() < 0:
            return COUNTER_EXTENT
        return max(int(stops.max()), 1)

    def _induction(self, v: Value) -> dict[tuple, int] | None:
        """A value the loop steps by a constant `c` each trip, the counter by `s` (`off +=
        stride` beside `for row in range(start, end)`): `first + (c / s) * (counter - start)`,
        the counter's form times `c / s` where `first - (c / s) * start` is the same in every
        program (`off = start * stride`, Liger's pointer bumps)."""
        first, amount, counter, step, sign = self.tr.inductions[v]
        c = _cast_const(amount)
        if not isinstance(c, int) or isinstance(c, bool) or c % step:
            return None
        c *= sign
        k = c // step
        form = self.affine(counter)
        start = self.tr.counters[counter][0]
        if form is None or not self._offset_fixed(first, start, k):
            return None
        return {x: k * n for x, n in form.items()}

    def _offset_fixed(self, first: Value, start: Value, k: int) -> bool:
        """Whether `first - k * start` is the same in every program."""
        if not self.depends(first) and not self.depends(start):
            return True
        a, b = self._program_values(first), self._program_values(start)
        if a is None or b is None:
            return False
        rest = (a - k * b).ravel()
        return bool(np.all(rest == rest[0]))

    def _disjoint_windows(self, r: Value) -> bool:
        """Whether two programs never share an index of range `r`: a grid range, a loop range
        whose bounds are the same in every program (it depends on no grid dimension then), or
        one whose windows `[start, stop)` cannot meet (see the module's docstring)."""
        loop = self._loop_of(r)
        if r in self.tr.counters and self.depends(r):  # a counted loop's counter
            loop = None
        elif loop is None or not self.depends(r):
            return True
        numeric, self._numeric = self._numeric, False  # its positions must be independent
        try:
            if loop is None:
                return self._apart(*self.tr.counters[r])
            return self._windows_apart(loop, r)
        finally:
            self._numeric = numeric

    def _windows_apart(self, loop: Op, r: Value) -> bool:
        if (first := loop_first(loop)) is not None:  # tiles first, first + stride, ...
            form = self.affine(first)  # distinct firsts below the stride: disjoint tiles
            return bool(form) and _injective([(c, self._extents[p]) for p, c in form.items()]) \
                and sum(abs(c) * (self._extents[p] - 1) for p, c in form.items()) \
                < loop.attrs["stride"]
        start, stop = loop_start(loop), loop_stop(loop)
        if start is None or stop is None:  # windows from 0 (or to the extent) all meet
            return False
        return self._apart(start, stop)

    def _apart(self, start: Value, stop: Value) -> bool:
        """Whether the programs' windows `[start, stop)` cannot meet."""
        if self.loaded(start) and self.loaded(stop):  # a jagged segment: the offsets' contract
            return True
        if self._own_tile(start, stop):  # `td.tile(t.end, start=t.begin)` over a grid tile t
            return True
        if stop.owner is not None and stop.owner.name == "minimum":  # a window cut short, as
            return any(self._apart(start, s) for s in stop.owner.operands)  # min(s + c, n)
        (x, i), (y, j) = _offset(start), _offset(stop)
        if self.key(x) == self.key(y) and j > i:
            form = self.affine(x)
            if form and _injective([(c, self._extents[p]) for p, c in form.items()]):
                return j - i <= math.gcd(*form.values())  # the closest starts are that far apart
        starts, stops = self._program_values(start), self._program_values(stop)
        if starts is None or stops is None:
            return False
        # along the grid dimensions the bounds depend on (the others repeat each window)
        deps = self.depends(start) | self.depends(stop)
        one = tuple(slice(None) if a in deps else slice(0, 1) for a in self.axes)
        return _windows_disjoint(starts[one].ravel(), stops[one].ravel())  # Liger's rows

    def _own_tile(self, start: Value, stop: Value) -> bool:
        """Whether `[start, stop)` is `[t.begin, t.end)` of a tile `t` whose range separates
        programs (`t.end` is `t.begin + t.size`)."""
        first, end = start.owner, stop.owner
        if first is None or first.name != "tile.begin" or end is None or end.name != "add":
            return False
        r = first.operands[0]
        begin, size = end.operands
        return size.owner is not None and size.owner.name == "tile.size" and \
            size.owner.operands[0] is r and self.key(begin) == self.key(start) and \
            bool(self.separates(r))

    def never_meet(self, a: Value, b: Value) -> bool:
        """Whether indices `a` and `b` differ in every program and every pair of programs: one
        expression plus two constant offsets whose difference its coefficients' gcd does not
        divide (`2 * g` and `2 * g + 1`: c * (g1 - g2) = 1 has no integer solution)."""
        (x, i), (y, j) = _offset(a), _offset(b)
        if i == j or self.key(x) != self.key(y) or self.loaded(x):
            return False
        form = self.affine(x)
        if form is None:
            return False
        step = math.gcd(*form.values())  # 0: x is the same in every program
        return step == 0 or (j - i) % step != 0

    def _position(self, kind: str, r: Value) -> dict[tuple, int]:
        x = (kind, id(r))
        self._extents[x] = self._counter_extent(r) if kind == "counter" else r.type.extent  # type: ignore[union-attr]
        if x in self._guards:  # the programs past the guard's bound do not get here
            self._extents[x] = max(1, min(self._extents[x], self._guards[x]))
        self._sources[x] = r
        return {x: 1}

    def _guard(self, cond: Value, failed: bool = False) -> None:
        """Bounds an enclosing `if` keeps grid positions below: `if h < n_heads:` over
        `td.grid(..., grid_h)` (Liger's rope, whose grid covers the larger of two head
        counts), `and`ed conditions each; where the test failed (`failed`: the second branch,
        as after `if h >= n_heads: return`), its negation."""
        op = cond.owner
        if op is None:
            return
        if op.name == "not":  # an early exit's `if not (h >= n): <the rest>` (exits.py)
            self._guard(op.operands[0], not failed)
            return
        if op.name == ("or" if failed else "and"):
            for o in op.operands:
                self._guard(o, failed)
            return
        a, b = op.operands if len(op.operands) == 2 else (None, None)
        name = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}.get(op.name, "") if failed \
            else op.name
        if name in ("gt", "ge"):  # `c > h`: `h < c`
            a, b = b, a
            name = "lt" if name == "gt" else "le"
        if a is None or b is None or name not in ("lt", "le") or \
                not _int_const(b) or a.owner is None or \
                a.owner.name not in ("tile.begin", "tile.id") or a.owner.operands[0] not in self.axes:
            return
        x = (a.owner.name[5:], id(a.owner.operands[0]))
        bound = _const(b) + (name == "le")
        self._guards[x] = min(self._guards.get(x, bound), bound)

    # ---- program swizzles, evaluated per program ------------------------------------------
    def _by_program(self, v: Value) -> dict[tuple, int] | None:
        """Scalar `v` as a position of its own, its values the ones every program computes
        (`_program_values`), or None where they cannot be evaluated or one is negative."""
        values = self._program_values(v)
        if values is None or not values.size or values.min() < 0:
            return None
        x = ("computed", id(v))
        self._extents[x], self._sources[x] = int(values.max()) + 1, v
        self._computed[x] = values.ravel()
        return {x: 1}

    def _distinct(self, forms: list[dict[tuple, int]]) -> bool:
        """Whether two programs never get the same values of the positions in `forms` that
        depend on the program (each form injective over its positions, so two programs share
        an element only where they share all of them)."""
        mesh = self._mesh()
        if mesh is None:
            return False
        columns = []
        for x in dict.fromkeys(x for f in forms for x in f):
            source = self._sources[x]
            if x in self._computed:
                columns.append(self._computed[x])
            elif source in self.axes:
                columns.append(mesh[self.axes.index(source)].ravel())
            elif self.depends(source):  # a loop range whose bounds move with the program
                return False
        if not columns:
            return False
        rows = np.stack(columns, axis=1)
        return len(np.unique(rows, axis=0)) == len(rows)

    def _mesh(self) -> Any:
        """Each program's coordinate along each grid dimension (np.indices over the programs),
        where the blocks are fixed and there are at most 2**20 programs; else None."""
        if self._mesh_made is _UNSET:
            self._mesh_made = self._make_mesh()
        return self._mesh_made

    def _make_mesh(self) -> Any:
        counts = []
        for a in self.axes:
            block = self._block(a)
            if block is None:
                return None
            counts.append(-(-a.type.extent // block))  # type: ignore[union-attr]
        if math.prod(counts) > 1 << 20:
            return None
        return np.indices(counts)

    def _program_values(self, v: Value) -> Any:
        """The integer scalar `v` in every program, from the grid's positions, constants and
        `+ - * // %`, min and max; None where anything else feeds it."""
        if not self._evaluable(v):
            return None
        mesh = self._mesh()
        if mesh is None:
            return None
        memo: dict[int, Any] = {}

        def value(x: Value) -> Any:
            if id(x) in memo:
                return memo[id(x)]
            op = x.owner
            out = None
            t = x.type
            if op is not None and not op.regions and isinstance(t, TileType) and \
                    t.shape == () and t.dtype.is_int:
                out = _evaluate(op, [value(o) for o in op.operands], self, mesh)
            memo[id(x)] = out
            return out
        out = value(v)
        return None if out is None else np.broadcast_to(out, mesh.shape[1:])

    def _evaluable(self, v: Value) -> bool:
        """Whether `_program_values` can evaluate `v` (checked before it builds the mesh)."""
        todo, seen = [v], set()
        while todo:
            x = todo.pop()
            op = x.owner
            if id(x) in seen:
                continue
            seen.add(id(x))
            if op is None or op.regions or op.name not in _EVALUATED:
                return False
            if op.name in ("tile.begin", "tile.id"):
                if op.operands[0] not in self.axes:
                    return False
                continue
            todo.extend(op.operands)
        return True

    def bound_lanes(self, mask: Value) -> None:
        """Where a store's `mask` is `td.arange` lanes below constants, ANDed (a padded block:
        `td.arange(0, 4)[:, None] < 3`), only those lanes count for the store's positions."""
        op = mask.owner
        while op is not None and op.name in ("broadcast", "expand_dims", "reshape"):
            op = op.operands[0].owner
        if op is None:
            return
        if op.name == "and":
            for o in op.operands:
                self.bound_lanes(o)
            return
        if op.name in ("lt", "le"):
            lanes, limit = _splatted(op.operands[0]), _const(op.operands[1])
            lanes, offset = _offset(lanes)  # `off + td.arange(0, B) < n` (a column chunk)
            lanes = _splatted(lanes)
            if not isinstance(limit, int) or isinstance(limit, bool):
                return
            if lanes.owner is not None and lanes.owner.name == "arange":
                keep = limit - offset - lanes.owner.attrs["start"] + (op.name == "le")
                key = self.key(lanes)
                self._lane_bounds[key] = min(self._lane_bounds.get(key, keep), max(keep, 1))
                self._windows.clear()
                self._affines.clear()
            elif lanes.owner is not None and lanes.owner.name == "add":
                keep = limit - offset + (op.name == "le")  # `c * t + td.arange(0, B) < n`
                key = self.key(lanes)
                self._sum_bounds[key] = min(self._sum_bounds.get(key, keep), max(keep, 1))
                self._windows.clear()
                self._affines.clear()

    # ---- program windows --------------------------------------------------------------------
    def window(self, v: Value) -> tuple[tuple, int, int, int] | None:
        """`v` as `c * p + w` with `p` one grid dimension's position (a program's index or
        begin) and `w` in `[lo, hi]` in every program: (p, c, lo, hi); None where it is not
        one. Two accesses with the same `c * p` whose windows together span less than `|c|`
        never reach one element from two programs (Liger's rope: the first and the second
        half of each head, `pid * stride + offs` and `pid * stride + offs + hd // 2`)."""
        got = self._window(v)
        if got is None or len(got[0]) != 1:
            return None
        ((p, c),) = got[0].items()
        return (p, c, got[1], got[2]) if c else None

    def shared_window(self, a: Value, b: Value, other: Programs | None = None) -> frozenset:
        """The grid dimensions two accesses keep apart when both index one tensor dimension as
        `sum(c_i * p_i) + w` over the same positions `p_i` (grid positions, and counters of
        loops whose windows are apart), the windows `w` of both together spanning less than
        the gaps between the terms (injective with `w` as a term of its own): program P's
        elements are then its own positions' (Liger's group_norm backward, a row's column
        chunks at `b * C * H + c * H + off + td.arange(0, B)`, each masked to `< H`)."""
        wa, wb = self._window(a), (other or self)._window(b)  # (`other`: b's own lanes)
        if wa is None or wb is None or wa[0] != wb[0] or not wa[0]:
            return _NONE
        span = max(wa[2], wb[2]) - min(wa[1], wb[1]) + 1
        extents = [self._window_extent(p) for p in wa[0]]
        if any(e is None for e in extents) or not _injective(
                [(abs(c), e) for c, e in zip(wa[0].values(), extents)] + [(1, span)]):
            return _NONE
        axes = frozenset().union(*(self.depends(self._window_sources[p]) for p in wa[0])) - ANY
        if any(p[0] == "computed" for p in wa[0]) and \
                not self._distinct_windows(list(wa[0]), axes):
            return _NONE
        return axes

    def _computed_window(self, v: Value) -> tuple[dict[tuple, int], int, int] | None:
        """A scalar computed from the program's indices with `//`, `%`, min or max (Liger's
        rope rebuilds its row as `(pid // S) * S + pid % S`) as a position of its own, its
        values evaluated in every program (`_program_values`)."""
        values = self._program_values(v)
        if values is None or not values.size or values.min() < 0:
            return None
        x = ("computed", id(v))
        self._window_sources[x] = v
        self._computed[x] = values.ravel()
        self._extents[x] = int(values.max()) + 1
        return {x: 1}, 0, 0

    def _distinct_windows(self, positions: list[tuple], axes: frozenset) -> bool:
        """Whether programs that differ along `axes` get different values of `positions`
        (a computed position may repeat a value where a grid index would not)."""
        mesh = self._mesh()
        if mesh is None:
            return False
        first = np.ones(mesh.shape[1:], bool)  # one program along the other axes
        for i, a in enumerate(self.axes):
            if a not in axes:
                first &= mesh[i] == 0
        keep = first.ravel()
        columns = []
        for p in positions:
            source = self._window_sources[p]
            if p in self._computed:
                columns.append(self._computed[p][keep])
            elif source in self.axes:
                columns.append(mesh[self.axes.index(source)].ravel()[keep])
            else:
                return False
        rows = np.stack(columns, axis=1)
        return len(np.unique(rows, axis=0)) == len(rows)

    def _window_extent(self, p: tuple) -> int | None:
        v = self._window_sources[p]
        if p[0] == "computed":
            return self._extents[p]
        if p[0] == "counter":
            return self._counter_extent(v)
        t = v.type
        return t.extent if isinstance(t, RangeType) else None  # (begins and ids lie below)

    def _window(self, v: Value) -> tuple[dict[tuple, int], int, int] | None:
        key = id(v)
        if key not in self._windows:
            self._windows[key] = self._window_of(v)
        return self._windows[key]

    def _window_of(self, v: Value) -> tuple[dict[tuple, int], int, int] | None:
        op = v.owner
        if op is None:  # a counted loop's counter, where programs' windows are apart
            if v in self.tr.counters and self.depends(v) and self._disjoint_windows(v):
                self._window_sources[("counter", id(v))] = v
                return {("counter", id(v)): 1}, 0, 0
            return None
        xs = op.operands
        if op.name == "const":
            c = op.attrs["value"]
            return ({}, c, c) if isinstance(c, int) and not isinstance(c, bool) else None
        if op.name == "arange":  # its lanes (as a store's mask bounds them)
            (lanes,) = self._lanes(v)
            n = self._extents[lanes]
            return {}, op.attrs["start"], op.attrs["start"] + n - 1
        if op.name in ("tile.begin", "tile.id") and xs[0] in self.axes:
            self._window_sources[(op.name, id(xs[0]))] = xs[0]
            return {(op.name, id(xs[0])): 1}, 0, 0
        if op.name in ("broadcast", "expand_dims", "reshape") or \
                op.name == "cast" and _widens(xs[0], v):
            return self._window(xs[0])
        if op.name in ("floordiv", "mod", "minimum", "maximum") and _scalar(v):
            return self._computed_window(v)
        if op.name not in ("add", "sub", "mul") or len(xs) != 2:
            return None
        parts = []
        for x in xs:
            if (part := self._window(x)) is None:
                return None
            parts.append(part)
        if op.name in ("add", "sub"):
            (fa, la, ha), (fb, lb, hb) = parts  # type: ignore[misc]
            sign = 1 if op.name == "add" else -1
            form = dict(fa)
            for k, c in fb.items():
                form[k] = form.get(k, 0) + sign * c
            return ({k: c for k, c in form.items() if c}, la + (lb if sign > 0 else -hb),
                    ha + (hb if sign > 0 else -lb))
        if op.name == "mul":
            for (f, lo, hi), (g, k, k2) in (parts, parts[::-1]):  # type: ignore[misc]
                if not g and k == k2:  # times a constant
                    ends = sorted((lo * k, hi * k))
                    return {p: c * k for p, c in f.items() if c * k}, ends[0], ends[1]
        return None

    def _lanes(self, v: Value) -> dict[tuple, int]:
        """`td.arange`'s lanes as a position over its length: a power of two, or a block size
        (the config's value where the host code read it, else the largest it may take)."""
        x = ("arange", id(v))
        d = v.type.shape[0]  # type: ignore[union-attr]
        n = self._fixed_dim(d)
        self._extents[x] = n if n is not None else max(symbol_choices(self.tr.symbols[d]))
        bound = self._lane_bounds.get(self.key(v))
        if bound is not None:  # the store's mask keeps fewer lanes
            self._extents[x] = min(self._extents[x], bound)
        self._sources[x] = v
        return {x: 1}

    def _invariant(self, v: Value) -> bool:
        """Whether `v` is the same in every program and every loop iteration of the grid."""
        hit = self._fixed.get(id(v))
        if hit is None:
            op = v.owner
            self._fixed[id(v)] = False
            hit = not self._carried(v) if op is None else \
                not op.regions and all(self._invariant(o) for o in op.operands)
            self._fixed[id(v)] = hit
        return hit

    def loaded(self, v: Value) -> bool:
        """Whether `v` is computed from values read from memory (a scatter's index tile), or
        is a value a loop steps from such a value that tells the programs apart (mamba's
        varlen `out_ptr = out + bos * D`, then `out_ptr += D` each trip: the loaded offsets
        are the user's contract)."""
        hit = self._loaded.get(id(v))
        if hit is None:
            op = v.owner
            self._loaded[id(v)] = False
            if v in self.tr.inductions:  # (a start the programs share gives them none)
                first = self.tr.inductions[v][0]
                hit = self.loaded(first) and self.depends(v) <= self.depends(first)
            else:
                hit = op is not None and not op.regions and (
                    op.name in _TRUSTED or any(self.loaded(o) for o in op.operands))
            self._loaded[id(v)] = hit
        return hit

    def from_memory(self, values: list[Value | None]) -> bool:
        """Whether any of `values` is computed from a value read from memory: through ops,
        the branches of an `if`, a loop's runtime bounds (moe_align_block_size's `for i in
        range(tl.load(cumsum + pid), ...)`) and a loop's first value of what it steps."""
        todo, seen = [v for v in values if v is not None], set()
        while todo:
            v = todo.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            op = v.owner
            if op is not None and op.name in _TRUSTED:
                return True
            if op is not None:
                todo.extend(op.operands)
                if op.name == "if":
                    k = op.results.index(v)
                    todo.extend(r.ops[-1].operands[k] for r in op.regions
                                if r.ops and r.ops[-1].name == "yield")
                continue
            loop = next((self.owners.get(id(b)) for b in self.tr.blocks[1:] if v in b.args),
                        None)  # (a range or a carried value: the loop's bounds and inits)
            todo.extend(loop.operands if loop is not None else ())
            if v in self.tr.inductions:
                todo.append(self.tr.inductions[v][0])
        return False

    def _divides_block(self, x: Value, d: Value) -> bool:
        """Whether `x // d` keeps `x` injective: x is a tile's begin (a multiple of its block)
        and d its block size, or a constant that divides it."""
        if x.owner is None or x.owner.name != "tile.begin":
            return False
        r = x.owner.operands[0]
        if d.owner is not None and d.owner.name == "tile.block_size":
            return d.owner.operands[0] is r
        c = _const(d)
        block = self._block(r)
        return c == 1 or (c is not None and c > 0 and block is not None and block % c == 0)

    def _block(self, r: Value) -> int | None:
        """The range's block size in this trace, where it is fixed: an int, or a registered
        block size the host code read (the kernel is then traced per value)."""
        return self._fixed_dim(r.type.block)  # type: ignore[union-attr]

    def _fixed_dim(self, d: Any) -> int | None:
        """A tile dimension's size in this trace, where it is fixed: an int, or a registered
        block size the host code read (the kernel is then traced per value)."""
        if isinstance(d, int):
            return d
        if d in self.tr.symbols:
            name = f"block_sizes[{block_index(self.tr.symbols)[d]}]"
            knob = self.tr.tunables.get(name)  # read: this trace is its value's (the default's)
            value = self.tr.knobs.get(name, None if knob is None else knob.initial)
            return int(value) if isinstance(value, int) else None
        return None

    # ---- structural keys ----------------------------------------------------------------
    def key(self, v: Value) -> tuple:
        """What `v` computes, by structure: equal keys index the same elements in one program."""
        hit = self._keys.get(id(v))
        if hit is None:
            hit = self._keys[id(v)] = self._key(v)
        return hit

    def position_key(self, v: Value) -> tuple:
        """`key(v)`, but the `.begin` of a tile of block size 1 (a `td.grid` index) keys as its
        tile: both name the one element of the range the program (or iteration) is at."""
        op = v.owner
        if op is not None and op.name == "tile.begin":
            r = op.operands[0]
            if isinstance(r.type, RangeType) and not r.type.shifted and self._block(r) == 1:
                return self.key(r)
        return self.key(v)

    def _key(self, v: Value) -> tuple:
        op = v.owner
        if op is None or op.regions or op.name == "atomic" or len(op.results) != 1:
            return ("value", id(v))
        if op.name == "const":
            return ("const", op.attrs["value"])
        if op.name == "load":  # the same access reads the same values in one program
            from tiledsl.ir.views import root
            return self._node(("load", id(root(op.operands[0])), _attrs(op.attrs),
                               tuple(self.key(o) for o in op.operands[1:])))
        if op.name == "arange":  # its length is in its type
            return ("arange", _attrs(op.attrs), str(v.type))
        return self._node((op.name, _attrs(op.attrs), tuple(self.key(o) for o in op.operands)))

    def _node(self, structure: tuple) -> tuple:
        """A computed value's key: one number per structure (whose operands are keys of their
        own), so a key hashes in constant time however deep its expression (a sort network's
        index is a DAG that a nested tuple would unfold into a tree)."""
        return ("node", self._nodes.setdefault(structure, len(self._nodes)))


_EVALUATED = ("const", "tile.begin", "tile.id", "cast", "broadcast", "expand_dims", "reshape",
              "neg", "add", "sub", "mul", "floordiv", "mod", "minimum", "maximum")
_NUMPY_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide,
              "mod": np.mod, "minimum": np.minimum, "maximum": np.maximum}


def _evaluate(op: Op, args: list[Any], progs: Programs, mesh: Any) -> Any:
    """One op of `Programs._program_values` over every program (int64 arrays)."""
    if op.name == "const":
        value = op.attrs["value"]
        return np.int64(value) if isinstance(value, int) and not isinstance(value, bool) else None
    if op.name in ("tile.begin", "tile.id") and op.operands[0] in progs.axes:
        r = op.operands[0]
        block = progs._block(r)
        coords = mesh[progs.axes.index(r)].astype(np.int64)
        return coords if op.name == "tile.id" or block is None else coords * block
    if any(a is None for a in args):
        return None
    if op.name in ("cast", "broadcast", "expand_dims", "reshape") and len(args) == 1:
        return args[0]
    if op.name == "neg":
        return -args[0]
    if op.name in _NUMPY_OPS and len(args) == 2:
        if op.name in ("floordiv", "mod") and np.any(np.asarray(args[1]) == 0):
            return None
        return _NUMPY_OPS[op.name](*args)
    return None


def _windows_disjoint(starts: Any, stops: Any) -> bool:
    """Whether the windows `[starts[p], stops[p])` of the programs that have any are disjoint:
    `[p * R, min((p + 1) * R, n))`."""
    kept = stops > starts
    lo, hi = starts[kept], stops[kept]
    order = np.argsort(lo, kind="stable")
    return bool(np.all(hi[order][:-1] <= lo[order][1:]))


def _injective(terms: list[tuple[int, int]]) -> bool:
    """Whether sum(c * x) over x in [0, e) for each (c, e) is injective: with the |c| sorted,
    each exceeds the span of the smaller terms (a mixed radix, gaps allowed)."""
    span = 0
    for c, e in sorted((abs(c), e) for c, e in terms if e > 1 and c):
        if c <= span:
            return False
        span += c * (e - 1)
    return True


def _offset(v: Value) -> tuple[Value, int]:
    """`v` as an expression plus a constant int (`2 * g + 1` -> (2 * g, 1))."""
    total = 0
    while v.owner is not None and v.owner.name in ("add", "sub", "tile.shift"):
        name, (a, b) = v.owner.name, v.owner.operands
        if _int_const(b):
            total, v = total + (-_const(b) if name == "sub" else _const(b)), a
        elif _int_const(a) and name != "sub":
            total, v = total + _const(a), b
        else:
            break
    return v, total


def _int_const(v: Value) -> bool:
    c = _const(v)
    return isinstance(c, int) and not isinstance(c, bool)


def _programs_vary(r: Value) -> bool:
    """Whether more than one program may run along this grid dimension under some config."""
    t = r.type
    assert isinstance(t, RangeType)
    return t.extent > 1 and not (isinstance(t.block, int) and t.block >= t.extent)


def _splatted(v: Value) -> Value:
    """The value a broadcast (or a dimension of 1 added) repeats over its lanes, else `v`."""
    while v.owner is not None and v.owner.name in ("broadcast", "expand_dims", "reshape") and \
            len(v.owner.operands) == 1:
        v = v.owner.operands[0]
    return v


def _const(v: Value) -> Any:
    v = _splatted(v)
    while v.owner is not None and v.owner.name == "cast" and _widens(v.owner.operands[0], v):
        v = _splatted(v.owner.operands[0])  # an int constant widened (after `pid.to(int64)`)
    op = v.owner
    return op.attrs["value"] if op is not None and op.name == "const" else None


def _cast_const(v: Value) -> Any:
    """An int constant through any casts whose types hold it (`off += 5` on an int32 offset
    casts the weak 5), else `_const`."""
    c = _const(v)
    if c is not None:
        return c
    x = v
    while x.owner is not None and x.owner.name == "cast":
        x = x.owner.operands[0]
    c = _const(x)
    t = v.type
    if not isinstance(c, int) or isinstance(c, bool) or not isinstance(t, TileType) or \
            not t.dtype.is_int:
        return None
    info = np.iinfo(np.dtype(t.dtype.name))
    return c if info.min <= c <= info.max else None


def _widens(a: Value, b: Value) -> bool:
    """Whether integer `b` is `a` cast to a type that holds every value of `a`'s."""
    ta, tb = a.type, b.type
    return isinstance(ta, TileType) and isinstance(tb, TileType) and ta.dtype.is_int and \
        tb.dtype.is_int and dtypes.promote(ta.dtype, tb.dtype) == tb.dtype


def _scalar(v: Value) -> bool:
    return getattr(v.type, "shape", None) == ()


def _nonzero_const(v: Value) -> bool:
    c = _const(v)
    return isinstance(c, (int, float)) and not isinstance(c, bool) and c != 0


def _attrs(attrs: dict) -> str:
    return repr(sorted(attrs.items()))
