"""``gemma-chat ask``: one prompt, streamed to stdout, then one line of figures from the engine."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from typing import TextIO

from backend.chat import ChatMessage, PromptRenderer
from backend.engine import Cancelled, Delta, EngineRequest, Failed, Finished, SamplingSettings
from backend.engine_factory import make_engine, resolve_model
from backend.engine_log import capture_stderr
from backend.errors import GemmaChatError, PromptTooLong
from backend.media.images import load_image
from backend.settings import Settings, load_settings
from backend.vllm_engine import VllmEngine


def settings_from_args(args: argparse.Namespace) -> Settings:
    return load_settings(
        model=args.model,
        demo=args.demo,
        profile=args.profile,
        max_model_len=args.max_model_len,
        dtype=args.dtype,
        kv_cache_gib=args.kv_cache_gib,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )


def run_ask(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    images = [load_image(path) for path in args.attach]  # validate before starting anything
    source = resolve_model(settings)
    engine = make_engine(settings, source)
    messages = [ChatMessage("system", args.system)] if args.system else []
    messages.append(ChatMessage("user", args.prompt, media=tuple("image" for _ in images)))
    assert engine.log_path is not None
    with capture_stderr(engine.log_path) as console:
        return asyncio.run(_ask(engine, messages, images, args, console))


async def _ask(
    engine: VllmEngine,
    messages: list[ChatMessage],
    images: list[object],
    args: argparse.Namespace,
    console: TextIO,
) -> int:
    console.write(f"gemma-chat: starting the {engine.config.profile.name} engine on {engine.source.name}…\n")
    try:

        def progress(stage: str) -> None:
            console.write(f"gemma-chat: {stage}\n")

        info = await engine.start(progress)
        prompt = PromptRenderer.for_model(str(engine.source.path)).render(messages)
        if prompt.token_count + args.max_tokens > info.max_model_len:
            raise PromptTooLong(
                f"The prompt ({prompt.token_count} tokens) plus the reply budget ({args.max_tokens}) "
                f"exceeds the context window ({info.max_model_len} tokens).",
                "Shorten the prompt, lower --max-tokens, or raise --max-model-len.",
            )
        request = EngineRequest(
            request_id=f"ask-{uuid.uuid4().hex[:8]}",
            prompt=prompt.text,
            multi_modal_data={"image": images} if images else {},
            sampling=SamplingSettings(max_tokens=args.max_tokens, temperature=args.temperature),
        )
        return await _stream(engine, request, console)
    except GemmaChatError as error:
        console.write(f"gemma-chat: {error.problem}\n")
        if error.fix:
            console.write(f"  fix: {error.fix}\n")
        return 2
    finally:
        await engine.shutdown()


async def _stream(engine: VllmEngine, request: EngineRequest, console: TextIO) -> int:
    async for event in engine.stream(request):
        if isinstance(event, Delta):
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, Finished | Cancelled):
            sys.stdout.write(f"\n── {engine.config.profile.name}: {event.metrics.summary_line()}\n")
            return 0
        elif isinstance(event, Failed):
            console.write(f"\ngemma-chat: {event.message}\n")
            return 1
    return 1
