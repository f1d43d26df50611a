"""``gemma-chat ask``: one prompt, streamed to stdout, then one line of figures from the engine.

The model may call tools (built-ins and plug-ins): each call prints a timeline line as it
finishes, and the figures line counts tool time apart from model time. With ``--path
compare`` the prompt runs on the baseline and then on the optimized path (each distinct tool
call runs once; both paths read the same results), and a last line gives the speed-up (one run,
labelled so) and the token-parity verdict. Each engine answers one short warm-up request
(backend.engine.session.warmup) before the prompt, so the figures are a warm engine's. ``--json`` prints
one document at the end instead. An optimized CPU engine with no speculation choice kept for this
model and machine answers without drafts and measures nothing: one prompt would wait for a
measurement that pays from the next reply on (the app measures when idle; ``paths --measure``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TextIO

from app.commands.ask_output import AskOutput, JsonReport, TextPrinter
from app.commands.flags import COMPARE, settings_from_args
from backend.chat.compare import CompareResult, path_differences
from backend.chat.pipeline import FixedPrompt, TurnOptions, TurnPipeline, check_towers
from backend.chat.rendering import dispatch
from backend.chat.verdict import Verdict, first_path
from backend.engine.env import import_engine
from backend.engine.local.log import capture_stderr
from backend.engine.local.quiet import settle
from backend.engine.local.startup import StartClock, timings
from backend.engine.local.vllm import VllmEngine
from backend.engine.paths.placement import host_plan_for, plan_for
from backend.engine.paths.values import COMPARED
from backend.engine.protocol import Engine, EngineInfo, Finished, PathEngine, SamplingSettings
from backend.engine.reply_events import ReplyDelta
from backend.engine.session.factory import make_engine, new_log_path, remote_engine, resolve_model, server_for
from backend.engine.session.swap import ResidentEngine, Swapper, can_sleep, info_before_start, prompts_of
from backend.engine.session.warmup import warm_up
from backend.engine.speculation.when_idle import NEVER
from backend.errors import GemmaChatError
from backend.gemma4.messages import ChatMessage
from backend.gemma4.tool_call import ToolCall
from backend.media.load import load_attachments
from backend.tools.from_settings import mcp_host, tool_runner
from backend.tools.mcp.host import McpHost
from backend.tools.runner import Decision
from backend.tools.spec import Tool
from backend.tools.timeline import call_signature


def run_ask(args: argparse.Namespace) -> int:
    clock = StartClock() if args.timings else None
    if clock is not None and args.path == COMPARE:
        sys.stderr.write("gemma-chat ask: --timings times one engine's start; leave out --path compare\n")
        return 2
    settings = settings_from_args(args)
    attachments = [
        a for path in args.attach for a in load_attachments(path, settings.media)
    ]  # before engines
    paths = list(COMPARED) if args.path == COMPARE else [settings.path]
    log = new_log_path("ask")  # the engines' own output, and what a failed start is diagnosed from
    engines: dict[str, Engine] = {
        name: remote_engine(settings, url, name) for name in paths if (url := server_for(settings, name))
    }
    in_process = [name for name in paths if name not in engines]
    model_name = str(settings.server or settings.baseline_server)
    swapping = False
    if in_process:
        source = resolve_model(settings)
        check_towers({a.kind for a in attachments}, source.modalities(), source.name)
        plan = plan_for(source, settings.engine)  # on a GPU: the shares (refusals up front); else None
        ram = host_plan_for(source, settings.engine) if plan is None else None  # the CPU's RAM
        swapping = len(in_process) == 2 and (plan.mode if plan else ram.mode if ram else "") == "swap"
        engines.update(
            {
                name: make_engine(settings, source, name, len(in_process), log, plan, NEVER)
                for name in in_process
            }
        )
        model_name = source.name
    engines = {name: engines[name] for name in paths}  # baseline first, as compare runs them
    messages = [ChatMessage("system", args.system)] if args.system else []
    messages.append(ChatMessage("user", args.prompt, media=tuple(a.kind for a in attachments)))  # type: ignore[misc]
    options = TurnOptions(
        sampling=SamplingSettings(max_tokens=args.max_tokens, temperature=args.temperature),
        too_long_fix="Shorten the prompt, lower --max-tokens, or raise --max-model-len.",
        think=settings.think,
    )
    with capture_stderr(log) as console:
        for attachment in attachments:
            for notice in attachment.notices:
                console.write(f"gemma-chat: {notice}\n")
        out: AskOutput = JsonReport(attachments) if args.json else TextPrinter(console, len(engines) == 2)
        runner, host = None, None
        if settings.tools.enabled and not args.no_tools:
            host = mcp_host(settings, log.parent)
            host.start()  # the servers start while the engine does; waited for only before the turn
            runner = tool_runner(settings, _approver(args, console), args.allow_dir, mcp=host)
            for warning in runner.registry.warnings:
                console.write(f"gemma-chat: {warning}\n")
        pipeline = TurnPipeline(FixedPrompt(messages, attachments), options, runner, settings.tools)
        try:
            code = asyncio.run(_ask(engines, model_name, pipeline, out, host, console, clock, swapping))
        finally:
            if host is not None:
                host.close()
        if clock is not None and code == 0:
            out.startup(timings(clock, log.read_text(errors="replace") if log.exists() else ""))
        if isinstance(out, JsonReport):
            out.emit()
        return code


def _approver(args: argparse.Namespace, console: TextIO):  # type: ignore[no-untyped-def]
    async def approve(call: ToolCall, tool: Tool) -> Decision:
        if args.yes:
            return "once"
        if not _stdin_is_a_terminal():
            console.write(
                f"gemma-chat: denied {tool.name} (needs approval, and stdin is not a terminal to ask on; "
                "pass --yes to allow)\n"
            )
            return "deny"
        console.write(f"\nAllow {call_signature(call.name, call.arguments)}? [o]nce / [a]lways / [d]eny: ")
        console.flush()
        answer = (await asyncio.to_thread(sys.stdin.readline)).strip().lower()[:1]
        return "once" if answer == "o" else "always" if answer == "a" else "deny"

    return approve


def _stdin_is_a_terminal() -> bool:
    """Whether approval can be asked on stdin: not where it is a file, a pipe, or closed
    (``ask <&-``: ``sys.stdin`` is None)."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # a closed or broken stdin
        return False


