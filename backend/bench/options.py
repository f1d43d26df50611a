"""What a bench run measures: its workloads and sizes (``BenchOptions``), and how it reports progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from backend.engine.paths.engine_args import Argument
from backend.engine.paths.values import COMPARED

if TYPE_CHECKING:
    from backend.engine.paths.engine_args import EngineConfig

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
    plus a margin, ``backend.engine.local.quiet``)."""
    paths: tuple[str, ...] = COMPARED
    ablation: bool = True
    """Also run the baseline with each part of the optimized path alone (``backend.bench.ablation``)."""
    attention: tuple[str, ...] | None = None
    """``attention_config`` values (JSON) to run the optimized path with beside vLLM's own, each a
    row set of its own (``backend.bench.variants``); None: the card's (GPUs where vLLM runs Triton)."""
    extra_args: dict[str, Argument] = field(default_factory=dict)
    """Added to every path's vLLM arguments (tests use it; ``--dummy-weights`` sets load_format)."""


GPU_CONCURRENCY = (1, 8, 64, 256, 512)
"""The seed's kind of table on a GPU: aggregate throughput at each of these requests at once (256
and more: the steady state the seed's figure is about)."""
GPU_MAX_TOKENS = 256
"""Tokens per request on a GPU: with 256+ requests a step decodes the whole batch for most of the
run (32 tokens a request would be mostly ramp and tail)."""
CPU_MAX_TOKENS = 32
LEVEL_MARK = "throughput@"


def default_requests() -> tuple[int, ...]:
    """Throughput's concurrency, sized for the hardware: on a GPU the seed's table (one row per
    level, capped by the plan's batch limit), on a CPU 8 at once."""
    from backend.engine.platform import on_gpu

    return GPU_CONCURRENCY if on_gpu() else (8,)


def default_max_tokens() -> int:
    """Tokens per request: ``GPU_MAX_TOKENS`` on a GPU (steady state), ``CPU_MAX_TOKENS`` on a CPU."""
    from backend.engine.platform import on_gpu

    return GPU_MAX_TOKENS if on_gpu() else CPU_MAX_TOKENS


def with_levels(workloads: tuple[str, ...], levels: tuple[int, ...]) -> tuple[str, ...]:
    """``workloads`` with ``throughput`` run at each of several ``levels`` (``throughput@N`` each);
    one level keeps the one ``throughput``."""
    if len(levels) <= 1 or "throughput" not in workloads:
        return workloads
    named = tuple(f"{LEVEL_MARK}{n}" for n in sorted(set(levels)))
    index = workloads.index("throughput")
    return (*workloads[:index], *named, *workloads[index + 1 :])


def level(name: str) -> int | None:
    """Requests at once of a ``throughput@N`` workload (None for the others)."""
    return int(name.removeprefix(LEVEL_MARK)) if name.startswith(LEVEL_MARK) else None


def is_throughput(name: str) -> bool:
    return name == "throughput" or level(name) is not None


def capped(workloads: tuple[str, ...], most: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """``workloads`` without the levels above ``most`` requests at once, and the levels dropped."""
    dropped = tuple(n for name in workloads if (n := level(name) or 0) > most)
    return tuple(name for name in workloads if (level(name) or 0) <= most), dropped


def within_batch_limits(
    options: BenchOptions, configs: dict[str, EngineConfig], progress: Progress
) -> BenchOptions:
    """Levels of the concurrency table above what a path batches at once are dropped (said)."""
    limits = [int(c.args["max_num_seqs"].value) for c in configs.values() if "max_num_seqs" in c.args]
    if not limits:
        return options
    workloads, dropped = capped(options.workloads, min(limits))
    if dropped:
        skipped = ", ".join(map(str, dropped))
        progress(f"throughput at {skipped} at once skipped: above the plan's batch limit {min(limits)}", 1, 1)
    return replace(options, workloads=workloads)
