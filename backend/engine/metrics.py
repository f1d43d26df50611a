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
from collections.abc import Sequence
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
    step_tokens: tuple[tuple[int, int], ...] | None = None
    """Each engine step's (tokens it delivered, of which accepted drafts: the first ones), in order
    (None: no speculation, or the steps could not be told apart for certain: see ``by_step``)."""
    draft_steps: tuple[tuple[int, int], ...] | None = None
    """(drafts proposed, drafts accepted) of each step that verified drafts, in order, as the
    engine's scheduler counted them (vLLM's ``detailed`` per-request metrics)."""
    kv_cache_usage: float | None = None
    engine_span: tuple[float, float] | None = None
    """When the engine first scheduled the request and when it produced its last token, on the
    engine's own clock (comparable between requests of one engine; bench's throughput figure)."""
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
        self._steps: list[int] = []
        self.latest = TurnMetrics()

    def update(self, output: Any) -> TurnMetrics:
        if output.outputs and output.outputs[0].token_ids:
            self._steps.append(len(output.outputs[0].token_ids))
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
            engine_span=(float(stats.scheduled_ts), last) if stats.scheduled_ts > 0 and last > 0 else None,
        )
        spec = output.outputs[0].spec_decode_metrics if output.outputs else None
        if spec is not None:
            self.latest = _with_speculation(self.latest, spec)
            # while streaming the engine sends counts only (no per-step record): steps at the end
            if self.latest.draft_steps is not None or getattr(output, "finished", True):
                steps = by_step(self._steps, self.latest.accepted_tokens, self.latest.draft_steps)
                self.latest = replace(self.latest, step_tokens=steps)
        return self.latest

    def _rolling(self) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else None

    def with_kv_cache_usage(self, usage: float | None) -> TurnMetrics:
        self.latest = replace(self.latest, kv_cache_usage=usage)
        return self.latest


def by_step(
    sizes: list[int], accepted: int | None, draft_steps: tuple[tuple[int, int], ...] | None = None
) -> tuple[tuple[int, int], ...] | None:
    """Each engine step's (tokens delivered, of which accepted drafts), from what the engine
    reported, or None where that is not certain.

    With the scheduler's per-step counts (``draft_steps``: one per step that verified drafts, in
    order) the steps are those counts — ``accepted + 1`` tokens each, the first ``accepted`` of them
    drafts — after the steps that verified none (one token each: the first token, and a first
    decode step with no drafts yet), the last step cut where the reply ended (its length or a stop
    token); a placement is kept only where it is the one way to put every output vLLM delivered on
    step boundaries. Without them, the outputs stand for steps where the sum of (size - 1) is the
    scheduler's count of accepted drafts (vLLM merges outputs when its consumer falls behind, and
    each merge adds at least one to that sum)."""
    if accepted is None:
        return None
    total, ends = sum(sizes), set(_ends(sizes))
    if not draft_steps:
        return tuple((size, size - 1) for size in sizes) if total - len(sizes) == accepted else None
    verified = [(taken + 1, taken) for _, taken in draft_steps]
    fits: list[tuple[tuple[int, int], ...]] = []
    for cut in range(verified[-1][0]):
        plain = total - sum(size for size, _ in verified) + cut
        if plain < 0:
            continue
        last_size, last_taken = verified[-1]
        kept = last_size - cut
        steps = ((1, 0),) * plain + tuple(verified[:-1]) + ((kept, min(last_taken, kept)),)
        if ends <= set(_ends([size for size, _ in steps])):
            fits.append(steps)
    return fits[0] if len(fits) == 1 else None


def _ends(sizes: Sequence[int]) -> list[int]:
    ends, at = [], 0
    for size in sizes:
        at += size
        ends.append(at)
    return ends


def accepted_positions(step_tokens: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """Indices of the reply's tokens that were drafts the target accepted: the first ``drafts`` of
    each step's ``tokens``."""
    positions: list[int] = []
    at = 0
    for size, drafts in step_tokens:
        positions.extend(range(at, at + drafts))
        at += size
    return tuple(positions)


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
        draft_steps=tuple(
            (int(d), int(a))
            for d, a in zip(
                getattr(spec, "per_step_drafted", ()), getattr(spec, "per_step_accepted", ()), strict=False
            )
        )
        or None,
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
        step_tokens=None,  # several generations: no one reply's steps
        draft_steps=None,
    )
