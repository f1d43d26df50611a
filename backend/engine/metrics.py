"""A turn's figures, read from the engine's own request statistics (never estimated here).

vLLM stamps each request in its engine core (scheduled, first token, last token; one
monotonic clock) and measures time to first token in its front end. From those:

* prefill tok/s = prompt tokens / (first token - scheduled)
* decode tok/s  = (generated - 1) / (last token - first token); a rolling figure over
  the last ``ROLLING_WINDOW_S`` seconds is kept while streaming
* end-to-end    = time to first token + (last token - first token)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Any

ROLLING_WINDOW_S = 1.0


@dataclass(frozen=True)
class TurnMetrics:
    prompt_tokens: int = 0
    generated_tokens: int = 0
    ttft_s: float | None = None
    prefill_tokens_per_s: float | None = None
    decode_tokens_per_s: float | None = None
    rolling_decode_tokens_per_s: float | None = None
    e2e_s: float | None = None
    drafted_tokens: int | None = None
    accepted_tokens: int | None = None
    mean_acceptance_length: float | None = None
    acceptance_histogram: tuple[int, ...] | None = None
    """Speculative steps that accepted 0, 1, 2, ... drafts."""
    kv_cache_usage: float | None = None
    thought_tokens: int = 0
    """Of ``generated_tokens``, those of the reply's thinking (set by the turn pipeline)."""

    def summary_line(self) -> str:
        """One line of figures, as ``gemma-chat ask`` prints it."""
        parts = [
            f"TTFT {_fmt(self.ttft_s, 's', 3)}",
            f"prefill {_fmt(self.prefill_tokens_per_s, ' tok/s', 0)}",
            f"decode {_fmt(self.decode_tokens_per_s, ' tok/s', 1)}",
            f"{self.generated_tokens} tokens ({self._split()}{self.prompt_tokens} prompt)",
            f"end-to-end {_fmt(self.e2e_s, 's', 2)}",
        ]
        if self.drafted_tokens:
            rate = (self.accepted_tokens or 0) / self.drafted_tokens
            parts.append(
                f"spec accepted {self.accepted_tokens}/{self.drafted_tokens} ({rate:.0%}),"
                f" mean length {_fmt(self.mean_acceptance_length, '', 2)}"
            )
        return " · ".join(parts)

    def _split(self) -> str:
        return f"{self.thought_tokens} thought, " if self.thought_tokens else ""


def _fmt(value: float | None, unit: str, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


class MetricsTracker:
    """Builds ``TurnMetrics`` from successive vLLM ``RequestOutput`` objects of one request."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int]] = deque()
        self.latest = TurnMetrics()

    def update(self, output: Any) -> TurnMetrics:
        stats = output.metrics
        prompt_tokens = len(output.prompt_token_ids or ())
        if stats is None:
            self.latest = replace(self.latest, prompt_tokens=prompt_tokens)
            return self.latest
        generated = int(stats.num_generation_tokens)
        first, last = float(stats.first_token_ts), float(stats.last_token_ts)
        ttft = float(stats.first_token_latency) if first > 0 else None
        prefill_s = first - float(stats.scheduled_ts) if first > 0 and stats.scheduled_ts > 0 else None
        decode_s = last - first if generated > 1 and last > first else None
        if last > 0:
            self._samples.append((last, generated))
            while self._samples and self._samples[0][0] < last - ROLLING_WINDOW_S:
                self._samples.popleft()
        self.latest = replace(
            self.latest,
            prompt_tokens=prompt_tokens,
            generated_tokens=generated,
            ttft_s=ttft,
            prefill_tokens_per_s=prompt_tokens / prefill_s if prefill_s else None,
            decode_tokens_per_s=(generated - 1) / decode_s if decode_s else None,
            rolling_decode_tokens_per_s=self._rolling(),
            e2e_s=ttft + (last - first) if ttft is not None else None,
        )
        spec = output.outputs[0].spec_decode_metrics if output.outputs else None
        if spec is not None:
            self.latest = _with_speculation(self.latest, spec)
        return self.latest

    def _rolling(self) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else None

    def with_kv_cache_usage(self, usage: float | None) -> TurnMetrics:
        self.latest = replace(self.latest, kv_cache_usage=usage)
        return self.latest


def _with_speculation(metrics: TurnMetrics, spec: Any) -> TurnMetrics:
    histogram = list(spec.histogram)
    steps = sum(histogram)
    accepted = sum(j * count for j, count in enumerate(histogram))
    return replace(
        metrics,
        drafted_tokens=int(spec.num_draft_tokens),
        accepted_tokens=accepted,
        mean_acceptance_length=1 + accepted / steps if steps else None,
        acceptance_histogram=tuple(int(count) for count in histogram),
    )


def combine_metrics(steps: list[TurnMetrics]) -> TurnMetrics:
    """One turn's figures from its model steps (a tool-calling turn generates several times).

    Time to first token is the first step's; decode tok/s pools every step's decode time;
    end-to-end is the model's time only (tool time is counted separately by the caller).
    """
    if not steps:
        return TurnMetrics()
    if len(steps) == 1:
        return steps[0]
    decode_tokens = sum(max(m.generated_tokens - 1, 0) for m in steps if m.decode_tokens_per_s)
    decode_s = sum((m.generated_tokens - 1) / m.decode_tokens_per_s for m in steps if m.decode_tokens_per_s)
    e2e = [m.e2e_s for m in steps if m.e2e_s is not None]
    drafted = [m.drafted_tokens for m in steps if m.drafted_tokens is not None]
    accepted = [m.accepted_tokens for m in steps if m.accepted_tokens is not None]
    last = steps[-1]
    return replace(
        last,
        generated_tokens=sum(m.generated_tokens for m in steps),
        ttft_s=steps[0].ttft_s,
        prefill_tokens_per_s=steps[0].prefill_tokens_per_s,
        decode_tokens_per_s=decode_tokens / decode_s if decode_s > 0 else None,
        e2e_s=sum(e2e) if e2e else None,
        drafted_tokens=sum(drafted) if drafted else None,
        accepted_tokens=sum(accepted) if accepted else None,
        mean_acceptance_length=last.mean_acceptance_length,
        thought_tokens=sum(m.thought_tokens for m in steps),
    )
