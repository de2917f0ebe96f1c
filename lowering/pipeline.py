"""The lowering pipeline: an explicit list of named passes run on a clone of the traced IR."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lowering.passes.base import Pass
from lowering.passes.carried import KeepCarriedLanesPass
from lowering.passes.cse import CSEPass
from lowering.passes.dce import DCEPass
from lowering.passes.fold import FoldConstantsPass
from lowering.passes.ragged import MaskRaggedEdgesPass
from tiledsl.ir.core import Function
from tiledsl.ir.verify import verify

CANONICALIZE: tuple[Pass, ...] = (FoldConstantsPass(), CSEPass(), DCEPass())
DEFAULT: tuple[Pass, ...] = CANONICALIZE + (MaskRaggedEdgesPass(), KeepCarriedLanesPass()) + \
    CANONICALIZE


@dataclass
class Pipeline:
    """Runs passes in order; `verify_each` checks the IR after every pass (tests use it)."""

    passes: tuple[Pass, ...] = DEFAULT
    verify_each: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    def __call__(self, fn: Function) -> Function:
        for p in self.passes:
            start = time.perf_counter()
            p.run(fn)
            self.timings[p.name] = self.timings.get(p.name, 0.0) + time.perf_counter() - start
            if self.verify_each:
                verify(fn)
        return fn


PASSES: dict[str, Pass] = {p.name: p for p in DEFAULT}


def lower(fn: Function) -> Function:
    """The default pipeline on `fn` (in place)."""
    return Pipeline()(fn)
