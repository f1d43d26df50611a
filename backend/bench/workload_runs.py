"""Running the workloads on one engine path and keeping every request's tokens and figures.

Each function takes a started ``Engine`` and returns a ``WorkloadRun``; requests are greedy with
fixed seeds; ``throughput``, ``single`` and ``media`` use ``ignore_eos`` so both paths generate
the same number of tokens; ``chat`` lets the model end its turns (its replies become the next
turn's history, as in a real chat).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.engine.metrics import TurnMetrics
from backend.engine.protocol import Engine, EngineRequest, Failed, Finished, SamplingSettings, TurnEvent
from backend.errors import GemmaChatError
from backend.gemma4.call_format import clean_text
from backend.gemma4.messages import ChatMessage

Tick = Callable[[], None]


class BenchRequestFailed(GemmaChatError):
    pass


@dataclass(frozen=True)
class RequestResult:
    id: str
    token_ids: tuple[int, ...]
    metrics: TurnMetrics
    text: str = ""
    turn: int = 0
    """Chat workload: the user turn's index in its conversation (0 = first)."""


@dataclass(frozen=True)
class WorkloadRun:
    workload: str
    path: str
    requests: tuple[RequestResult, ...]
    wall_s: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def generated(self) -> int:
        return sum(r.metrics.generated_tokens for r in self.requests)

    @property
    def aggregate_tokens_per_s(self) -> float:
        """Output tokens per second: over the engine's own span where every request has one (from
        the first request scheduled to the last token, on the engine's clock: the app's delivery
        of outputs is not in it), else over the app's wall time."""
        spans = [r.metrics.engine_span for r in self.requests]
        if spans and all(span is not None for span in spans):
            first = min(span[0] for span in spans if span is not None)
            last = max(span[1] for span in spans if span is not None)
            if last > first:
                return self.generated / (last - first)
        return self.generated / self.wall_s if self.wall_s > 0 else 0.0

    def mean(self, read: Callable[[RequestResult], float | None], turns: str = "all") -> float | None:
        picked = [r for r in self.requests if turns == "all" or (turns == "later") == (r.turn > 0)]
        values = [v for v in (read(r) for r in picked) if v is not None]
        return sum(values) / len(values) if values else None

    @property
    def acceptance(self) -> float | None:
        return acceptance_of(self.requests)


def acceptance_of(requests: Iterable[RequestResult]) -> float | None:
    """Drafted tokens the target accepted, over ``requests`` (None where nothing was drafted)."""
    drafted = accepted = 0
    for r in requests:
        drafted += r.metrics.drafted_tokens or 0
        accepted += r.metrics.accepted_tokens or 0
    return accepted / drafted if drafted else None


@dataclass(frozen=True)
class BenchPrompt:
    id: str
    messages: tuple[ChatMessage, ...]
    multi_modal_data: dict[str, Any] = field(default_factory=dict)


def request_for(
    engine: Engine,
    prompt: BenchPrompt,
    max_tokens: int,
    *,
    ignore_eos: bool,
    tag: str = "",
    final_only: bool = False,
) -> EngineRequest:
    """``tag`` (the repetition) keeps request ids unique over a whole bench run."""
    rendered = engine.render(list(prompt.messages))
    return EngineRequest(
        request_id=f"bench-{tag}{prompt.id}",
        prompt=rendered.text,
        multi_modal_data=prompt.multi_modal_data,
        sampling=SamplingSettings(max_tokens=max_tokens, temperature=0.0, seed=0, ignore_eos=ignore_eos),
        final_only=final_only,
    )


async def collect(engine: Engine, request: EngineRequest, prompt_id: str, turn: int = 0) -> RequestResult:
    final: TurnEvent | None = None
    async for event in engine.stream(request):
        final = event
    if not isinstance(final, Finished):
        message = final.message if isinstance(final, Failed) else "the request did not finish"
        raise BenchRequestFailed(f"Benchmark request {request.request_id} failed: {message}")
    return RequestResult(prompt_id, final.token_ids, final.metrics, final.text, turn)


async def run_throughput(
    engine: Engine, path: str, prompts: Sequence[BenchPrompt], max_tokens: int, tick: Tick, tag: str = ""
) -> WorkloadRun:
    """All requests submitted at once, each answered once at its end (no per-token streaming):
    aggregate output tokens per second over the engine's own span (``aggregate_tokens_per_s``)."""
    requests = [
        (p.id, request_for(engine, p, max_tokens, ignore_eos=True, tag=tag, final_only=True)) for p in prompts
    ]

    async def one(prompt_id: str, request: EngineRequest) -> RequestResult:
        result = await collect(engine, request, prompt_id)
        tick()
        return result

    started = time.perf_counter()
    results = await asyncio.gather(*(one(pid, r) for pid, r in requests))
    return WorkloadRun("throughput", path, tuple(results), time.perf_counter() - started)


async def run_sequential(
    engine: Engine,
    path: str,
    workload: str,
    prompts: Sequence[BenchPrompt],
    max_tokens: int,
    tick: Tick,
    tag: str = "",
) -> WorkloadRun:
    """One request at a time (``single`` and ``media``): decode rate and time to first token."""
    results = []
    started = time.perf_counter()
    for prompt in prompts:
        request = request_for(engine, prompt, max_tokens, ignore_eos=True, tag=tag)
        results.append(await collect(engine, request, prompt.id))
        tick()
    return WorkloadRun(workload, path, tuple(results), time.perf_counter() - started)


async def run_chat(
    engine: Engine,
    path: str,
    conversations: Sequence[tuple[str, Sequence[str]]],
    max_tokens: int,
    tick: Tick,
    tag: str = "",
) -> WorkloadRun:
    """Conversations replayed turn by turn, each prompt holding the history so far."""
    results = []
    started = time.perf_counter()
    for conversation_id, turns in conversations:
        history: list[ChatMessage] = []
        for index, text in enumerate(turns):
            history.append(ChatMessage("user", text))
            prompt = BenchPrompt(f"{conversation_id}/{index + 1}", tuple(history))
            request = request_for(engine, prompt, max_tokens, ignore_eos=False, tag=tag)
            result = await collect(engine, request, prompt.id, index)
            history.append(ChatMessage("assistant", clean_text(result.text)))
            results.append(result)
            tick()
    return WorkloadRun("chat", path, tuple(results), time.perf_counter() - started)
