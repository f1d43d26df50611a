"""The engines of one app session, one per path, started on first use.

``EnginePool(factory)`` takes a factory ``path name -> Engine`` (the vLLM one in the app,
a fake in UI tests). ``ensure(name)`` starts that path's engine once — concurrent callers
wait for the same start — and warms it up (backend.engine.session.warmup) before handing it out, so the
first turn a person sees timed runs on a warm engine. It reports each change of state to the
listeners, which is how the UI shows "starting 12s of ~35s" (the last start's duration,
backend.engine.session.start_history), "ready" or the failure in one sentence.

``swapping`` (a callable asked once, off the event loop: the memory plan may need the model
resolved) puts the pool in swap mode, where one engine at a time is on the device
(``backend.engine.session.swap``): states then also read ``asleep`` or ``stopped`` for the swapped-out path.

An engine that measures its speculation when idle (``backend.engine.speculation.when_idle``: the
optimized CPU path's first start on this machine) is ready, and handed out, before it has: once it
has, the pool reports it ready again with its new info (detail ``SETTLED``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from backend.engine.protocol import Engine, EngineInfo, PathEngine
from backend.engine.session.start_history import StartHistory
from backend.engine.session.swap import ResidentEngine, Swapper
from backend.engine.session.warmup import warm_up
from backend.errors import GemmaChatError

EngineFactory = Callable[[str], Engine]
SETTLED = "speculation measured when idle"
"""The detail of a ready state that follows the engine's measurement when idle: its info names the choice."""


@dataclass(frozen=True)
class EngineState:
    path: str
    stage: str
    """``starting``, ``ready``, ``failed``, ``stopped`` or (swap mode) ``asleep``."""
    detail: str = ""
    started_at: float | None = None
    info: EngineInfo | None = None
    expected_s: float | None = None
    """How long this engine's last start took (backend.engine.session.start_history), while it starts."""

    @property
    def ready(self) -> bool:
        return self.stage == "ready"

    def elapsed_label(self, now: float) -> str:
        """``starting 12s``, and ``of ~35s`` where the last start's duration is known."""
        elapsed = f"starting {now - (self.started_at or now):.0f}s"
        return f"{elapsed} of ~{self.expected_s:.0f}s" if self.expected_s else elapsed


Listener = Callable[[EngineState], None]


