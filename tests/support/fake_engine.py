"""A fake engine for UI-flow tests: the same TurnEvents as VllmEngine, with made-up figures.

Every flow driven with it also has a real-engine test (tests/app/test_app_entry.py,
tests/app/test_first_run.py and the engine tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from backend.engine.metrics import TurnMetrics
from backend.engine.protocol import (
    Cancelled,
    Delta,
    EngineInfo,
    EngineRequest,
    Failed,
    Finished,
    MetricsUpdate,
    ProgressCallback,
    Started,
    TurnEvent,
)
from backend.engine.session.warmup import WARM_UP_PREFIX
from backend.gemma4.messages import ChatMessage, RenderedPrompt


@dataclass
class FakeEngine:
    path: str
    reply: str = "Hello from the fake engine.\n\n```python\nprint('hi')\n```"
    delay_s: float = 0.01
    start_delay_s: float = 0.0
    fail_start: str | None = None
    die_on_turn: bool = False
    max_model_len: int = 4096
    modalities: frozenset[str] = frozenset({"text", "image", "audio", "video"})
    started: bool = False
    aborted: set[str] = field(default_factory=set)
    requests: list[EngineRequest] = field(default_factory=list)
    script: list[str] = field(default_factory=list)
    """Replies for the next turns, in order (then ``reply``): tool-call flows script the model."""
    warm_ups: list[EngineRequest] = field(default_factory=list)
    """Warm-up requests (``session.warmup``): kept apart from ``requests``, no scripted reply used."""

    async def start(self, progress: ProgressCallback | None = None) -> EngineInfo:
        if progress:
            progress("loading the model")
        await asyncio.sleep(self.start_delay_s)
        if self.fail_start:
            from backend.errors import EngineStartFailed

            raise EngineStartFailed(self.fail_start)
        self.started = True
        return EngineInfo(f"fake-{self.path}", self.max_model_len, self.modalities, {"path": self.path})

    def render(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]] | None = None, *, think: bool = False
    ) -> RenderedPrompt:
        declared = "".join(f"<tool:{t['function']['name']}>" for t in tools or [])
        thinking = "<|think|>" if think else ""
        text = thinking + "".join(f"<{m.role}>{m.text}{m.data or ''}" for m in messages) + declared
        return RenderedPrompt(text=text, token_count=len(text.split()) + 2)

    def decode(self, token_ids: list[int]) -> str:
        return " ".join(self.reply.split()[t % len(self.reply.split())] for t in token_ids)

    async def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        rid = request.request_id
        if rid.startswith(WARM_UP_PREFIX):
            self.warm_ups.append(request)
            yield Started(rid)
            yield Finished(rid, "hello", (0,), self._metrics(request, 1), "length")
            return
        self.requests.append(request)
        yield Started(rid)
        if self.die_on_turn:
            yield Failed(rid, "The fake engine died.", "engine_died")
            return
        reply = self.script.pop(0) if self.script else self.reply
        words = reply.split(" ")[: request.sampling.max_tokens]
        text, ids = "", list[int]()
        for index, word in enumerate(words):
            await asyncio.sleep(self.delay_s)
            if rid in self.aborted:
                yield Cancelled(rid, text, tuple(ids), self._metrics(request, len(ids)))
                return
            piece = word if index == 0 else " " + word
            text += piece
            ids.append(index)
            yield Delta(rid, piece, (index,))
            yield MetricsUpdate(rid, self._metrics(request, len(ids)))
        yield Finished(rid, text, tuple(ids), self._metrics(request, len(ids)), "stop")

    def _metrics(self, request: EngineRequest, generated: int) -> TurnMetrics:
        speed = 40.0 if self.path == "baseline" else 100.0
        # the optimized path's steps as the engine reports them: the first token alone, then one
        # accepted draft and the target's token a step (half its drafts accepted)
        steps = (1, *[2] * ((generated - 1) // 2), *[1] * ((generated - 1) % 2)) if generated else ()
        accepted = sum(size - 1 for size in steps)
        return TurnMetrics(
            prompt_tokens=len(request.prompt.split()) + 2,
            generated_tokens=generated,
            ttft_s=0.05,
            prefill_tokens_per_s=500.0,
            decode_tokens_per_s=speed,
            rolling_decode_tokens_per_s=speed,
            e2e_s=0.05 + generated / speed,
            drafted_tokens=accepted * 2 if self.path == "optimized" else None,
            accepted_tokens=accepted if self.path == "optimized" else None,
            kv_cache_usage=0.01,
            step_tokens=tuple((size, size - 1) for size in steps) if self.path == "optimized" else None,
        )

    async def abort(self, request_id: str) -> None:
        self.aborted.add(request_id)

    async def shutdown(self) -> None:
        self.started = False
