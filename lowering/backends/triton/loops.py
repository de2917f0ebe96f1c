"""How the Triton emitter writes a tile loop (`for` ops): carried values, the trip count of a
loop with a runtime stop and start, and the split of a loop at the diagonal of a mask
(`split.py`). A mixin of `emit.KernelEmitter`, which holds the state it uses."""

from __future__ import annotations

from typing import Any

from lowering.backends.triton.params import KernelParam
from lowering.backends.triton.persistent import strided_loop
from lowering.backends.triton.registers import MAX_REGISTERS, registers
from lowering.backends.triton.split import dead_without, prefix_true
from tiledsl.ir.bounds import divisor, interval
from tiledsl.ir.core import Block, Op, Value, loop_carried, loop_inits, loop_start, loop_stop, walk
from tiledsl.ir.slices import slices_of
from tiledsl.ir.types import UNBOUNDED, RangeType, TensorType


class LoopEmission:
    """`loop` and what it needs; the attributes come from `KernelEmitter`."""

    blocks: dict[str, int]
    carried_names: dict[Value, str]
    names: dict[Value, str]
    preset: dict[Value, str]
    ranges: dict[Value, Any]
    uses: dict[Value, list[Op]]
    true_wheres: dict[Op, Value]
    skipped: set[Op]
    pointers: dict[Op, str]
    stride_params: dict[tuple[str, int], KernelParam]  # by (label, stride)

    def bind_carried(self, op: Op, indent: int) -> list[str]:
        """Name a loop's carried values (its initial value under the carried name, the region's
        argument and the result alike), make the body write them in place; their names."""
        carried = []
        for init, arg, res in zip(loop_inits(op), loop_carried(op), op.results):
            name = self.carried_names[res]
            if self.full_value(init) != name:
                self.emit(indent, f"{name} = {self.full_value(init)}")
            self.names[arg] = self.names[res] = name
            carried.append(name)
        self.write_in_place(op.regions[0], carried)
        return carried

    def loop(self, op: Op, indent: int) -> None:
        if op.attrs.get("stride"):  # td.tile(m, n)[p::P]
            strided_loop(self, op, indent)  # type: ignore[arg-type]
            return
        region = op.regions[0]
        r = region.args[0]
        rt = r.type
        assert isinstance(rt, RangeType)
        carried = self.bind_carried(op, indent)
        block = rt.block if isinstance(rt.block, int) else self.blocks[rt.block]
        label_block = self.block_expr(rt.block, r.hint) if isinstance(rt.block, str) else str(block)
        stop = loop_stop(op)
        limit, cuts = str(rt.extent), rt.extent % block != 0
        trips = str(-(-rt.extent // block))
        if stop is not None:  # each program stops at its own runtime stop
            limit = self.value(stop)
            if clamped_stop(op):  # a stop that may pass the extent (a loaded length, an argument)
                limit = self.namer.fresh(f"stop_{r.hint or 'k'}")
                self.emit(indent, f"{limit} = tl.minimum({self.value(stop)}, {rt.extent})")
            cuts = divisor(stop, self.block_of) % block != 0 or \
                (clamped_stop(op) and rt.extent % block != 0)
            trips = f"tl.cdiv({limit}, {label_block})"
        start = "0"
        lower = None
        if (first := loop_start(op)) is not None:  # the tiles that meet [start, stop)
            lower = self.namer.fresh(f"start_{r.hint or 'k'}")
            self.emit(indent, f"{lower} = tl.maximum({self.value(first)}, 0)")
            start = self.namer.fresh(f"first_{r.hint or 'k'}")
            self.emit(indent, f"{start} = {lower} // {label_block}")
            trips = f"tl.where({lower} < {limit}, {trips}, {start})"  # none if start >= stop
            cuts = cuts or divisor(first, self.block_of) % block != 0
            self.loop_body(region, r, carried, (start, trips), label_block, indent,
                           limit, cuts, {}, lower)
            return
        wheres = prefix_true(region, r, set(self.ranges))
        hoisted: dict[Op, tuple[str, str]] = {}  # pointer tiles both `for`s of a split load
        if wheres:  # full tiles before the other ranges begin: no select, no masks (split.py)
            start = self.namer.fresh(f"split_{r.hint or 'k'}")
            bounds = [f"begin_{self.ranges[o].name} // {label_block}" for o in
                      dict.fromkeys(wheres.values())] + [f"{limit} // {label_block}"]
            self.emit(indent, f"{start} = " + _nested_min(bounds))
            self.loop_body(region, r, carried, ("0", start), label_block, indent,
                           None if stop is None else limit, False, wheres, hoisted=hoisted)
            if carries_mma(region):
                trips = self.opaque_trips(r, stop is None, limit, label_block, rt.extent)
        self.loop_body(region, r, carried, (start, trips), label_block, indent,
                       None if stop is None else limit, cuts, {}, hoisted=hoisted)

    def loop_body(self, region: Block, r: Value, carried: list[str], iters: tuple[str, str],
                  label_block: str, indent: int, stop: str | None, cuts: bool,
                  true_wheres: dict[Op, Value], start: str | None = None,
                  hoisted: dict[Op, tuple[str, str]] | None = None) -> None:
        """One `for` statement over `range(*iters)` running the loop's body; the `true_wheres`
        select their first operand, and the ops that only compute their conditions are left
        out. `hoisted` holds pointer tiles already computed for this loop (a split's first
        `for`), and gets those this one computes."""
        outer = self.true_wheres, self.skipped, dict(self.pointers)
        self.true_wheres = true_wheres
        self.skipped = dead_without(region, true_wheres, self.uses) if true_wheres else set()
        hoisted = {} if hoisted is None else hoisted
        hoisted.update(self.hoist_pointers(region, r, indent, hoisted))
        steps = self.carry_pointers(region, r, iters[0], label_block, indent, stop, cuts, start,
                                    hoisted)
        it = self.namer.fresh(f"{r.hint or 'k'}_iter")
        self.emit(indent, f"for {it} in range({iters[0]}, {iters[1]}):")
        self.open_range(r, f"{it} * {label_block}", indent + 1, [], stop, cuts, start)
        begin = f"begin_{self.ranges[r].name}"
        for op, (name, stride) in hoisted.items():
            self.pointers[op] = f"{name} + {begin}" + (f" * {stride}" if stride != "1" else "")
        try:
            self.block(region, indent + 1)
            for name, step in steps:
                self.emit(indent + 1, f"{name} += {step}")
        finally:
            self.true_wheres, self.skipped, self.pointers = outer
        changes = [(c, self.full_value(v)) for c, v in zip(carried, region.ops[-1].operands)
                   if self.value(v) != c]
        if changes:  # one simultaneous assignment, so carried values can swap
            self.emit(indent + 1, ", ".join(c for c, _ in changes) + " = "
                      + ", ".join(v for _, v in changes))

    def hoist_pointers(self, region: Block, r: Value, indent: int,
                       done: dict[Op, tuple[str, str]]) -> dict[Op, tuple[str, str]]:
        """Pointer tiles computed once before the loop, as hand-written kernels do: for the
        advanced loads with `aligned_rows` (but those in `done`), their pointers at the loop's
        tile 0; each trip loads from `x_ptrs + begin * stride` (Triton's attention tutorial:
        `k_ptrs + start_n * stride_kn`). A stride other than 1 is a runtime argument
        (`stride_tk`, which the launcher passes), one per loop label and value: with a literal
        stride LLVM rewrites every row's address from one base pointer with 64-bit adds (two
        SASS instructions per row per trip; so it did with carried pointer tiles), while
        `k_ptrs + begin * stride_tk` is one IMAD.WIDE per row, with one offset the loads
        share. Triton 3.6, sm_90: causal attention's key loop at 128x64, d64, 4 warps went from
        501 to 494 SASS instructions, the 128x256x64 GEMM's K loop from 94 to 86 (the
        hand-written kernels': 489 and 90). Not in a kernel estimated to spill (`spills`).
        Returns (pointer name, stride expression) per load."""
        loads = [op for op in self.advanced_loads(region, r) if op not in done
                 and self.aligned_rows(op)]
        if not loads or self.spills():
            return {}
        self.open_range(r, "0", indent, [], cuts=False)
        hoisted = {}
        for op in loads:
            rank = op.result.type.rank  # type: ignore[union-attr]
            ptr, _ = self.address(op, op.operands[0], op.operands[1:], rank, indent,
                                  group_tiles=self.same_offsets(op, loads))
            name = self.namer.fresh(f"{op.operands[0].hint or 'x'}_ptrs")
            self.emit(indent, f"{name} = {ptr}")
            stride = self.stride_of(op, r)
            assert stride is not None
            hoisted[op] = (name, "1" if stride == 1 else self.stride_param(r.hint or "k", stride))
        return hoisted

    def same_offsets(self, op: Op, loads: list[Op]) -> bool:
        """Whether another of `loads` reads a tensor of the same shape and strides at the same
        indices (attention's `k[b, tk, :]` and `v[b, tk, :]`): their pointer tiles then share
        one integer offset tile (emit.py `tile_pointer`). Triton 3.9, sm_90, where no load
        shares its offsets: batched_matmul at 64x512x64, 8 warps went from 76 to 91 SASS
        instructions per K trip and from 194 to 251 registers when grouped."""
        t = op.operands[0]
        where = (op.operands[1:], op.attrs.get("full"), slices_of(op.attrs))
        return any(o is not op and (o.operands[1:], o.attrs.get("full"), slices_of(o.attrs))
                   == where and o.operands[0].type == t.type and
                   self.strides[o.operands[0]] == self.strides[t] for o in loads)

    def spills(self) -> bool:
        """Whether the kernel is estimated to need more than the 255 registers a thread has
        (registers.py). There the pointer tiles stay carried (`carry_pointers`): hoisted ones
        live across both `for`s of a split loop, with each trip's offset beside them, and add
        to the spills. Triton 3.6, sm_90: causal attention at d = 128, 128x64, 4 warps
        (estimated 338) spilled 248 bytes with hoisted pointers, 654 SASS instructions per key
        tile, and 208 bytes, 624 instructions carried (the hand-written kernel: 288, 650)."""
        warps, stages = int(self.config.num_warps or 4), int(self.config.num_stages or 3)
        return registers(self.fn, self.blocks, warps, bool(self.config.get("tma", False)),
                         stages) > MAX_REGISTERS

    def advanced_loads(self, region: Block, r: Value) -> list[Op]:
        """Loads of the body indexed by the loop's tile once and otherwise by values from
        outside the loop, whose 32-bit addresses a loop can advance (not with TMA)."""
        if self.config.get("tma", False):
            return []
        inside = {v for op in walk(region) for v in op.results} | set(region.args[1:])
        return [op for op in region.ops if op.name == "load" and op not in self.skipped
                and op.operands[1:].count(r) == 1 and not inside & set(op.operands)
                and self.stride_of(op, r) is not None]

    def aligned_rows(self, op: Op) -> bool:
        """Whether every stride of load `op`'s tensor but the unit one spans a multiple of 16
        bytes: its rows are then loaded in 16-byte vectors, a few pointers per thread, which
        `hoist_pointers` keeps in registers. Other layouts (attention with d = 36 in fp16: 72
        bytes a row) load element by element, with a pointer per element: those loops carry
        their pointer tiles (`carry_pointers`), which LLVM derives from one base."""
        t = op.operands[0].type
        assert isinstance(t, TensorType)
        return all(s * t.dtype.bits % 128 == 0 for s in self.strides[op.operands[0]]
                   if abs(s) != 1)

    def carry_pointers(self, region: Block, r: Value, first: str, label_block: str,
                       indent: int, stop: str | None, cuts: bool, start: str | None,
                       hoisted: dict[Op, tuple[str, str]]) -> list[tuple[str, str]]:
        """Pointer tiles the loop advances instead of recomputing them (as Triton's matmul
        tutorial does: `a_ptrs += BLOCK_K * stride`) for the advanced loads not `hoisted`.
        Their addresses at the first trip are computed before the `for`; each trip adds one
        block. Returns (pointer name, step) pairs; `pointers` maps each load to its name."""
        loads = [op for op in self.advanced_loads(region, r) if op not in hoisted]
        if not loads:
            return []
        self.open_range(r, f"{first} * {label_block}", indent, [], stop, cuts, start)
        steps = []
        for op in loads:
            rank = op.result.type.rank  # type: ignore[union-attr]
            ptr, _ = self.address(op, op.operands[0], op.operands[1:], rank, indent)
            name = self.namer.fresh(f"{op.operands[0].hint or 'x'}_ptrs")
            self.emit(indent, f"{name} = {ptr}")
            self.pointers[op] = name
            stride = self.stride_of(op, r)
            steps.append((name, label_block if stride == 1 else f"{label_block} * {stride}"))
        return steps

    def opaque_trips(self, r: Value, whole: bool, limit: str, label_block: str,
                     extent: int) -> str:
        """The trip count of a split loop's second `for`, through the range's extent passed at
        runtime (`extent_tk`, a `stride` parameter): `tl.cdiv(tl.minimum(stop, extent_tk),
        block)`, equal to the literal count, since every stop is within the extent. With
        literal shapes LLVM proves that the second `for` runs at least once and drops its
        guard; GVN then moves a shared-memory address the second `for` reads into the first
        `for`'s zero-trip edge, whose block also holds the accumulator's initial values. Those
        definitions reach the `wgmma.wait_group` after the first `for` without dominating its
        MMAs, and ptxas 13 (triton 3.9) then serializes every wgmma of the kernel (C7515,
        "non wgmma instructions defining accumulator registers ... between start and end of
        the pipeline stage"): causal attention at 128x64, d64, 8 warps had 8 waits per key
        tile (309 SASS instructions against the hand-written kernel's 293 and 1 wait). Triton
        3.6's ptxas pipelines either way (275 instructions)."""
        extent_param = self.stride_param(r.hint or "k", extent, "extent")
        stop = extent_param if whole else f"tl.minimum({limit}, {extent_param})"
        return f"tl.cdiv({stop}, {label_block})"

    def stride_param(self, label: str, stride: int, what: str = "stride") -> str:
        """The name of the runtime i32 argument holding `stride` (or another constant: `what`
        names it) for loops over `label`."""
        key = (f"{what}_{label}", stride)
        if key not in self.stride_params:
            name = self.namer.fresh(f"{what}_{label}")
            self.stride_params[key] = KernelParam(name, "stride", value=stride, dtype="i32")
        return self.stride_params[key].name

    def write_in_place(self, region: Block, carried: list[str]) -> None:
        """Name a yielded value after its carried variable (`acc = tl.dot(a, b, acc)`) when it is
        made in this body, used only by the yield, and after the last read of the old value."""
        position = {op: i for i, op in enumerate(region.ops)}
        yielded = region.ops[-1].operands
        for arg, v, name in zip(region.args[len(region.args) - len(carried):], yielded, carried):
            owner = v.owner
            if owner not in position or len(self.uses.get(v, [])) != 1 or v in self.preset:
                continue
            reads = [position.get(_top(u, region), -1) for u in self.uses.get(arg, [])]
            if all(0 <= i <= position[owner] for i in reads):
                self.preset[v] = name


def carries_mma(region: Block) -> bool:
    """Whether a loop's body accumulates a `dot` into a carried value (an MMA accumulator)."""
    yielded = set(region.ops[-1].operands)
    return any(op.name == "dot" and op.result in yielded for op in walk(region)) or any(
        op.name == "add" and op.result in yielded and
        any(o.owner is not None and o.owner.name == "dot" for o in op.operands)
        for op in region.ops)


def _nested_min(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else f"tl.minimum({exprs[0]}, {_nested_min(exprs[1:])})"


def clamped_stop(loop: Op) -> bool:
    """Whether a `td.tile(n, stop=s)` loop's stop may pass n (then the code clips it to n)."""
    stop = loop_stop(loop)
    rt = loop.regions[0].args[0].type
    assert stop is not None and isinstance(rt, RangeType)
    if rt.extent == UNBOUNDED and stop.type.dtype.bits <= 32:  # type: ignore[union-attr]
        return False  # an int32 stop cannot pass the int32 bound
    bound = interval(stop)
    return bound is None or bound[1] > rt.extent


def _top(op: Op, region: Block) -> Op | None:
    """The op of `region` that contains `op` (itself, or an op whose region holds it)."""
    for candidate in region.ops:
        if candidate is op or any(op in list(walk(r)) for r in candidate.regions):
            return candidate
    return None