class EnginePool:
    def __init__(
        self,
        factory: EngineFactory,
        swapping: Callable[[], bool] | None = None,
        model: str = "",
        history: StartHistory | None = None,
    ) -> None:
        self.factory = factory
        self.model = model
        self.history = history or StartHistory()
        self._engines: dict[str, Engine] = {}
        self._starts: dict[str, asyncio.Future[EngineInfo]] = {}
        self._later: dict[str, asyncio.Task[None]] = {}
        """Per path: waiting for its engine's speculation measured when idle (``when_idle``)."""
        self.states: dict[str, EngineState] = {}
        self._listeners: list[Listener] = []
        self._swapping = swapping
        self.swapper: Swapper | None = None
        """Set once swap mode is known to be on (after the first ``ensure``)."""

    async def swaps(self) -> bool:
        """Whether this pool swaps engines (asked once)."""
        if self._swapping is not None:
            decide, self._swapping = self._swapping, None
            if await asyncio.to_thread(decide):
                self.swapper = Swapper(self._engines, self._started, self._forget_start, self._say)
        return self.swapper is not None

    def _say(self, path: str, stage: str, detail: str) -> None:
        info = self.swapper.infos.get(path) if self.swapper is not None and stage == "ready" else None
        self._set(EngineState(path, stage, detail, time.monotonic(), info))

    def _forget_start(self, path: str) -> None:
        self._starts.pop(path, None)

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _set(self, state: EngineState) -> None:
        self.states[state.path] = state
        for listener in self._listeners:
            listener(state)

    def engine(self, path: str) -> Engine | None:
        """``path``'s engine, if this pool made one."""
        return self._engines.get(path)

    def state(self, path: str) -> EngineState:
        return self.states.get(path, EngineState(path, "stopped"))

    async def ensure(self, path: str) -> PathEngine:
        """The running engine for ``path``; starts it (once) if needed. Raises GemmaChatError.

        In swap mode: an engine that has started before is handed out as it is (it swaps itself in
        for its next request); one that never started is swapped in now."""
        swapper = self.swapper if await self.swaps() else None
        if swapper is not None:
            engine = self._engines.setdefault(path, self.factory(path))
            info = swapper.infos.get(path)
            if info is None:
                async with swapper.lock:
                    info = await swapper.make_resident(path)
            return PathEngine(path, ResidentEngine(swapper, path, engine), info, renderer=engine)
        return await self._started_path(path)

    async def _started(self, path: str) -> EngineInfo:
        return (await self._started_path(path)).info

    async def _started_path(self, path: str) -> PathEngine:
        task = self._starts.get(path)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            engine = self._engines.setdefault(path, self.factory(path))
            task = asyncio.ensure_future(self._start(path, engine))
            self._starts[path] = task
        info = await asyncio.shield(task)
        return PathEngine(path, self._engines[path], info)

    async def _start(self, path: str, engine: Engine) -> EngineInfo:
        began = time.monotonic()
        key = f"{self.model}:{path}"
        expected = self.history.expected_s(key)
        self._set(EngineState(path, "starting", "starting the engine", began, expected_s=expected))

        def progress(stage: str) -> None:
            if stage != "ready":
                self._set(EngineState(path, "starting", stage, began, expected_s=expected))

        try:
            info = await engine.start(progress)
            progress("warming up")
            await warm_up(engine)  # the first timed turn runs on a warm engine
        except GemmaChatError as error:
            self._set(EngineState(path, "failed", str(error), began))
            raise
        except Exception as error:  # an unexpected failure still becomes one sentence
            self._set(EngineState(path, "failed", f"The engine failed to start: {error}", began))
            raise GemmaChatError(f"The engine failed to start: {error}") from error
        took = time.monotonic() - began
        self.history.record(key, took)
        self._set(EngineState(path, "ready", f"ready in {took:.0f} s", began, info))
        later = getattr(engine, "measured_info", None)
        if later is not None:
            self._later[path] = asyncio.ensure_future(self._settled(path, engine, later, began))
        return info

    async def _settled(
        self, path: str, engine: Engine, later: Callable[[], Awaitable[EngineInfo | None]], began: float
    ) -> None:
        """Once the engine's speculation measured when idle is applied: its new info, said (``SETTLED``)."""
        try:
            info = await later()
        except GemmaChatError:
            return
        if info is None or self._engines.get(path) is not engine:
            return
        done: asyncio.Future[EngineInfo] = asyncio.get_running_loop().create_future()
        done.set_result(info)
        self._starts[path] = done  # what ensure hands out from now on
        if self.swapper is not None and path in self.swapper.infos:
            self.swapper.infos[path] = info
        self._set(EngineState(path, "ready", SETTLED, began, info))

    async def discard(self, path: str, message: str) -> None:
        """Drop an engine that died mid-turn (state ``failed``); the next ``ensure`` starts a new one."""
        engine = self._engines.pop(path, None)
        self._starts.pop(path, None)
        waiting = self._later.pop(path, None)
        if waiting is not None:
            waiting.cancel()
        if self.swapper is not None:
            self.swapper.forget(path)
        if engine is not None:
            with contextlib.suppress(Exception):  # a dead engine may not shut down cleanly
                await engine.shutdown()
        self._set(EngineState(path, "failed", message))

    async def shutdown(self) -> None:
        tasks: list[asyncio.Future[Any]] = [*self._starts.values(), *self._later.values()]
        for task in tasks:
            if not task.done():
                task.cancel()
        self._later.clear()
        for path, engine in list(self._engines.items()):
            try:
                await engine.shutdown()
            finally:
                self._set(EngineState(path, "stopped"))
        self._engines.clear()
        self._starts.clear()
