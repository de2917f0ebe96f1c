"""Medians with their spread, and comparisons that say when the spread makes them meaningless.

A median alone hides a busy machine: under load, NumPy's 512^3 matmul had a 112 ms median
against a 2.2 ms minimum, and a table built on medians claimed a 2.4x speedup. Every timed row
therefore shows its range (min-max), and a ratio between two rows whose ranges overlap is
reported as "within noise" rather than as a speedup.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Spread:
    """The median of some samples and their range."""

    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        values = [float(s) for s in samples]
        return cls(float(statistics.median(values)), min(values), max(values), len(values))

    @property
    def range_text(self) -> str:
        return f"{number(self.low)}-{number(self.high)}"

    def overlaps(self, other: Spread) -> bool:
        return self.low <= other.high and other.low <= self.high


def number(value: float) -> str:
    """A table's number: 4 significant digits, thousands as whole numbers (28,209 cycles)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def compare(other: float, mine: float, other_spread: Spread | None = None,
            my_spread: Spread | None = None) -> str:
    """How `mine` compares with `other` (lower is better): "2.40x faster" or "1.50x slower",
    with "within noise" when both have a spread and their ranges overlap (the ratio of the
    medians then says nothing about which is faster)."""
    ratio = f"{other / mine:.2f}x faster" if mine <= other else f"{mine / other:.2f}x slower"
    if other_spread is not None and my_spread is not None and other_spread.overlaps(my_spread):
        return (f"{ratio} by the medians, but within noise: the ranges {my_spread.range_text} "
                f"and {other_spread.range_text} overlap")
    return ratio
