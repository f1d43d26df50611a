"""A chat's compare verdict: the median and range of its compares' speed-ups, not one run's.

One compare is one run on each path, and on a small or shared machine one run's figure varies
by up to 2x (backend.bench.spread), so a single compare's ratio is mostly noise. Two habits make
the compare view tell the truth:

* which path runs first alternates from one compare of a chat to the next (``first_path``), so
  neither always gets the machine right after the other's request;
* once a chat holds two or more compares, the verdict line carries the median and the range of
  their decode speed-ups and says *within noise* where that range reaches 1.0x (the compares
  disagree on which path is faster). The single run's figure stays beside it, labelled.

A chat's compares are read back from its saved replies (``SPEEDUP_KEY`` in a reply's extra), so
a reopened chat keeps its verdict and a new chat starts afresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from backend.bench.spread import Spread, within_noise
from backend.chat.compare import CompareResult
from backend.engine.parity import SAME_PATHS
from backend.engine.paths.values import COMPARED

COMPARE_KEY = "compare"
"""A compared reply's extra: the verdict line as it was shown."""
SPEEDUP_KEY = "compare_decode_speedup"
"""A compared reply's extra: that compare's decode speed-up (None where the paths were the same)."""
FIRST_KEY = "compare_first"
"""A compared reply's extra: the path that ran first."""


def compares_so_far(extras: Iterable[Mapping[str, object]]) -> list[float | None]:
    """The decode speed-ups of a chat's earlier compares, oldest first (None: no ratio)."""
    found: list[float | None] = []
    for extra in extras:
        if COMPARE_KEY not in extra:
            continue
        value = extra.get(SPEEDUP_KEY)
        found.append(float(value) if isinstance(value, int | float) and value > 0 else None)
    return found


def first_path(earlier: int, resident: str | None = None) -> str:
    """The path that runs first in a chat's next compare, after ``earlier`` compares: where the two
    swap, the one already on the device (``resident``: one swap a compare, not two; the other is
    stopped or asleep, so neither runs beside the other's leftovers anyway); else they alternate."""
    return resident if resident in COMPARED else COMPARED[earlier % 2]


def fmt_x(value: float) -> str:
    return f"{value:.2f}x"


@dataclass(frozen=True)
class Verdict:
    """One compare's result read together with the chat's earlier compares."""

    result: CompareResult
    earlier: tuple[float | None, ...] = ()
    first: str = "baseline"
    swapped: bool = False
    """The engines took turns in memory (one fits at a time): the swap is in no figure."""

    @property
    def speedups(self) -> Spread:
        """The decode speed-ups of this chat's compares that have one, this one included."""
        values = (*self.earlier, self.result.decode_speedup)
        return Spread(tuple(v for v in values if v))

    @property
    def within_noise(self) -> bool | None:
        return within_noise(self.speedups)

    def speedup_line(self) -> str:
        result = self.result
        if result.same_paths:
            return SAME_PATHS
        decode = fmt_x(result.decode_speedup) if result.decode_speedup else "n/a"
        e2e = fmt_x(result.e2e_speedup) if result.e2e_speedup else "n/a"
        spread = self.speedups
        if len(spread.values) < 2 or spread.median is None or spread.low is None or spread.high is None:
            return f"speed-up: decode {decode}, end-to-end {e2e} (one run, {self.first} first: noisy)"
        this_run = f"decode {decode}, end-to-end {e2e}, {self.first} first"
        if self.within_noise:
            call = "within noise"
        else:
            call = "optimized faster" if spread.median > 1.0 else "optimized slower"
        return (
            f"speed-up: decode median {fmt_x(spread.median)} of {len(spread.values)} compares "
            f"(range {spread.low:.2f}-{fmt_x(spread.high)}): {call} · this run: {this_run}"
        )

    def summary(self) -> str:
        """The verdict line: speed-up (the chat's, then this run's), this run's token parity, and on
        a GPU which kernels ran (exact or fast mode)."""
        mode = f" · {self.result.mode}" if self.result.mode else ""
        parity = self.result.parity
        differs = (
            f" (from token {parity.index} on the two replies are different texts: the speed-up no "
            "longer compares the same work)"
            if not parity.identical
            else ""
        )
        swap = (
            " · engines swapped (memory holds one at a time; the swap is not timed)" if self.swapped else ""
        )
        return f"{self.speedup_line()} · parity: {parity.describe()}{differs}{mode}{swap}"

    def extra(self) -> dict[str, object]:
        """What a compared reply saves so the chat's later compares can read it."""
        return {
            COMPARE_KEY: self.summary(),
            SPEEDUP_KEY: self.result.decode_speedup,
            FIRST_KEY: self.first,
        }
