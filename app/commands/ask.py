"""``gemma-chat ask``: one prompt, streamed to stdout, then one line of figures from the engine.

With ``--profile compare`` the prompt runs on the baseline and then on the optimized path,
and a last line gives the speed-up and the token-parity verdict.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from typing import Any, TextIO

from backend.chat import ChatMessage, PromptRenderer
from backend.compare import CompareResult, compare_stream
from backend.engine import (
    Cancelled,
    Delta,
    EngineInfo,
    EngineRequest,
    Failed,
    Finished,
    SamplingSettings,
    Started,
    TurnEvent,
)
from backend.engine_factory import make_engine, resolve_model
from backend.engine_log import capture_stderr
from backend.errors import GemmaChatError, PromptTooLong
from backend.media.images import load_image
from backend.settings import Settings, load_settings
from backend.vllm_engine import VllmEngine

COMPARE = "compare"


def settings_from_args(args: argparse.Namespace) -> Settings:
    return load_settings(
        model=args.model,
        demo=args.demo,
        profile=None if args.profile == COMPARE else args.profile,
        max_model_len=args.max_model_len,
        dtype=args.dtype,
        kv_cache_gib=args.kv_cache_gib,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )


def run_ask(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    images = [load_image(path) for path in args.attach]  # validate before starting anything
    source = resolve_model(settings)
    profiles = ["baseline", "optimized"] if args.profile == COMPARE else [settings.profile]
    engines = [make_engine(settings, source, name, engines_sharing_gpu=len(profiles)) for name in profiles]
    messages = [ChatMessage("system", args.system)] if args.system else []
    messages.append(ChatMessage("user", args.prompt, media=tuple("image" for _ in images)))
    log_path = engines[0].log_path
    assert log_path is not None
    with capture_stderr(log_path) as console:
        return asyncio.run(_ask(engines, messages, images, args, console))


def _check_fits(prompt_tokens: int, max_tokens: int, info: EngineInfo) -> None:
    if prompt_tokens + max_tokens > info.max_model_len:
        raise PromptTooLong(
            f"The prompt ({prompt_tokens} tokens) plus the reply budget ({max_tokens}) "
            f"exceeds the context window ({info.max_model_len} tokens).",
            "Shorten the prompt, lower --max-tokens, or raise --max-model-len.",
        )


async def _ask(
    engines: list[VllmEngine],
    messages: list[ChatMessage],
    images: list[Any],
    args: argparse.Namespace,
    console: TextIO,
) -> int:
    def progress(stage: str) -> None:
        console.write(f"gemma-chat: {stage}\n")

    try:
        for engine in engines:
            progress(f"starting the {engine.config.profile.name} engine on {engine.source.name}…")
            info = await engine.start(progress)
        renderer = PromptRenderer.for_model(str(engines[0].source.path))
        prompt = renderer.render(messages)
        _check_fits(prompt.token_count, args.max_tokens, info)
        request = EngineRequest(
            request_id=f"ask-{uuid.uuid4().hex[:8]}",
            prompt=prompt.text,
            multi_modal_data={"image": images} if images else {},
            sampling=SamplingSettings(max_tokens=args.max_tokens, temperature=args.temperature),
        )
        if len(engines) == 2:
            return await _compare(engines[0], engines[1], request, renderer, console)
        return await _single(engines[0], request, console)
    except GemmaChatError as error:
        console.write(f"gemma-chat: {error.problem}\n")
        if error.fix:
            console.write(f"  fix: {error.fix}\n")
        return 2
    finally:
        for engine in engines:
            await engine.shutdown()


def _print_event(path: str, event: TurnEvent, console: TextIO) -> int | None:
    """Print one event; return an exit code once the turn has ended."""
    if isinstance(event, Delta):
        sys.stdout.write(event.text)
        sys.stdout.flush()
    elif isinstance(event, Finished | Cancelled):
        sys.stdout.write(f"\n── {path}: {event.metrics.summary_line()}\n")
        return 0
    elif isinstance(event, Failed):
        console.write(f"\ngemma-chat: {event.message}\n")
        return 1
    return None


async def _single(engine: VllmEngine, request: EngineRequest, console: TextIO) -> int:
    async for event in engine.stream(request):
        code = _print_event(engine.config.profile.name, event, console)
        if code is not None:
            return code
    return 1


async def _compare(
    baseline: VllmEngine,
    optimized: VllmEngine,
    request: EngineRequest,
    renderer: PromptRenderer,
    console: TextIO,
) -> int:
    async for item in compare_stream(baseline, optimized, request, lambda t: renderer.tokenizer.decode([t])):
        if isinstance(item, CompareResult):
            sys.stdout.write(f"── compare: {item.summary()}\n")
            return 0
        if isinstance(item.event, Started):
            sys.stdout.write(f"── {item.path}:\n")
        if _print_event(item.path, item.event, console) == 1:
            return 1
    return 1
