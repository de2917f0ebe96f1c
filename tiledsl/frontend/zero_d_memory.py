"""A 0-d array argument is a runtime scalar (its value, read when the kernel launches) unless
the body uses it as memory: writes it (`tl.store(out, total)`, `tl.atomic_add(out, v)`,
`out.zero_()`: FlagGems' `sum(x, out=torch.empty(()))`) or takes its address (`value.data_ptr()`:
FlagGems' `fill_tensor(x, value)` hands the value to its kernel as a tensor operand). Such a use
stops the trace with `MemoryNeeded`, naming the parameter; the kernel (runtime/kernel.py)
records it in `ArgSpecs.memory` and traces again with that argument a 0-d tensor, which every
backend reads and writes in place.
"""

from __future__ import annotations

from typing import Any

from tiledsl.frontend.tracer import current
from tiledsl.frontend.values import TileValue


class MemoryNeeded(BaseException):  # (as StaticNeeded: user code's `except Exception` skips it)
    """Raised while tracing where the body uses 0-d array arguments `params` as memory."""

    def __init__(self, params: frozenset[str]) -> None:
        super().__init__(", ".join(sorted(params)))
        self.params = params


def as_memory(x: Any) -> None:
    """Stop the trace if `x` is a 0-d array argument (the caller then uses it as memory);
    return for anything else, which the caller refuses as memory."""
    if isinstance(x, TileValue) and x.shape == ():
        name = current().array_scalars.get(x.value)
        if name is not None:
            raise MemoryNeeded(frozenset({name}))


def zero_d_hint(x: Any) -> str | None:
    """What to say where a runtime scalar stands for memory; a 0-d array argument is memory
    instead (the trace stops and the kernel traces it again as a tensor)."""
    as_memory(x)
    if isinstance(x, TileValue) and x.shape == ():
        return ("a runtime scalar (a number, or a value the kernel computed) is not memory: "
                "write into a tensor argument or an allocation, e.g. td.store(out, v)")
    return None
