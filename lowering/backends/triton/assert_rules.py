"""Triton rule of `assert` (tiledsl/lang/asserts.py): `tl.device_assert`, which Triton checks
only in kernels compiled with TRITON_DEBUG=1 (elsewhere it costs nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowering.backends.triton.oprules import emit_rule
from tiledsl.ir.core import Op

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter


@emit_rule("assert")
def _assert(em: KernelEmitter, op: Op, args: list[str], indent: int) -> None:
    em.emit(indent, f"tl.device_assert({args[0]}, {op.attrs['msg']!r})")
