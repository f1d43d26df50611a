"""``VllmEngine``: vLLM's ``AsyncLLM`` in this process (its engine core runs in child processes).

Start-up runs in a worker thread so the caller's event loop (the TUI) stays responsive; starts are
serialized (each sets process-wide environment variables its children inherit). Every turn streams
``TurnEvent`` values; a dead engine core turns into one ``Failed`` event saying what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import psutil

from backend.compat.processes import early_core
from backend.compat.speculation.draft_schedule import METHOD as SET_DRAFTS
from backend.config import cache_json
from backend.engine import env as vllm_env
from backend.engine.cpu import footprints, processes
from backend.engine.local import start_env
from backend.engine.local.log import diagnose, tail
from backend.engine.local.sampling import sampling_params, vllm_prompt
from backend.engine.local.start_watch import end_all, watched
from backend.engine.metrics import MetricsTracker
from backend.engine.model.source import ModelSource
from backend.engine.paths import compile_cache
from backend.engine.paths.engine_args import EngineConfig
from backend.engine.platform import cpu_build
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
from backend.engine.speculation import when_idle
from backend.engine.speculation.reply_check import ReplyCheck
from backend.engine.stats import EngineStats, stat_logger_factory
from backend.errors import EngineDied, EngineStartFailed, GemmaChatError
from backend.gemma4.messages import ChatMessage, PromptRenderer, RenderedPrompt

_START_LOCK = threading.Lock()
DEAD_MESSAGE = processes.DEAD
_DEATH_POLL_S = 0.5
T = TypeVar("T")


class VllmEngine:
    """One engine path (one ``EngineConfig``) on one model; with no speculation choice kept for it,
    it measures one ``measure`` (at its start, when idle, or never: ``when_idle``)."""

    def __init__(
        self,
        source: ModelSource,
        config: EngineConfig,
        log_path: Path | None = None,
        measure: when_idle.Measure = when_idle.AT_START,
    ) -> None:
        self.source, self.config, self.log_path, self.measure = source, config, log_path, measure
        self.later: when_idle.IdleMeasurement | None = None
        self.info: EngineInfo | None = None
        self.stats = EngineStats()
        self._llm: Any = None
        self._cancelled: set[str] = set()
        self._dead = self._closing = False
        self._renderer: PromptRenderer | None = None
        self._building: set[int] | None = None
        """While a start runs: the child processes this process had before it (the start's own are new)."""
        self._early: early_core.Waiting | None = None
        """The engine core's interpreter, started early (``prestart``) and not yet taken."""
        self.early_start: str | None = None
        """What became of the last start's early engine-core interpreter (None: there was none)."""
        self._env_before: dict[str, str] | None = None
        """This start's environment before vLLM was imported, with the engine's own variables."""
        self.start_note: str | None = None
        """What the last start did beyond the ordinary (a cached graph set aside), for the user."""
        self.reply_check: ReplyCheck | None = None
        self._spawned: list[psutil.Process] = []
        self._oom_kills: int | None = None

    @property
    def started(self) -> bool:
        return self._llm is not None

    async def start(self, progress: ProgressCallback | None = None) -> EngineInfo:
        if self._llm is not None and self.info is not None:
            return self.info
        say = progress or (lambda _stage: None)
        self.start_note = None
        say("loading the model and warming up the engine")
        renderer: asyncio.Future[None] | None = None
        try:
            await asyncio.to_thread(self._imports)
            # The prompt renderer (the tokenizer) loads while the engine core starts: this process waits then.
            renderer = asyncio.ensure_future(asyncio.to_thread(self._load_renderer))
            self._llm = await watched(
                self._build_or_compile_afresh(say), self.log_path, self._started, self._abandon_start
            )
        except GemmaChatError:
            raise
        except Exception as error:  # vLLM raises many types; the log says which problem it was
            raise diagnose(error, tail(self.log_path, 20000), self.log_path) from None
        finally:
            if renderer is not None:
                await asyncio.wait({renderer})
        # vLLM asks its engine core for these on the first request, and that call waits forever if
        # the engine core has died in between: ask now, while it is known to be alive (cached after).
        await self._answer(self._llm.get_supported_tasks())
        model_config = self._llm.model_config
        await asyncio.to_thread(self._prompt_renderer)  # where loading it beside the start failed
        set_aside = cache_json.take_notices()  # cache files found broken while this path was planned
        if set_aside:
            self.start_note = " ".join(filter(None, [self.start_note, "Cache file " + " ".join(set_aside)]))
        self.info = EngineInfo(
            model=self.source.name,
            max_model_len=int(model_config.max_model_len),
            modalities=self.source.modalities(),
            engine_args=self.config.engine_kwargs(),
            environment=self.config.env_values(),
            start_note=self.start_note,
        )
        if self.config.drafts is not None:
            plan, prompts = self.config.drafts, self._prompt_renderer()
            self.info, self.reply_check, self.later = await when_idle.drafts_at_start(
                self, self._stream, self.info, plan, prompts, say, self.measure
            )
        footprints.remember(self.info.engine_args, self.config.path.name, self._spawned)
        say("ready")
        return self.info

    async def set_drafts(self, drafts: int, up_to: int, then: tuple[tuple[int, int], ...] = ()) -> None:
        """Steps of up to ``up_to`` running requests propose ``drafts`` drafts, then each further
        ``(up_to, drafts)`` of ``then``, none above (``draft_schedule``)."""
        if self._llm is not None:
            steps = [list(step) for step in then]
            call = self._llm.engine_core.call_utility_async(SET_DRAFTS, drafts, up_to, steps)
            await self._answer(call)

    def _imports(self) -> None:
        """The early engine core first (it imports beside this process), then vLLM, one thread at a time."""
        self.prestart()
        vllm_env.import_engine()

    async def _build_or_compile_afresh(self, say: Callable[[str], None]) -> Any:
        """Build the engine; once more, compiling afresh, where a cached graph failed to load."""
        llm, note = await compile_cache.built_or_compiled_afresh(
            self._build, self.log_path, lambda: self._closing, say
        )
        self.start_note = note or self.start_note
        return llm

    def _load_renderer(self) -> None:
        try:
            self._renderer = PromptRenderer.for_model(str(self.source.path))
        except Exception:  # loaded again after the start, where its error is reported
            self._renderer = None

    @property
    def _env_key(self) -> str:
        """A path in this environment (two checkouts share the cache but not their libraries' paths)."""
        return f"{sys.prefix}:{self.config.path.name}:{self.config.path.speculation}"

    def prestart(self) -> None:
        """On the CPU build, start the engine core's interpreter now, so it imports torch and vLLM
        beside this process (``backend.compat.processes.early_core``); call before importing vLLM. Nothing
        where vLLM does not spawn its engine core (the CUDA build), on a path's first start here
        (vLLM's own variables are learned from it), or with ``GEMMA_CHAT_EARLY_CORE=0``."""
        if self._env_before is not None or self._llm is not None or self._closing:
            return
        vllm_env.prepare()
        with _START_LOCK:  # not while another start has its variables (and vLLM's) in the environment
            environment = start_env.current()
        self._env_before = start_env.predicted(environment, self.config.env_values(), {})
        if early_core.turned_off() or not cpu_build():
            return
        changes = start_env.StartEnv().changes(self._env_key)
        if changes is None:
            return
        try:
            self._early = early_core.prestart(start_env.predicted(self._env_before, {}, changes))
        except OSError:
            self._early = None

    def _build(self) -> Any:
        self._imports()
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        with _START_LOCK:
            if self._closing:
                self._end_early()
                raise EngineStartFailed("The engine start was stopped (the app is quitting).")
            previous = vllm_env.apply_env(self.config.env_values())
            self._building = {p.pid for p in psutil.Process().children(recursive=True)}
            self._oom_kills = processes.oom_kills()
            before, self._env_before = self._env_before or start_env.current(), None
            early_core.offer(self._early)
            try:
                llm = AsyncLLM.from_engine_args(
                    AsyncEngineArgs(**self.config.engine_kwargs()),
                    stat_loggers=[stat_logger_factory(self.stats)],
                )
                self._spawned = processes.spawned(self._building)
            finally:
                spawned_with = early_core.withdraw()
                if spawned_with is not None:
                    start_env.StartEnv().record(self._env_key, start_env.changed(before, spawned_with))
                self._end_early()
                self._building = None
                vllm_env.restore_env(previous)
        if self._closing:  # shut down while it started: nobody will use it
            llm.shutdown()
            raise EngineStartFailed("The engine start was stopped (the app is quitting).")
        return llm

    def _end_early(self) -> None:
        """End an early interpreter vLLM did not take, saying in the engine log what became of it."""
        early, self._early = self._early, None
        if early is None:
            return
        early.end()
        self.early_start = "; ".join(early.said) or "not used: the start ended before vLLM spawned"
        with contextlib.suppress(OSError):  # fd 2: the engine log while an engine starts
            os.write(2, f"gemma-chat: early engine-core start: {self.early_start}\n".encode())

    def _started(self) -> list[psutil.Process]:
        """The processes the start under way spawned, its early engine core too (none without a start)."""
        early = {self._early.pid} if self._early is not None else set()
        return processes.spawned(self._building - early) if self._building is not None else []

    def _abandon_start(self) -> None:
        """End the processes a start in progress has spawned, so the start fails at once."""
        end_all(self._started())

    def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        """A reply: a speculation measurement running when idle yields the engine to it first."""
        return when_idle.reply(self._stream(request))

    async def measured_info(self) -> EngineInfo | None:
        """This engine's info once its measurement when idle has settled its drafts (None: none runs)."""
        if self.later is None or self.info is None:
            return None
        self.info, self.reply_check = await self.later.settled(self.info)
        return self.info

    async def _stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]:
        if self._llm is None:
            yield Failed(request.request_id, "The engine is not running; start it first.", "not_running")
            return
        if self.dead:
            yield Failed(request.request_id, self._death, "engine_died")
            return
        from vllm.v1.engine.exceptions import EngineDeadError

        rid = request.request_id
        tracker = MetricsTracker()
        text: list[str] = []
        token_ids: list[int] = []
        finish_reason = "stop"
        yield Started(rid)
        try:
            async for output in self._llm.generate(vllm_prompt(request), sampling_params(request), rid):
                completion = output.outputs[0]
                if completion.text or completion.token_ids:
                    text.append(completion.text)
                    token_ids.extend(completion.token_ids)
                    yield Delta(rid, completion.text, tuple(completion.token_ids))
                tracker.update(output)
                yield MetricsUpdate(rid, tracker.with_kv_cache_usage(self.stats.kv_cache_usage))
                if completion.finish_reason:
                    finish_reason = str(completion.finish_reason)
        except EngineDeadError:
            self._dead = True
            yield Failed(rid, self._death, "engine_died")
            return
        except asyncio.CancelledError:
            await self.abort(rid)
            raise
        except GemmaChatError as error:
            yield Failed(rid, str(error), "rejected")
            return
        except (ValueError, TypeError, RuntimeError) as error:  # bad input rejected by vLLM
            if self.dead:
                yield Failed(rid, self._death, "engine_died")
            else:
                yield Failed(rid, f"The engine rejected the request: {error}", "rejected")
            return
        metrics = tracker.latest
        if self.reply_check is not None:  # a predicted speculation choice, checked on the user's replies
            await self.reply_check.add(metrics, self)
        if rid in self._cancelled or finish_reason == "abort":
            self._cancelled.discard(rid)
            yield Cancelled(rid, "".join(text), tuple(token_ids), metrics)
        else:
            yield Finished(rid, "".join(text), tuple(token_ids), metrics, finish_reason)

    def _prompt_renderer(self) -> PromptRenderer:
        if self._renderer is None:
            self._renderer = PromptRenderer.for_model(str(self.source.path))
        return self._renderer

    def render(
        self, messages: list[ChatMessage], tools: list[dict[str, Any]] | None = None, *, think: bool = False
    ) -> RenderedPrompt:
        return self._prompt_renderer().render(messages, tools, think=think)

    def decode(self, token_ids: list[int]) -> str:
        return str(self._prompt_renderer().tokenizer.decode(token_ids))

    async def forget_cached_prompts(self) -> None:
        """Empty the prefix cache (and the media encoder's), so the next request is served cold."""
        if self._llm is None:
            return
        await self._answer(self._llm.reset_prefix_cache())
        await self._answer(self._llm.reset_encoder_cache())

    async def _answer(self, call: Awaitable[T]) -> T:
        """Await a call the engine core answers (a vLLM "utility" call), failing with ``EngineDied``
        if the core dies first: vLLM leaves such a call waiting forever when its core dies."""
        from vllm.v1.engine.exceptions import EngineDeadError

        task = asyncio.ensure_future(call)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=_DEATH_POLL_S)
                if not task.done() and self.dead:
                    raise EngineDied(self._death)
            return task.result()
        except EngineDeadError:
            self._dead = True
            raise EngineDied(self._death) from None
        finally:
            if not task.done():  # the core died, or our caller was cancelled
                task.cancel()

    @property
    def can_sleep(self) -> bool:
        """Started with vLLM's sleep mode (the memory plan swaps engines on a GPU)."""
        return bool(self.config.engine_kwargs().get("enable_sleep_mode"))

    async def sleep(self) -> None:
        """Level 1: weights to host memory, KV cache dropped; the GPU memory is free for another."""
        if self._llm is not None:
            await self._answer(self._llm.sleep(level=1))

    async def wake_up(self) -> None:
        if self._llm is not None:
            await self._answer(self._llm.wake_up())
            await self._answer(self._llm.reset_prefix_cache())  # its KV blocks were dropped asleep

    async def abort(self, request_id: str) -> None:
        if self._llm is None:
            return
        self._cancelled.add(request_id)
        await self._llm.abort(request_id)

    async def shutdown(self) -> None:
        """End the engine and its processes — also one still starting (its start then fails)."""
        if self.later is not None:
            self.later.cancel()
        if self._llm is None:
            self._closing = True
            self._abandon_start()
            if self._building is None:  # no start under way: one prestarted interpreter may wait
                self._end_early()
            return
        llm, self._llm = self._llm, None
        await asyncio.to_thread(llm.shutdown)
        llm.shutdown = lambda *args, **kwargs: None  # vLLM's __del__ would shut down again at exit
        del llm
        processes.release_memory()

    async def restart(self, progress: ProgressCallback | None = None) -> EngineInfo:
        """Start again after a crash (or on request), without restarting the app."""
        try:
            await self.shutdown()
        except Exception:  # a dead engine may fail to shut down cleanly; its processes are gone
            self._llm = None
        self.info, self._dead, self._closing = None, False, False
        return await self.start(progress)

    @property
    def _death(self) -> str:
        return processes.dead_message(self._oom_kills)

    @property
    def dead(self) -> bool:
        """True once the engine core has died (the next turn would fail)."""
        return self._llm is not None and (self._dead or bool(self._llm.errored))
