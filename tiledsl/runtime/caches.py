"""A kernel's in-process caches, as one object: the kernel keeps one set per value of the
globals and closure variables it reads (reads.Generations switches them), so every cache that
depends on a trace lives here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Caches:
    traces: dict[tuple, Any] = field(default_factory=dict)  # spec (and knobs) -> Traced
    writes: dict[tuple, list[str]] = field(default_factory=dict)  # spec -> arguments stored into
    shapes: dict[tuple, Any] = field(default_factory=dict)  # spec -> symdims.ShapeFunction
    spaces: dict[tuple, Any] = field(default_factory=dict)  # (spec, backend, arch) -> space
    tuned: dict[tuple, Any] = field(default_factory=dict)  # memo of result-cache lookups
    plans: dict[tuple, Any] = field(default_factory=dict)  # dispatch cache (runner.Plan)
    fast: dict[tuple, Any] = field(default_factory=dict)  # torch CUDA calls by layout
    # torch CUDA layouts (fast keys) whose outputs are not differentiable (differentiable.py)
    plain: set[tuple] = field(default_factory=set)

    def forget_dispatch(self) -> None:
        """Drop what was decided from a tuned config or a compile-time set that changed."""
        self.tuned.clear()
        self.plans.clear()
        self.fast.clear()
