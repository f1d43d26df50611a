"""What a bench run measures: its workloads and sizes (``BenchOptions``), and how it reports progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from backend.engine.profiles import Argument

WORKLOAD_NAMES = ("throughput", "single", "chat", "media")
BENCH_LOG = "bench-engines.log"
"""The file under the logs directory the bench's engines write to (their stderr is captured there)."""
Progress = Callable[[str, int, int], None]
"""``(stage, done, total)``: the CLI draws bars from it."""


@dataclass(frozen=True)
class BenchOptions:
    workloads: tuple[str, ...] = WORKLOAD_NAMES
    requests: int = 8
    """Requests submitted at once in ``throughput``."""
    single_requests: int = 3
    conversations: int = 2
    chat_turns: int = 2
    max_tokens: int = 32
    chat_max_tokens: int = 32
    media_per_kind: int = 1
    repetitions: int = 3
    """Rounds of every workload on every path, interleaved; figures are their medians."""
    peer: bool = True
    dummy_weights: bool = False
    step_costs: bool = False
    """Also measure decode-step costs (plain and verifying) and the speed-up speculation implies."""
    roof_seconds: float = 1.0
    settle_s: float | None = None
    """The pause before each timed run while several engines are up (None: vLLM's busy window
    plus a margin, ``backend.engine.quiet``)."""
    paths: tuple[str, ...] = ("baseline", "optimized")
    extra_args: dict[str, Argument] = field(default_factory=dict)
    """Added to every path's vLLM arguments (tests use it; ``--dummy-weights`` sets load_format)."""


def default_requests() -> int:
    """Throughput's concurrency, sized for the hardware: a GPU batches far more than two CPU cores."""
    from backend.engine.platform import on_gpu

    return 64 if on_gpu() else 8