async def _ask(
    engines: dict[str, Engine],
    model: str,
    pipeline: TurnPipeline,
    out: AskOutput,
    host: McpHost | None,
    console: TextIO,
    clock: StartClock | None = None,
    swapping: bool = False,
) -> int:
    """Start the engines, run the turn (compare: on both), print it; the exit code. ``swapping``:
    the memory holds one engine at a time — the baseline's engine starts now, the optimized path's
    when its turn comes, the baseline's stopped first (``Swapper``): each starts once, and until it
    has, the optimized path is checked against what its configuration fixes
    (``info_before_start``); no figure includes the swap."""
    mark = clock.mark if clock is not None else (lambda _stage: None)
    later: dict[str, EngineInfo] = {}
    if swapping:
        how = swap_how(engines)
        console.write(
            "gemma-chat: this machine's memory holds one engine at a time: compare runs the baseline, "
            f"{how} and starts the optimized path's (the swap is not timed)\n"
        )
        later = {name: info for name, engine in engines.items() if (info := info_before_start(engine))}
        later.pop(next(iter(engines)), None)  # the path that runs first starts now
        engines = swapped_engines(engines, out.progress, model)
    try:
        first = next(iter(engines.values()))
        if isinstance(first, VllmEngine):  # the model folder's template, before minutes of engine start
            await asyncio.to_thread(
                first.render, pipeline.source.messages(), [], think=pipeline.options.think
            )
        infos = dict(later)
        for name, engine in engines.items():
            if name in later:
                continue  # swapped in for its turn
            if not swapping:  # else the swap says it
                out.progress(f"starting the {name} engine on {model}…")
            if isinstance(engine, VllmEngine):
                engine.prestart()  # its engine core's interpreter imports beside this process
                await asyncio.to_thread(import_engine)  # what the start would import, timed apart
            mark("imports")
            info = await engine.start(out.progress)
            if info.start_note:
                console.write(f"gemma-chat: {name} engine: {info.start_note}\n")
            if info.speculation:
                console.write(f"gemma-chat: {name} engine: speculation: {info.speculation}\n")
            mark("engine")
            out.progress("warming up")
            await warm_up(engine)  # not shown: the turn is timed on a warm engine
            mark("warm-up")
            infos[name] = info
        targets = [PathEngine(n, e, infos[n], prompts_of(e)) for n, e in engines.items()]
        if host is not None:
            await asyncio.to_thread(host.wait_settled)
            for status in host.statuses():
                if status.state == "failed":
                    console.write(f"gemma-chat: MCP server {status.describe()}\n")
        renderers = {target.name: out.renderer(target.name) for target in targets}
        first_token = False
        if len(targets) == 2:
            async for item in pipeline.compare(targets[0], targets[1], first_path(0), settle):
                if isinstance(item, CompareResult):
                    if later:
                        item = started_late(item, targets, engines, console)
                    out.compare(Verdict(item, swapped=swapping))
                    return 0
                await dispatch(renderers[item.path], item.event)
            codes = [renderer.exit_code for renderer in renderers.values() if renderer.exit_code]
            return max(codes, default=1)  # a path stopped or failed: no comparison
        async for event in pipeline.run(targets[0]):
            if isinstance(event, ReplyDelta | Finished) and not first_token:
                first_token = True
                mark("first token")
            await dispatch(renderers[targets[0].name], event)
        return renderers[targets[0].name].exit_code or 0
    except GemmaChatError as error:
        out.error(error)
        return 2
    finally:
        for engine in engines.values():
            await engine.shutdown()


