"""The rule for drafts by load, on measured figures: which count of drafts each concurrency level
keeps, and the schedule that makes (``by_load`` measures; the optimized path applies it).

Level by level from the lowest: the count whose greedy tokens are no drafts' at that level (or
differed only in fast mode: ``kernel_only``), where a count with more drafts must beat the one with
fewer in every round and by ``MORE_DRAFTS_GAIN`` on the median of the rounds' ratios (one noisy
round does not decide); drafts never rise with load.
The schedule is steps ``(up_to, drafts)``: ``drafts`` a step up to ``up_to`` running requests (the
highest level that chose it), none above the last.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

MORE_DRAFTS_GAIN = 1.05
"""More drafts must be this much faster than fewer, on the median of the rounds (as the probe asks
of any speculation over none)."""
Steps = tuple[tuple[int, int], ...]
"""``((up_to, drafts), ...)``: ``drafts`` a step up to ``up_to`` running requests; none above the last."""


@dataclass
class LoadLevel:
    """One concurrency level's figures: aggregate tokens/s of each draft count, one a round."""

    requests: int
    rates: dict[int, list[float]] = field(default_factory=dict)
    tokens: dict[int, list[tuple[int, ...]]] = field(default_factory=dict)
    """Each count's greedy tokens of the level's requests (first round)."""
    kernel_only: set[int] = field(default_factory=set)
    """On a GPU in fast mode: counts whose tokens differed from no drafts' but agreed when both ran
    vLLM's batch-invariant kernels (``by_load``'s re-check) — the kernels' difference, not the
    drafts': still chosen."""

    def rate(self, drafts: int) -> float:
        return statistics.median(self.rates[drafts]) if self.rates.get(drafts) else 0.0

    def differs(self, drafts: int) -> bool:
        """Its tokens are not no drafts', bit for bit, as measured (fast mode's kernels on a GPU)."""
        return self.tokens.get(drafts) != self.tokens.get(0)

    def diverged(self, drafts: int) -> bool:
        """Its tokens differ, and not only through the kernels: not chosen at this level."""
        return self.differs(drafts) and drafts not in self.kernel_only

    def beats(self, more: int, fewer: int) -> bool:
        """``more`` drafts beat ``fewer``: round by round (the counts ran back to back in each) the
        ratio is above 1.0 every time and its median at least ``MORE_DRAFTS_GAIN``."""
        ratios = [
            a / b for a, b in zip(self.rates.get(more, []), self.rates.get(fewer, []), strict=False) if b > 0
        ]
        return bool(ratios) and min(ratios) > 1.0 and statistics.median(ratios) >= MORE_DRAFTS_GAIN

    def best(self, most: int) -> int:
        """The count up to ``most`` keeping the tokens that beats every count with fewer drafts it
        was chosen over (``beats``), more drafts only so."""
        chosen = 0
        for drafts in sorted(d for d in self.rates if 0 < d <= most):
            if not self.diverged(drafts) and self.beats(drafts, chosen):
                chosen = drafts
        return chosen

    def describe(self) -> str:
        figures = ", ".join(f"{d}: {self.rate(d):.0f}{self._parity(d)}" for d in sorted(self.rates))
        return f"{self.requests} at once — tok/s by drafts {figures}"

    def _parity(self, drafts: int) -> str:
        if not drafts or not self.differs(drafts):
            return ""
        return " (tokens differ in fast mode only)" if drafts in self.kernel_only else " (tokens differ)"


def choose_by_load(levels: Sequence[LoadLevel]) -> Steps:
    """The schedule the measured ``levels`` call for (see the module's rule); ``()``: no level
    chose drafts."""
    steps: list[tuple[int, int]] = []
    most = max((d for level in levels for d in level.rates), default=0)
    for level in sorted(levels, key=lambda lv: lv.requests):
        most = level.best(most)
        if most == 0:
            break
        if steps and steps[-1][1] == most:
            steps[-1] = (level.requests, most)
        else:
            steps.append((level.requests, most))
    return tuple(steps)


def describe_steps(steps: Steps) -> str:
    """``3 drafts up to 16 running requests, 1 up to 64, none above``."""
    if not steps:
        return "no drafts at any measured load"
    first_drafts, first_up_to = steps[0][1], steps[0][0]
    drafts = f"{first_drafts} draft{'s' if first_drafts != 1 else ''}"
    parts = [f"{drafts} up to {first_up_to} running request{'s' if first_up_to != 1 else ''}"]
    parts += [f"{drafts} up to {up_to}" for up_to, drafts in steps[1:]]
    return ", ".join(parts) + ", none above"


def vllm_schedule(steps: Steps, max_num_seqs: int) -> list[list[int]]:
    """``steps`` as vLLM's ``num_speculative_tokens_per_batch_size``, ending at ``max_num_seqs``."""
    ranges: list[list[int]] = []
    start = 1
    for up_to, drafts in steps:
        end = min(up_to, max_num_seqs)
        if start <= end:
            ranges.append([start, end, drafts])
        start = end + 1
    if start <= max_num_seqs:
        ranges.append([start, max_num_seqs, 0])
    return ranges
