"""From settings to an unstarted engine: resolve the model, pick the path, build its config."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from backend.config import locations
from backend.config.settings import Settings
from backend.engine.cpu.host_plan import HostPlan
from backend.engine.gpu.memory_plan import MemoryPlan
from backend.engine.local.vllm import VllmEngine
from backend.engine.model.source import ModelSource, resolve
from backend.engine.paths import compile_cache
from backend.engine.paths.engine_args import EnginePath, engine_config
from backend.engine.paths.placement import host_plan_for, plan_for
from backend.engine.protocol import EngineInfo, EngineRequest, Failed, ProgressCallback, TurnEvent
from backend.engine.remote.engine import RemoteEngine
from backend.engine.speculation.when_idle import AT_START, WHEN_IDLE, Measure
from backend.errors import EngineStartFailed, GemmaChatError
from backend.gemma4.messages import ChatMessage, RenderedPrompt


def new_log_path(tag: str) -> Path:
    return locations.logs_dir() / f"engine-{time.strftime('%Y%m%d-%H%M%S')}-{tag}.log"


def resolve_model(settings: Settings) -> ModelSource:
    return resolve(settings.model, demo=settings.demo, drafter=settings.engine.drafter)


class EngineSetup:
    """The model, its drafter and the memory plan of one app session — the GPU's, or on the CPU
    build the host's (``host``) — found once, before any engine starts (off the event loop: it may
    download). Raises the refusals up front."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._found: tuple[ModelSource, MemoryPlan | None] | None = None
        self.host: HostPlan | None = None

    def resolved(self) -> tuple[ModelSource, MemoryPlan | None]:
        with self._lock:
            if self._found is None:
                compile_cache.check_cache_folders()  # a path the compiler step cannot take: now
                source = resolve_model(self.settings)
                plan = plan_for(source, self.settings.engine)
                if plan is None:
                    self.host = host_plan_for(source, self.settings.engine)
                self._found = (source, plan)
            return self._found

    def swaps(self) -> bool:
        """Whether F2 and compare swap engines: forced by settings, or the GPU holds only one."""
        if self.settings.server or self.settings.baseline_server:
            return False
        if self.settings.engine.both_paths != "auto":
            return self.settings.engine.both_paths == "swap"
        try:
            plan = self.resolved()[1]
        except GemmaChatError:
            return False  # the engine's start fails with the same message, where the user sees it
        if plan is None:
            return self.host is not None and self.host.swaps
        return plan.mode == "swap"


def server_for(settings: Settings, path: str) -> str | None:
    """The vLLM server that serves ``path``, if one is configured (else it runs in process)."""
    return settings.baseline_server if path == "baseline" else settings.server


def remote_engine(settings: Settings, url: str, path: str) -> RemoteEngine:
    """A server's engine; the chat template comes from the local model (or the served path)."""
    from backend.engine.model.source import DEFAULT_MODEL, resolve

    tokenizer: Path | None = None
    problem = ""
    given = Path(settings.model).expanduser()
    if settings.demo:
        tokenizer = resolve(settings.model, demo=True).path
    elif given.is_dir():
        tokenizer = given
    elif os.path.lexists(given):  # a file, a dangling link, a link loop
        what = "a broken link" if given.is_symlink() else "a file"
        problem = f"--model {settings.model} is {what}, not a folder."
    elif settings.model != DEFAULT_MODEL:
        problem = f"--model {settings.model} is no folder on this machine."
    return RemoteEngine(url, tokenizer, settings.api_key, path, model_problem=problem)


def engine_for(
    settings: Settings, path: str, log_path: Path | None = None, setup: EngineSetup | None = None
) -> DeferredEngine | RemoteEngine:
    """The app's engine for ``path``: on its server where one is set, else in this process,
    sized by the session's memory plan (``setup``; one of its own where none is given)."""
    url = server_for(settings, path)
    if url:
        return remote_engine(settings, url, path)
    return DeferredEngine(settings, path, log_path, setup)


def make_engine(
    settings: Settings,
    source: ModelSource,
    path: str | None = None,
    engines_sharing_gpu: int = 1,
    log_path: Path | None = None,
    plan: MemoryPlan | None = None,
    measure: Measure = AT_START,
) -> VllmEngine:
    """``measure``: when an optimized CPU engine with no speculation choice kept measures one."""
    chosen = EnginePath.named(path or settings.path)
    config = engine_config(chosen, source, settings.engine, engines_sharing_gpu, plan)
    return VllmEngine(source, config, log_path=log_path or new_log_path(chosen.name), measure=measure)


class DeferredEngine:
    """An engine whose model is resolved (maybe downloaded) when it starts, off the event loop: the
    app's, so it answers at once and measures its speculation when idle (``when_idle``)."""

    def __init__(
        self,
        settings: Settings,
        path: str,
        log_path: Path | None = None,
        setup: EngineSetup | None = None,
    ) -> None:
        self.settings = settings
        self.path = path
        self.log_path = log_path
        self.setup = setup or EngineSetup(settings)
        self.inner: VllmEngine | None = None

    async def start(self, progress: ProgressCallback | None = None) -> EngineInfo:
        if self.inner is None:
            if progress:
                progress("finding the model")
            source, plan = await asyncio.to_thread(self.setup.resolved)
            self.inner = make_engine(self.settings, source, self.path, 1, self.log_path, plan, WHEN_IDLE)
        return await self.inner.start(progress)

    async def measured_info(self) -> EngineInfo | None:
        """The engine's info once its speculation measured when idle is applied (None: none runs)."""
        return await self.inner.measured_info() if self.inner is not None else None

    def _engine(self) -> VllmEngine:
        if self.inner is None:
            raise EngineStartFailed("The engine has not started yet.", "Wait for 'ready' in the status bar.")
        return self.inner

    async def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        if self.inner is None:
            yield Failed(request.request_id, "The engine has not started yet.", "not_running")
            return
        async for event in self.inner.stream(request):
            yield event

    async def abort(self, request_id: str) -> None:
        if self.inner is not None:
            await self.inner.abort(request_id)

    @property
    def can_sleep(self) -> bool:
        return self.inner is not None and self.inner.can_sleep

    async def sleep(self) -> None:
        await self._engine().sleep()

    async def wake_up(self) -> None:
        await self._engine().wake_up()

    async def shutdown(self) -> None:
        if self.inner is not None:
            await self.inner.shutdown()

    def render(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]] | None = None, *, think: bool = False
    ) -> RenderedPrompt:
        return self._engine().render(messages, tools, think=think)

    def decode(self, token_ids: list[int]) -> str:
        return self._engine().decode(token_ids)