def started_late(
    result: CompareResult, targets: list[PathEngine], engines: dict[str, Engine], console: TextIO
) -> CompareResult:
    """``result`` with what the path swapped in for its turn said once it had started (its
    speculation, its start's note), as a path started before the turn says it up front."""
    baseline, optimized = targets
    engine = engines[optimized.name]
    info = engine.swapper.infos.get(optimized.name) if isinstance(engine, ResidentEngine) else None
    if info is None:
        return result
    if info.start_note:
        console.write(f"gemma-chat: {optimized.name} engine: {info.start_note}\n")
    if info.speculation:
        console.write(f"gemma-chat: {optimized.name} engine: speculation: {info.speculation}\n")
    return replace(result, differences=path_differences(baseline.info, info))


def swap_how(engines: dict[str, Engine]) -> str:
    """What a swap does to the baseline's engine, as the ``Swapper`` will: put it to sleep where
    the engine can (vLLM's sleep mode on a card), else stop it."""
    first = next(iter(engines.values()))
    return "puts its engine to sleep (weights to host memory)" if can_sleep(first) else "stops its engine"


def swapped_engines(
    engines: dict[str, Engine], progress: Callable[[str], None], model: str = ""
) -> dict[str, Engine]:
    """``engines`` behind one ``Swapper``: a path's engine starts, and warms up, when it is used."""
    raw = dict(engines)

    started: list[str] = []

    async def start(name: str) -> EngineInfo:
        swap = ""
        if started:  # the Swapper sleeps the engine before where it can, else stops it
            other = "asleep" if can_sleep(raw[started[-1]]) else "stopped"
            swap = f" (the other is {other}: one fits in memory)"
        progress(f"starting the {name} engine{f' on {model}' if model else ''}{swap}…")
        started.append(name)
        info = await raw[name].start(progress)
        await warm_up(raw[name])
        return info

    swapper = Swapper(raw, start, lambda _name: None, lambda _path, _stage, _detail: None)
    return {name: ResidentEngine(swapper, name, engine) for name, engine in raw.items()}
