"""Engine-wide figures from vLLM's stat-logger hook: KV cache use and speculative totals.

``EngineStats`` is a plain value holder; ``stat_logger_factory(stats)`` returns the factory
vLLM's ``AsyncLLM`` takes (``stat_loggers=[...]``), whose logger fills it on every step.
vLLM is imported only when the factory is called (at engine start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class EngineStats:
    kv_cache_usage: float | None = None
    """Fraction of the KV cache in use (0..1), as of the latest engine step."""
    running_requests: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    draft_steps: int = 0

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
