"""Engine-wide figures from vLLM's stat-logger hook: KV cache use, speculative totals, and (where
the engine runs with ``enable_logging_iteration_details``, as the speculation probe's do) one
record per engine step: what it scheduled and how long the engine core spent on it.

``EngineStats`` is a plain value holder; ``stat_logger_factory(stats)`` returns the factory
vLLM's ``AsyncLLM`` takes (``stat_loggers=[...]``), whose logger fills it on every step.
vLLM is imported only when the factory is called (at engine start).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

MAX_STEPS_KEPT = 100_000


@dataclass(frozen=True)
class StepRecord:
    """One engine iteration as vLLM's engine core reports it."""

    context_requests: int
    generation_requests: int
    generation_tokens: int
    """Tokens scheduled for requests past their prefill: 1 + drafts each."""
    elapsed_ms: float

    @property
    def is_decode(self) -> bool:
        return self.context_requests == 0 and self.generation_requests > 0


@dataclass
class EngineStats:
    kv_cache_usage: float | None = None
    """Fraction of the KV cache in use (0..1), as of the latest engine step."""
    running_requests: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    draft_steps: int = 0
    steps: deque[StepRecord] = field(default_factory=lambda: deque(maxlen=MAX_STEPS_KEPT))

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else None

    def record(self, scheduler_stats: Any) -> None:
        if scheduler_stats is None:
            return
        self.kv_cache_usage = float(scheduler_stats.kv_cache_usage)
        self.running_requests = int(scheduler_stats.num_running_reqs)
        spec = getattr(scheduler_stats, "spec_decoding_stats", None)
        if spec is not None:
            self.drafted_tokens += int(spec.num_draft_tokens)
            self.accepted_tokens += int(spec.num_accepted_tokens)
            self.draft_steps += int(spec.num_drafts)
        details = getattr(scheduler_stats, "iteration_details", None)
        if details is not None and not details.is_dummy:
            self.steps.append(
                StepRecord(
                    int(details.num_ctx_requests),
                    int(details.num_generation_requests),
                    int(details.num_generation_tokens),
                    float(details.elapsed_ms),
                )
            )


def stat_logger_factory(stats: EngineStats) -> Any:
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _Logger(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.stats = stats

        def record(
            self,
            scheduler_stats: Any,
            iteration_stats: Any,
            mm_cache_stats: Any = None,
            engine_idx: int = 0,
        ) -> None:
            self.stats.record(scheduler_stats)

        def log_engine_initialized(self) -> None:
            pass

    return _Logger
