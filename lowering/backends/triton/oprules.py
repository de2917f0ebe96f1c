"""The Triton backend's rule table: how each op of the tile IR is written as Triton.

A rule gets the kernel emitter, the op, its operands' expressions and the indent, and writes
the op's statement (`em.assign`) or names its value (`em.alias`). Rules are registered by
decorator next to the ops they belong with (shape_rules.py, ...); `KernelEmitter.op` looks an
op up here before its built-in cases (memory, loops and elementwise math, which share the
emitter's state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from tiledsl.ir.core import Op

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter

EmitRule = Callable[["KernelEmitter", Op, list[str], int], None]
EMIT_RULES: dict[str, EmitRule] = {}
# Rules run for the ops of a block before any of them is written, for an op whose rule writes
# the values before it differently (skips them: `KernelEmitter.skipped`).
PrepareRule = Callable[["KernelEmitter", Op], None]
PREPARE_RULES: dict[str, PrepareRule] = {}


def emit_rule(*names: str) -> Callable[[EmitRule], EmitRule]:
    """Register `fn` as the Triton rule of the ops `names`."""
    def register(fn: EmitRule) -> EmitRule:
        for name in names:
            EMIT_RULES[name] = fn
        return fn
    return register


def prepare_rule(*names: str) -> Callable[[PrepareRule], PrepareRule]:
    """Register `fn` to run for the ops `names` before their block is written."""
    def register(fn: PrepareRule) -> PrepareRule:
        for name in names:
            PREPARE_RULES[name] = fn
        return fn
    return register
