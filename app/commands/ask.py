"""``gemma-chat ask``: one prompt, streamed to stdout, then one line of figures from the engine.

The model may call tools (built-ins and plug-ins): each call prints a timeline line as it
finishes, and the figures line counts tool time apart from model time. With ``--profile
compare`` the prompt runs on the baseline and then on the optimized path (each distinct tool
call runs once; both paths read the same results), and a last line gives the speed-up and the
token-parity verdict. ``--json`` prints one document at the end instead.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any, TextIO

from app.commands.ask_output import JsonReport, TextPrinter
from backend.chat import ChatMessage, PromptRenderer
from backend.compare import CompareResult, compare_stream
from backend.engine import Engine, EngineInfo, EngineRequest, SamplingSettings
from backend.engine_factory import make_engine, resolve_model
from backend.engine_log import capture_stderr
from backend.errors import GemmaChatError, PromptTooLong
from backend.media.attachment import Attachment, AttachmentError, load_attachments
from backend.model_source import calls_tools
from backend.settings import Settings, load_settings
from backend.tools.loop import ToolTurn
from backend.tools.runner import Decision, ToolRecord, ToolRunner
from backend.tools.setup import tool_runner
from backend.tools.spec import Tool, ToolCall
from backend.tools.timeline import call_signature
from backend.vllm_engine import VllmEngine

COMPARE = "compare"


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings with the command line's flags; tools off for a model trained without them (the demo)."""
    settings = load_settings(
        model=args.model,
        demo=args.demo,
        profile=None if args.profile == COMPARE else args.profile,
        max_model_len=args.max_model_len,
        dtype=args.dtype,
        kv_cache_gib=args.kv_cache_gib,
        gpu_memory_utilization=args.gpu_memory_utilization,
        speculation=args.speculation,
        draft_tokens=args.draft_tokens,
    )
    if settings.tools.enabled and not calls_tools(settings.model, settings.demo):
        settings = settings.model_copy(update={"tools": settings.tools.model_copy(update={"enabled": False})})
    return settings


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
        out = JsonReport(attachments) if args.json else TextPrinter(console, comparing=len(engines) == 2)
        runner = None
        if settings.tools.enabled and not args.no_tools:
            runner = tool_runner(settings, _approver(args, console), args.allow_dir)
            for warning in runner.registry.warnings:
                console.write(f"gemma-chat: {warning}\n")
        code = asyncio.run(_ask(engines, messages, attachments, args, out, runner, settings))
        if isinstance(out, JsonReport):
            out.emit()
        return code


def _approver(args: argparse.Namespace, console: TextIO):  # type: ignore[no-untyped-def]
    async def approve(call: ToolCall, tool: Tool) -> Decision:
        if args.yes:
            return "once"
        if not sys.stdin.isatty():
            console.write(f"gemma-chat: denied {tool.name} (needs approval; pass --yes to allow)\n")
            return "deny"
        console.write(f"\nAllow {call_signature(call.name, call.arguments)}? [o]nce / [a]lways / [d]eny: ")
        console.flush()
        answer = (await asyncio.to_thread(sys.stdin.readline)).strip().lower()[:1]
        return "once" if answer == "o" else "always" if answer == "a" else "deny"

    return approve


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


class _Requests:
    """Builds each model step's request (the first, and those after tool results)."""

    def __init__(
        self, renderer: PromptRenderer, attachments: list[Attachment], args: argparse.Namespace
    ) -> None:
        self.renderer, self.attachments, self.args = renderer, attachments, args
        self.info: EngineInfo | None = None

    def __call__(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> EngineRequest:
        prompt = self.renderer.render(messages, tools)
        media_tokens = sum(a.tokens for a in self.attachments) - len(self.attachments)  # placeholders counted
        if self.info is not None:
            _check_fits(prompt.token_count + media_tokens, self.args.max_tokens, self.info)
        return EngineRequest(
            request_id=f"ask-{uuid.uuid4().hex[:8]}",
            prompt=prompt.text,
            multi_modal_data=multi_modal_data(self.attachments),
            sampling=SamplingSettings(max_tokens=self.args.max_tokens, temperature=self.args.temperature),
        )


async def _ask(
    engines: list[VllmEngine],
    messages: list[ChatMessage],
    attachments: list[Attachment],
    args: argparse.Namespace,
    out: JsonReport | TextPrinter,
    runner: ToolRunner | None,
    settings: Settings,
) -> int:
    def progress(stage: str) -> None:
        out.progress(stage)

    try:
        for engine in engines:
            progress(f"starting the {engine.config.profile.name} engine on {engine.source.name}…")
            info = await engine.start(progress)
        requests = _Requests(PromptRenderer.for_model(str(engines[0].source.path)), attachments, args)
        requests.info = info
        requests(messages, runner.registry.declarations() if runner else [])  # fits, before any engine work
        cache: dict[str, ToolRecord] = {}

        def run_turn(path: str, engine: Engine) -> AsyncIterator[Any]:
            if runner is None:
                return engine.stream(requests(messages, []))
            limits = settings.tools
            return ToolTurn(
                engine, runner, messages, requests, limits.max_steps, limits.max_result_chars, cache
            ).run()

        if len(engines) == 2:
            return await _compare(engines[0], engines[1], requests.renderer, run_turn, out)
        name = engines[0].config.profile.name
        async for event in run_turn(name, engines[0]):
            code = out.event(name, event)
            if code is not None:
                return code
        return 1
    except GemmaChatError as error:
        out.error(error)
        return 2
    finally:
        for engine in engines:
            await engine.shutdown()


async def _compare(
    baseline: VllmEngine,
    optimized: VllmEngine,
    renderer: PromptRenderer,
    run_turn: Any,
    out: JsonReport | TextPrinter,
) -> int:
    decode = lambda t: renderer.tokenizer.decode([t])  # noqa: E731
    dummy = EngineRequest("unused", "")
    async for item in compare_stream(baseline, optimized, dummy, decode, run_turn=run_turn):
        if isinstance(item, CompareResult):
            out.compare(item)
            return 0
        if out.event(item.path, item.event) == 1:
            return 1
    return 1
