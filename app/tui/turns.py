"""Running one chat turn in the app: a single path, or both paths in compare mode.

Functions here drive widgets from ``TurnEvent`` values; the app calls them from an async
worker on its own loop, so no thread touches a widget.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.message_view import MessageView
from backend.chat import ChatMessage
from backend.compare import CompareResult, compare_stream
from backend.conversation import Turn
from backend.engine import (
    Cancelled,
    Delta,
    Engine,
    EngineRequest,
    Failed,
    Finished,
    MetricsUpdate,
    SamplingSettings,
    TurnEvent,
)
from backend.errors import PromptTooLong
from backend.media.attachment import AttachmentError
from backend.tools.loop import StepLimitReached, ToolEvent, ToolFinished, ToolStarted, ToolTurn
from backend.tools.runner import ToolRecord
from backend.tools.transcript import transcript_to_json
from backend.vllm_engine import DEAD_MESSAGE

if TYPE_CHECKING:
    from app.tui.app import GemmaChatApp


@dataclass
class TurnState:
    """What is streaming now, so Esc can stop it."""

    engines: dict[str, Engine] = field(default_factory=dict)
    request_ids: dict[str, str] = field(default_factory=dict)
    tool_turns: dict[str, ToolTurn] = field(default_factory=dict)
    stopped: bool = False


def turn_view(turn: Turn) -> MessageView:
    """The view of a stored turn (a reply's tool timeline included)."""
    raw = turn.extra.get("tools")
    records = tuple(ToolRecord.from_json(r) for r in raw) if isinstance(raw, list) else ()
    seconds = turn.extra.get("tool_seconds")
    tool_s = float(seconds) if isinstance(seconds, int | float) else None
    return MessageView(turn.role, turn.text, turn.path, turn.metrics, turn.attachments, records, tool_s)


def build_request(
    app: GemmaChatApp,
    engine: Engine,
    path: str,
    transcript: list[ChatMessage] | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> EngineRequest:
    """The request for the conversation on ``path`` (plus this turn's tool calls and responses so far):
    checked against the model's towers and window."""
    conversation = app.conversation
    extra = transcript or []
    info = app.pool.state(path).info
    towers = info.modalities if info else frozenset({"text", "image", "audio", "video"})
    missing = {a.kind for a in conversation.attachments()} - towers
    if missing:
        raise AttachmentError(
            f"The {path} path's model cannot take {', '.join(sorted(missing))}.",
            "Remove that attachment (start a new chat) or use a model with that tower.",
        )
    prompt = engine.render(conversation.messages() + extra, tools)
    used = prompt.token_count + conversation.attachment_tokens()
    window = info.max_model_len if info else None
    budget = app.settings.max_tokens
    if window is not None:
        while used + budget > window and app.settings.trim_history and len(conversation.turns) > 1:
            dropped = conversation.turns.pop(0)
            app.notify(
                f"Dropped the oldest {dropped.role} turn to fit the context window.", severity="warning"
            )
            prompt = engine.render(conversation.messages() + extra, tools)
            used = prompt.token_count + conversation.attachment_tokens()
        if used + budget > window:
            raise PromptTooLong(
                f"This chat ({used} tokens) plus the reply budget ({budget}) exceeds the "
                f"context window ({window} tokens).",
                "Start a new chat (Ctrl+N), shorten the message, or set trim_history = true.",
            )
        budget = min(budget, window - used)
    app.status.context_used = used
    return EngineRequest(
        request_id=f"turn-{uuid.uuid4().hex[:8]}",
        prompt=prompt.text,
        multi_modal_data=conversation.multi_modal_data(),
        sampling=SamplingSettings(max_tokens=budget),
    )


async def show_event(view: MessageView, event: TurnEvent | ToolEvent) -> str | None:
    """Apply one event to a reply view; return a status once the turn has ended."""
    if isinstance(event, ToolStarted):
        await view.add_tool_call(event.index, event.call)
    elif isinstance(event, ToolFinished):
        view.finish_tool_call(event.index, event.record)
    elif isinstance(event, StepLimitReached):
        view.app.notify(f"The model called tools {event.steps} times; stopped there (tools.max_steps).")
    elif isinstance(event, Delta):
        await view.append(event.text)
    elif isinstance(event, MetricsUpdate):
        view.show_metrics(event.metrics)
    elif isinstance(event, Finished):
        await view.finish(event.metrics)
        return "done"
    elif isinstance(event, Cancelled):
        await view.finish(event.metrics, "stopped")
        return "stopped"
    elif isinstance(event, Failed):
        await view.finish(view.metrics, f"failed: {event.message}")
        return "failed"
    return None


async def run_single(app: GemmaChatApp, state: TurnState, view: MessageView) -> None:
    path = app.path
    if not app.pool.state(path).ready:
        view.show_note(f"waiting for the {path} engine to start…")
    engine = await app.pool.ensure(path)
    build_request(app, engine, path, tools=_declarations(app))  # fits and towers, before anything runs
    state.engines = {path: engine}
    state.tool_turns = {path: _tool_turn(app, engine, path)}
    async for event in _run_path(app, state, path, engine):
        status = await show_event(view, event)
        if isinstance(event, Failed) and event.message == DEAD_MESSAGE:
            await app.pool.discard(path, event.message)
        if status is not None:
            if status != "failed" or view.text:
                extra = {"status": status, **_tool_extra(state.tool_turns.get(path))}
                app.conversation.add_reply(view.text, path, view.metrics, extra)
            if isinstance(event, Finished | Cancelled):
                app.status.context_used = event.metrics.prompt_tokens + event.metrics.generated_tokens


def _declarations(app: GemmaChatApp) -> list[dict[str, Any]]:
    return app.tools.registry.declarations() if app.tools is not None else []


def _tool_turn(
    app: GemmaChatApp, engine: Engine, path: str, cache: dict[str, ToolRecord] | None = None
) -> ToolTurn:
    def build(transcript: list[ChatMessage], tools: list[dict[str, Any]]) -> EngineRequest:
        return build_request(app, engine, path, transcript, tools)

    assert app.tools is not None
    settings = app.settings.tools
    return ToolTurn(engine, app.tools, [], build, settings.max_steps, settings.max_result_chars, cache)


def _run_path(app: GemmaChatApp, state: TurnState, path: str, engine: Engine) -> AsyncIterator[Any]:
    """The turn on one path: the tool loop when tools are on, else one request."""
    if app.tools is not None:
        if path not in state.tool_turns:
            state.tool_turns[path] = _tool_turn(app, engine, path)
        return state.tool_turns[path].run()
    request = build_request(app, engine, path)
    state.request_ids[path] = request.request_id
    return engine.stream(request)


def _tool_extra(turn: ToolTurn | None) -> dict[str, object]:
    """What the history keeps of a tool turn: the timeline and the messages the model saw."""
    if turn is None or not turn.records:
        return {}
    return {
        "tools": [r.to_json() for r in turn.records],
        "tool_seconds": round(turn.tool_seconds, 4),
        "final_text": turn.final_text,
        "transcript": transcript_to_json(turn.transcript),
    }


async def run_compare(app: GemmaChatApp, state: TurnState, view: CompareView) -> None:
    for pane in view.panes.values():
        if not app.pool.state(pane.path or "").ready:
            pane.show_note("waiting for this path's engine to start…")
    baseline = await app.pool.ensure("baseline")
    optimized = await app.pool.ensure("optimized")
    build_request(app, baseline, "baseline", tools=_declarations(app))  # both paths must take the attachments
    request = build_request(app, optimized, "optimized", tools=_declarations(app))
    state.engines = {"baseline": baseline, "optimized": optimized}
    cache: dict[str, ToolRecord] = {}  # each distinct call runs once; both paths read the same results
    if app.tools is not None:
        state.tool_turns = {p: _tool_turn(app, e, p, cache) for p, e in state.engines.items()}
    state.request_ids = {path: f"{path}-{request.request_id}" for path in state.engines}

    def run_turn(path: str, engine: Engine) -> AsyncIterator[Any]:
        if app.tools is None:
            return engine.stream(replace(request, request_id=state.request_ids[path]))
        return _run_path(app, state, path, engine)

    decode = lambda t: optimized.decode([t])  # noqa: E731
    async for item in compare_stream(baseline, optimized, request, decode, run_turn=run_turn):
        if isinstance(item, CompareResult):
            view.show_result(item)
            extra: dict[str, object] = {
                "compare": item.summary(),
                "baseline_metrics": item.baseline.metrics.summary_line(),
                **_tool_extra(state.tool_turns.get("optimized")),
            }
            app.conversation.add_reply(item.optimized.text, "optimized", item.optimized.metrics, extra)
            return
        status = await show_event(view.panes[item.path], item.event)
        if status in ("stopped", "failed"):
            view.show_failure(f"the {item.path} path {status}")
            pane = view.panes[item.path]
            if pane.text:
                app.conversation.add_reply(pane.text, item.path, pane.metrics, {"status": status})
            return
