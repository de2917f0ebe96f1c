"""`td.inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack)`: Triton's
`tl.inline_asm_elementwise` and Helion's `hl.inline_asm_elementwise` (mamba3's
`tanh.approx.f32`, `sin.approx.f32` and `cos.approx.f32`, flash-linear-attention's softplus).

The arguments broadcast to one shape; each output is a tile of that shape of its dtype (a
tuple of them where `dtype` is a sequence). The generated Triton passes the assembly to the GPU
as written. The NumPy backend and Triton's interpreter run the scalar PTX such kernels write
(lowering/backends/numpy/ptx.py), so a kernel's CPU results are the assembly's.

Registers are passed as Triton passes them: one instance of the assembly takes `pack` elements
of each operand; an element of 32 bits or more is a register of its own, narrower ones are
packed, min(32 // bits, pack) to a register. `$0...` are the outputs' registers, then each
input's. The constraints must name that many (`"=f,f"` for one float32 in and out, pack 1):
a count that does not fit is an error at the kernel's line, not LLVM's.
"""

from __future__ import annotations

from typing import Any, Sequence

from tiledsl import dtypes
from tiledsl.dtypes import DType
from tiledsl.errors import DTypeError, TraceError
from tiledsl.frontend.tracer import Tracer, current
from tiledsl.frontend.values import (
    TileValue, as_dtype, broadcast_shapes, broadcast_to, cast, to_value,
)


def register_count(bits: int, pack: int) -> int:
    """The registers an operand of `bits`-wide elements takes per instance of the assembly."""
    per = min(max(32 // bits, 1), pack)
    return -(-pack // per)


def inline_asm_elementwise(asm: Any, constraints: Any, args: Sequence[Any], dtype: Any,
                           is_pure: Any = True, pack: Any = 1) -> Any:
    """The outputs of `asm` over the elements of `args` (see the module's docstring)."""
    tr = current("td.inline_asm_elementwise()")
    asm, constraints, is_pure, pack = (getattr(v, "value", v)  # (tl.constexpr)
                                       for v in (asm, constraints, is_pure, pack))
    if not isinstance(asm, str) or not isinstance(constraints, str):
        tr.fail(TraceError, "td.inline_asm_elementwise(): asm and constraints are strings")
    if isinstance(pack, bool) or not isinstance(pack, int) or pack < 1:
        tr.fail(TraceError, f"td.inline_asm_elementwise(): pack is a positive int, got {pack!r}")
    several = isinstance(dtype, (tuple, list))
    outs = [as_dtype(d, "td.inline_asm_elementwise() dtype") for d in
            (dtype if several else [dtype])]
    if not outs:
        tr.fail(TraceError, "td.inline_asm_elementwise() returns at least one tile",
                hint="return a dummy one, as Triton asks")
    values = [_operand(a) for a in args]
    shape = broadcast_shapes(tr, [v.shape for v in values]) if values else ()
    values = [broadcast_to(v, shape) for v in values]
    _check_constraints(tr, constraints, outs, [v.dtype for v in values], pack)
    results = tr.emit("inline_asm", [v.value for v in values],
                      {"asm": asm, "constraints": constraints, "pack": pack,
                       "is_pure": bool(is_pure), "dtypes": tuple(d.short for d in outs)},
                      hint="asm")
    tiles = tuple(TileValue(r) for r in results)
    return tiles if several else tiles[0]


def _operand(a: Any) -> TileValue:
    """An argument as Triton takes it: a Python int is an int32, a float a float32."""
    v = to_value(a)
    if v.weak and v.dtype == dtypes.float64:
        return cast(v, dtypes.float32)
    return v


def _check_constraints(tr: Tracer, constraints: str, outs: list[DType], ins: list[DType],
                       pack: int) -> None:
    entries = [c.strip() for c in constraints.split(",") if c.strip()]
    entries = [c for c in entries if not c.startswith("~")]  # clobbers
    wanted = [sum(register_count(d.bits, pack) for d in outs),
              sum(register_count(d.bits, pack) for d in ins)]
    got = [sum(c.startswith("=") for c in entries), sum(not c.startswith("=") for c in entries)]
    if got != wanted:
        tr.fail(DTypeError, f"td.inline_asm_elementwise(): the constraints {constraints!r} name "
                f"{got[0]} output and {got[1]} input registers; with pack={pack} the outputs "
                f"({', '.join(d.name for d in outs)}) take {wanted[0]} and the inputs "
                f"({', '.join(d.name for d in ins) or 'none'}) {wanted[1]}",
                hint="an element of 32 bits or more is a register of its own; narrower ones "
                     "are packed, min(32 // bits, pack) to a register")
