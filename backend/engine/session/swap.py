"""Both paths on a GPU that holds one engine: one engine resident at a time, swapped on demand.

In swap mode (``engine.both_paths = "swap"``, or the memory plan found room for one engine only)
the pool hands out each path's engine behind ``ResidentEngine``: a request first makes its path's
engine the resident one — the other is put to sleep (vLLM's sleep mode: weights to host memory,
KV cache dropped; where the engine was started with it) or stopped — and holds the GPU until its
last event. Turns and the two halves of a compare therefore never overlap, and the swap happens
before the request reaches the engine, so no figure of the turn includes it (the engine's own
clock starts at the request).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from backend.engine.protocol import (
    Cancelled,
    EngineInfo,
    EngineRequest,
    Failed,
    Finished,
    ProgressCallback,
    TurnEvent,
)
from backend.errors import GemmaChatError
from backend.gemma4.messages import ChatMessage, RenderedPrompt

if TYPE_CHECKING:
    from backend.engine.protocol import Engine


def path_note(path: str, engine_args: dict[str, Any], swapping: bool, speculation: str | None = None) -> str:
    """What the status bar says beside a ready engine: swap mode, the speculation its start measured
    (``MTP ×3, measured 1.31x here``, ``no speculation: verifying …``), and an optimized GPU path
    that runs without speculation because no drafter was found."""
    notes = ["swap mode"] if swapping else []
    if speculation:
        notes.append(speculation.split(" (")[0] if not speculation.startswith("no ") else speculation)
    on_gpu = "gpu_memory_utilization" in engine_args
    if path == "optimized" and on_gpu and "speculative_config" not in engine_args:
        notes.append("no drafter: no speculation (gemma-chat paths)")
    return "; ".join(notes)


def can_sleep(engine: object) -> bool:
    return bool(getattr(engine, "can_sleep", False))


class Swapper:
    """Which path's engine is on the device, and the swaps between them.

    ``start(path)`` is the pool's own start (state changes included); ``say(path, stage,
    detail)`` reports a swap's stage to the pool's listeners."""

    def __init__(
        self,
        engines: dict[str, Engine],
        start: Callable[[str], Any],
        forget_start: Callable[[str], None],
        say: Callable[[str, str, str], None],
    ) -> None:
        self.engines = engines
        self._start = start
        self._forget_start = forget_start
        self._say = say
        self.lock = asyncio.Lock()
        self.resident: str | None = None
        self.asleep: set[str] = set()
        self.infos: dict[str, EngineInfo] = {}
        self.activity: str | None = None
        """What a swap in progress does, short enough for the status bar (``stopping optimized``,
        ``starting baseline``, ``optimized to sleep``, ``waking baseline``), else None."""

    async def make_resident(self, path: str) -> EngineInfo:
        """``path``'s engine up and alone on the device. Call with ``lock`` held."""
        previous = self.resident
        if previous == path and path in self.infos:
            return self.infos[path]
        try:
            if previous is not None and previous != path:
                await self._swap_out(previous, path)
            self.resident = None
            if path in self.asleep:
                self.activity = f"waking {path}"
                self._say(path, "starting", "waking from sleep")
                await self.engines[path].wake_up()  # type: ignore[attr-defined]
                self.asleep.discard(path)
            else:
                self.activity = f"starting {path}"
                self.infos[path] = await self._start(path)
            self.resident = path
        finally:
            self.activity = None
        self._say(path, "ready", "swapped in")  # after the activity ends: the status bar moves on
        return self.infos[path]

    async def _swap_out(self, previous: str, path: str) -> None:
        engine = self.engines.get(previous)
        if engine is None:
            return
        if can_sleep(engine):
            self.activity = f"{previous} to sleep"
            await engine.sleep()  # type: ignore[attr-defined]
            self.asleep.add(previous)
            self._say(previous, "asleep", f"asleep: swapped out for {path}")
        else:
            self.activity = f"stopping {previous}"
            await engine.shutdown()
            self._forget_start(previous)
            self._say(previous, "stopped", f"stopped: swapped out for {path}")

    def forget(self, path: str) -> None:
        """A discarded engine (it died): nothing of it is resident, asleep or known."""
        if self.resident == path:
            self.resident = None
        self.asleep.discard(path)
        self.infos.pop(path, None)


class ResidentEngine:
    """A path's engine that makes itself resident for each request (see the module's docstring)."""

    def __init__(self, swapper: Swapper, path: str, engine: Engine) -> None:
        self.swapper = swapper
        self.path = path
        self.engine = engine

    async def start(self, progress: ProgressCallback | None = None) -> EngineInfo:
        async with self.swapper.lock:
            return await self.swapper.make_resident(self.path)

    async def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        lock = self.swapper.lock
        await lock.acquire()
        held = True
        try:
            try:
                await self.swapper.make_resident(self.path)
            except GemmaChatError as error:
                yield Failed(
                    request.request_id,
                    f"Swapping to the {self.path} engine failed: {error}",
                    "not_running",
                )
                return
            async for event in self.engine.stream(request):
                if isinstance(event, Finished | Cancelled | Failed) and held:
                    lock.release()  # the request is over: a consumer that stops reading here frees the GPU
                    held = False
                yield event
        finally:
            if held:
                lock.release()

    async def abort(self, request_id: str) -> None:
        await self.engine.abort(request_id)

    async def shutdown(self) -> None:
        await self.engine.shutdown()

    def render(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]] | None = None, *, think: bool = False
    ) -> RenderedPrompt:
        return self.engine.render(messages, tools, think=think)  # the Engine protocol's; turns use .prompts

    def decode(self, token_ids: list[int]) -> str:
        return self.engine.decode(token_ids)


def prompts_of(engine: Engine) -> Engine:
    """What renders ``engine``'s prompts: the engine a ``ResidentEngine`` wraps, else the engine
    itself (``PathEngine.renderer``)."""
    return engine.engine if isinstance(engine, ResidentEngine) else engine


def info_before_start(engine: object) -> EngineInfo | None:
    """What an in-process engine will say of itself once started, as far as its configuration
    fixes it — its window, the model's modalities, its arguments and environment (not what only a
    start tells: its speculation, a note): a swapped compare checks the turn against it before
    that path's engine is swapped in. None for another kind of engine."""
    from backend.engine.local.vllm import VllmEngine

    if not isinstance(engine, VllmEngine) or "max_model_len" not in engine.config.args:
        return None
    config = engine.config
    return EngineInfo(
        model=engine.source.name,
        max_model_len=int(config.args["max_model_len"].value),
        modalities=engine.source.modalities(),
        engine_args=config.engine_kwargs(),
        environment=config.env_values(),
    )
