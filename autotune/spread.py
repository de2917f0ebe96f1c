"""Medians with their spread, and comparisons that say when the spread makes them meaningless.

A median alone hides a busy machine: under load, NumPy's 512^3 matmul had a 112 ms median
against a 2.2 ms minimum, and a table built on medians claimed a 2.4x speedup. Every timed row
therefore shows its range (min-max), and a ratio between two rows whose ranges overlap is
reported as "within noise" rather than as a speedup.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from collections.abc import Sequence


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
    medians then says nothing about which is faster), or "unreliable" when either's times
    vary by `NOISY` or more (a busy machine: a 512^3 NumPy matmul took 10 to 70 ms)."""
    ratio = f"{other / mine:.2f}x faster" if mine <= other else f"{mine / other:.2f}x slower"
    if other_spread is None or my_spread is None:
        return ratio
    if other_spread.overlaps(my_spread):
        return (f"{ratio} by the medians, but within noise: the ranges {my_spread.range_text} "
                f"and {other_spread.range_text} overlap")
    if noisy(my_spread) or noisy(other_spread):
        wide = max(my_spread.high / my_spread.low, other_spread.high / other_spread.low)
        return (f"{ratio} by the medians, but unreliable: one row's times vary {wide:.1f}x "
                "(a busy machine?)")
    return ratio


NOISY = 2.0  # a row whose slowest time is this many times its fastest is too noisy to compare


def noisy(spread: Spread) -> bool:
    return spread.low <= 0 or spread.high >= NOISY * spread.low
