"""Figures from repeated, interleaved runs: the median and the spread of a value, and of a ratio.

On a shared or small machine one engine's identical requests vary by a factor of 1.7 and two
identical engines measured once each differ by up to 2x, so no figure here comes from one run.
Each repetition runs both paths back to back (their order alternating), so a ratio is taken
per repetition from neighbouring measurements; the reported ratio is the median of those, and
it is "within noise" when their range reaches 1.0.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    """Repeated measurements of one figure."""

    values: tuple[float, ...]

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    @property
    def low(self) -> float | None:
        return min(self.values) if self.values else None

    @property
    def high(self) -> float | None:
        return max(self.values) if self.values else None


def paired_ratios(
    baseline: Sequence[float | None], optimized: Sequence[float | None], higher_is_better: bool
) -> Spread:
    """Per repetition: how many times better the optimized figure is (>1 = faster)."""
    ratios = []
    for b, o in zip(baseline, optimized, strict=False):
        if b and o:
            ratios.append(o / b if higher_is_better else b / o)
    return Spread(tuple(ratios))


def within_noise(ratios: Spread) -> bool | None:
    """True when the repetitions disagree on which path is faster; None from fewer than two."""
    if len(ratios.values) < 2:
        return None
    return (ratios.low or 0.0) <= 1.0 <= (ratios.high or 0.0)
