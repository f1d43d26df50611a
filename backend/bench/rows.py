"""The bench table's rows: one figure of one workload, per repetition on each path, and how a
figure and its spread are written."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from backend.bench.options import is_throughput
from backend.bench.spread import Spread, paired_ratios, within_noise
from backend.bench.workload_runs import RequestResult, WorkloadRun

if TYPE_CHECKING:
    from backend.bench.peer import PeerRun


@dataclass(frozen=True)
class Row:
    workload: str
    metric: str
    unit: str
    baseline_runs: tuple[float | None, ...]
    optimized_runs: tuple[float | None, ...]
    """One figure per repetition (empty when the path did not run)."""
    higher_is_better: bool = True
    transformers: float | None = None
    roof: float | None = None
    """The machine's ceiling for this figure (tokens/s), if one applies."""

    @property
    def baseline(self) -> float | None:
        return _spread(self.baseline_runs).median

    @property
    def optimized(self) -> float | None:
        return _spread(self.optimized_runs).median

    @property
    def ratios(self) -> Spread:
        return paired_ratios(self.baseline_runs, self.optimized_runs, self.higher_is_better)

    @property
    def ratio(self) -> float | None:
        return self.ratios.median

    @property
    def within_noise(self) -> bool | None:
        return within_noise(self.ratios)

    def to_json(self) -> dict[str, Any]:
        ratios = self.ratios
        return {
            **asdict(self),
            "baseline": self.baseline,
            "optimized": self.optimized,
            "ratio": self.ratio,
            "ratio_low": ratios.low,
            "ratio_high": ratios.high,
            "within_noise": self.within_noise,
        }


def _spread(values: tuple[float | None, ...]) -> Spread:
    return Spread(tuple(v for v in values if v is not None))


def rows_for(
    name: str,
    b: list[WorkloadRun],
    o: list[WorkloadRun],
    peer: PeerRun | None,
    compute_roof: float | None,
    bandwidth_roof: float | None,
) -> list[Row]:
    def per_rep(runs: list[WorkloadRun], read: Any, turns: str = "all") -> tuple[float | None, ...]:
        return tuple(run.mean(read, turns) for run in runs)

    def both(read: Any, turns: str = "all") -> tuple[tuple[float | None, ...], tuple[float | None, ...]]:
        return per_rep(b, read, turns), per_rep(o, read, turns)

    def ttft_ms(r: RequestResult) -> float | None:
        return r.metrics.ttft_s * 1000 if r.metrics.ttft_s is not None else None

    def decode(r: RequestResult) -> float | None:
        return r.metrics.decode_tokens_per_s

    if is_throughput(name):
        pt = peer.throughput.tokens_per_s if peer and peer.throughput and name == "throughput" else None
        agg = tuple(run.aggregate_tokens_per_s for run in b), tuple(run.aggregate_tokens_per_s for run in o)
        first = (b or o)[0] if (b or o) else None
        requests = len(first.requests) if first else 0
        return [Row(name, f"aggregate tok/s ({requests} at once)", "tok/s", *agg, True, pt, compute_roof)]
    if name == "single":
        ps = peer.single if peer else None
        return [
            Row(
                name,
                "decode tok/s",
                "tok/s",
                *both(decode),
                True,
                ps.mean_decode_tokens_per_s if ps else None,
                bandwidth_roof,
            ),
            Row(name, "TTFT ms", "ms", *both(ttft_ms), False, ps.mean_ttft_s * 1000 if ps else None),
        ]
    if name == "chat":
        total = tuple(run.wall_s for run in b), tuple(run.wall_s for run in o)
        return [
            Row(name, "TTFT ms, first turns", "ms", *both(ttft_ms, "first"), False),
            Row(name, "TTFT ms, later turns", "ms", *both(ttft_ms, "later"), False),
            Row(name, "total s", "s", *total, False),
        ]
    return [
        Row(name, "TTFT ms", "ms", *both(ttft_ms), False),
        Row(name, "decode tok/s", "tok/s", *both(decode), True),
    ]


def num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def figure(values: tuple[float | None, ...]) -> str:
    """Median (min–max) of a figure's repetitions; the bare value from one."""
    spread = _spread(values)
    if spread.median is None:
        return "—"
    if len(spread.values) < 2:
        return num(spread.median)
    return f"{num(spread.median)} ({num(spread.low)}–{num(spread.high)})"
