"""Generated code that steers around bugs of the Triton releases tiledsl supports.

Each workaround names the bug, the releases it was seen in, and what it costs.
"""

from __future__ import annotations

from functools import cache

from tiledsl.ir.core import Function, Op, Value, walk


@cache
def triton_version() -> tuple[int, int]:
    import triton
    major, minor = triton.__version__.split(".")[:2]
    return int(major), int(minor)


def breaks_thread_locality(op: Op, fn: Function, uses: dict[Value, list[Op]]) -> bool:
    """A float sum of a loaded tile, accumulated into a loop-carried value whose final value is
    not used exactly once after the loop (row_cumsum's running carry: unused). Triton 3.6's
    TritonGPUOptimizeThreadLocality pass rewrites such accumulations and asserts that the
    loop's result has one use ("PassManager::run failed"; fixed by 3.9, where the pass checks
    first). Adding 0 to the tile (one FADD per element) keeps the pass away: it only takes a
    reduction of a load. Seen with row_cumsum over 4096 fp32 columns in 512-column tiles."""
    if triton_version() >= (3, 9) or op.attrs.get("kind") != "sum" or \
            not op.result.type.dtype.is_float:  # type: ignore[union-attr]
        return False
    source = op.operands[0].owner
    update = uses.get(op.result, [])
    if source is None or source.name != "load" or len(update) != 1 or update[0].name != "add":
        return False
    yields = uses.get(update[0].result, [])
    if len(yields) != 1 or yields[0].name != "yield":
        return False
    for loop in walk(fn.body):
        if loop.name == "for" and loop.regions[0].ops and loop.regions[0].ops[-1] is yields[0]:
            result = loop.results[yields[0].operands.index(update[0].result)]
            return len(uses.get(result, [])) != 1
    return False
