"""The lowering pipeline: an explicit list of named passes run on a clone of the traced IR."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lowering.passes.base import Pass
from lowering.passes.carried import KeepCarriedLanesPass
from lowering.passes.carried_scales import RescaleCarriedPass
from lowering.passes.cse import CSEPass
from lowering.passes.dce import DCEPass
from lowering.passes.exp_scales import FoldExpScalesPass
from lowering.passes.fold import FoldConstantsPass
from lowering.passes.loads_first import LoadsFirstPass
from lowering.passes.ragged import MaskRaggedEdgesPass
from lowering.passes.reciprocal import HoistReciprocalsPass
from lowering.passes.unroll_counted import UnrollCountedPass
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


# The Triton backend's own passes, after DEFAULT (on a copy: the NumPy backend runs the IR as
# written; see tiledsl.runtime.kernel.Traced.for_backend).
TRITON: tuple[Pass, ...] = (FoldExpScalesPass(), RescaleCarriedPass(), HoistReciprocalsPass(),
                            LoadsFirstPass()) + CANONICALIZE

# The spatial backend's: its mapper plans every trip before the run, so counted loops with
# constant bounds are unrolled (the others it refuses).
SPATIAL: tuple[Pass, ...] = (UnrollCountedPass(),) + CANONICALIZE

PASSES: dict[str, Pass] = {p.name: p for p in DEFAULT + TRITON + SPATIAL}


def lower(fn: Function) -> Function:
    """The default pipeline on `fn` (in place)."""
    return Pipeline()(fn)


def lower_for_triton(fn: Function) -> Function:
    """A copy of lowered `fn` after the Triton backend's passes."""
    out = Pipeline(TRITON)(fn.clone())
    verify(out)
    return out


def lower_for_spatial(fn: Function) -> Function:
    """A copy of lowered `fn` after the spatial backend's passes."""
    out = Pipeline(SPATIAL)(fn.clone())
    verify(out)
    return out
