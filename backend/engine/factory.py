"""From settings to an unstarted engine: resolve the model, pick the profile, build its config."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from backend import paths
from backend.engine.model_source import ModelSource, resolve
from backend.engine.profiles import EngineProfile, engine_config
from backend.engine.protocol import EngineInfo, EngineRequest, Failed, ProgressCallback, TurnEvent
from backend.engine.remote import RemoteEngine
from backend.engine.vllm import VllmEngine
from backend.errors import EngineStartFailed
from backend.messages import ChatMessage, RenderedPrompt
from backend.settings import Settings


def new_log_path(tag: str) -> Path:
    return paths.logs_dir() / f"engine-{time.strftime('%Y%m%d-%H%M%S')}-{tag}.log"


def resolve_model(settings: Settings) -> ModelSource:
    return resolve(settings.model, demo=settings.demo)


def server_for(settings: Settings, profile: str) -> str | None:
    """The vLLM server that serves ``profile``, if one is configured (else it runs in process)."""
    return settings.baseline_server if profile == "baseline" else settings.server


def remote_engine(settings: Settings, url: str, profile: str) -> RemoteEngine:
    """A server's engine; the chat template comes from the local model (or the served path)."""
    from backend.engine.model_source import resolve

    tokenizer: Path | None = None
    if settings.demo:
        tokenizer = resolve(settings.model, demo=True).path
    elif Path(settings.model).expanduser().is_dir():
        tokenizer = Path(settings.model).expanduser()
    return RemoteEngine(url, tokenizer, settings.api_key, profile)


def engine_for(
    settings: Settings, profile: str, engines_sharing_gpu: int = 2, log_path: Path | None = None
) -> DeferredEngine | RemoteEngine:
    """The app's engine for ``profile``: on its server where one is set, else in this process."""
    url = server_for(settings, profile)
    if url:
        return remote_engine(settings, url, profile)
    return DeferredEngine(settings, profile, engines_sharing_gpu, log_path)


def make_engine(
    settings: Settings,
    source: ModelSource,
    profile: str | None = None,
    engines_sharing_gpu: int = 1,
    log_path: Path | None = None,
) -> VllmEngine:
    chosen = EngineProfile.named(profile or settings.profile)
    config = engine_config(chosen, source, settings.engine, engines_sharing_gpu)
    return VllmEngine(source, config, log_path=log_path or new_log_path(chosen.name))


class DeferredEngine:
    """An engine whose model is resolved (maybe downloaded) when it starts, off the event loop."""

    def __init__(
        self, settings: Settings, profile: str, engines_sharing_gpu: int = 2, log_path: Path | None = None
    ) -> None:
        self.settings = settings
        self.profile = profile
        self.engines_sharing_gpu = engines_sharing_gpu
        self.log_path = log_path
        self.inner: VllmEngine | None = None

    async def start(self, progress: ProgressCallback | None = None) -> EngineInfo:
        if self.inner is None:
            if progress:
                progress("finding the model")
            source = await asyncio.to_thread(resolve_model, self.settings)
            self.inner = make_engine(
                self.settings, source, self.profile, self.engines_sharing_gpu, self.log_path
            )
        return await self.inner.start(progress)

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

    async def shutdown(self) -> None:
        if self.inner is not None:
            await self.inner.shutdown()

    def render(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]] | None = None, *, think: bool = False
    ) -> RenderedPrompt:
        return self._engine().render(messages, tools, think=think)

    def decode(self, token_ids: list[int]) -> str:
        return self._engine().decode(token_ids)
