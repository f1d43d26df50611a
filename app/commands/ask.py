"""``gemma-chat ask``: one prompt, streamed to stdout, then one line of figures from the engine.

With ``--profile compare`` the prompt runs on the baseline and then on the optimized path,
and a last line gives the speed-up and the token-parity verdict.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from dataclasses import asdict
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
from backend.media.attachment import Attachment, AttachmentError, load_attachments
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
    attachments = [
        a for path in args.attach for a in load_attachments(path, settings.media)
    ]  # before engines
    source = resolve_model(settings)
    missing = {a.kind for a in attachments} - source.modalities()
    if missing:
        raise AttachmentError(
            f"{source.name} cannot take {', '.join(sorted(missing))} (it has no tower for it).",
            "Remove that attachment or use a model with that tower.",
        )
    profiles = ["baseline", "optimized"] if args.profile == COMPARE else [settings.profile]
    engines = [make_engine(settings, source, name, engines_sharing_gpu=len(profiles)) for name in profiles]
    messages = [ChatMessage("system", args.system)] if args.system else []
    messages.append(ChatMessage("user", args.prompt, media=tuple(a.kind for a in attachments)))  # type: ignore[misc]
    log_path = engines[0].log_path
    assert log_path is not None
    with capture_stderr(log_path) as console:
        for attachment in attachments:
            for notice in attachment.notices:
                console.write(f"gemma-chat: {notice}\n")
        global REPORT
        REPORT = JsonReport(attachments) if args.json else None
        code = asyncio.run(_ask(engines, messages, attachments, args, console))
        if REPORT is not None:
            REPORT.emit()
        return code


def multi_modal_data(attachments: list[Attachment]) -> dict[str, Any]:
    data: dict[str, list[Any]] = {}
    for attachment in attachments:
        data.setdefault(attachment.kind, []).append(attachment.payload)
    return data


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
    attachments: list[Attachment],
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
        media_tokens = sum(a.tokens for a in attachments) - len(attachments)  # placeholders already counted
        _check_fits(prompt.token_count + media_tokens, args.max_tokens, info)
        request = EngineRequest(
            request_id=f"ask-{uuid.uuid4().hex[:8]}",
            prompt=prompt.text,
            multi_modal_data=multi_modal_data(attachments),
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


class JsonReport:
    """``--json``: one document at the end instead of streamed text."""

    def __init__(self, attachments: list[Attachment]) -> None:
        self.doc: dict[str, Any] = {
            "attachments": [
                {
                    "path": str(a.path),
                    "kind": a.kind,
                    "tokens": a.tokens,
                    "detail": a.detail,
                    "sha256": a.sha256,
                }
                for a in attachments
            ],
            "paths": {},
        }

    def add(self, path: str, event: TurnEvent) -> None:
        if isinstance(event, Finished | Cancelled):
            self.doc["paths"][path] = {
                "reply": event.text,
                "status": "finished" if isinstance(event, Finished) else "cancelled",
                "figures": asdict(event.metrics),
            }
        elif isinstance(event, Failed):
            self.doc["paths"][path] = {"status": "failed", "error": event.message}

    def emit(self) -> None:
        sys.stdout.write(json.dumps(self.doc, indent=2) + "\n")


REPORT: JsonReport | None = None


def _print_event(path: str, event: TurnEvent, console: TextIO) -> int | None:
    """Print one event; return an exit code once the turn has ended."""
    if REPORT is not None:
        REPORT.add(path, event)
        return (
            None if not isinstance(event, Finished | Cancelled | Failed) else int(isinstance(event, Failed))
        )
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
            if REPORT is not None:
                REPORT.doc["compare"] = {
                    "decode_speedup": item.decode_speedup,
                    "e2e_speedup": item.e2e_speedup,
                    "parity": item.parity.describe(),
                    "identical": item.parity.identical,
                }
                return 0
            sys.stdout.write(f"── compare: {item.summary()}\n")
            return 0
        if REPORT is not None:
            if _print_event(item.path, item.event, console) == 1:
                return 1
            continue
        if isinstance(item.event, Started):
            sys.stdout.write(f"── {item.path}:\n")
        if _print_event(item.path, item.event, console) == 1:
            return 1
    return 1
