"""Running one chat turn in the app: a single path, or both paths in compare mode.

Functions here drive widgets from ``TurnEvent`` values; the app calls them from an async
worker on its own loop, so no thread touches a widget.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.message_view import MessageView
from backend.compare import CompareResult, compare_stream
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
from backend.vllm_engine import DEAD_MESSAGE

if TYPE_CHECKING:
    from app.tui.app import GemmaChatApp


@dataclass
class TurnState:
    """What is streaming now, so Esc can stop it."""

    engines: dict[str, Engine] = field(default_factory=dict)
    request_ids: dict[str, str] = field(default_factory=dict)
    stopped: bool = False


def build_request(app: GemmaChatApp, engine: Engine, path: str) -> EngineRequest:
    """The request for the conversation on ``path``: checked against the model's towers and window."""
    conversation = app.conversation
    info = app.pool.state(path).info
    towers = info.modalities if info else frozenset({"text", "image", "audio", "video"})
    missing = {a.kind for a in conversation.attachments()} - towers
    if missing:
        raise AttachmentError(
            f"The {path} path's model cannot take {', '.join(sorted(missing))}.",
            "Remove that attachment (start a new chat) or use a model with that tower.",
        )
    prompt = engine.render(conversation.messages())
    used = prompt.token_count + conversation.attachment_tokens()
    window = info.max_model_len if info else None
    budget = app.settings.max_tokens
    if window is not None:
        while used + budget > window and app.settings.trim_history and len(conversation.turns) > 1:
            dropped = conversation.turns.pop(0)
            app.notify(
                f"Dropped the oldest {dropped.role} turn to fit the context window.", severity="warning"
            )
            prompt = engine.render(conversation.messages())
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


async def show_event(view: MessageView, event: TurnEvent) -> str | None:
    """Apply one event to a reply view; return a status once the turn has ended."""
    if isinstance(event, Delta):
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
    request = build_request(app, engine, path)
    state.engines, state.request_ids = {path: engine}, {path: request.request_id}
    async for event in engine.stream(request):
        status = await show_event(view, event)
        if isinstance(event, Failed) and event.message == DEAD_MESSAGE:
            await app.pool.discard(path, event.message)
        if status is not None:
            if status != "failed" or view.text:
                app.conversation.add_reply(view.text, path, view.metrics, {"status": status})
            if isinstance(event, Finished | Cancelled):
                app.status.context_used = event.metrics.prompt_tokens + event.metrics.generated_tokens


async def run_compare(app: GemmaChatApp, state: TurnState, view: CompareView) -> None:
    for pane in view.panes.values():
        if not app.pool.state(pane.path or "").ready:
            pane.show_note("waiting for this path's engine to start…")
    baseline = await app.pool.ensure("baseline")
    optimized = await app.pool.ensure("optimized")
    build_request(app, baseline, "baseline")  # both paths must take the attachments
    request = build_request(app, optimized, "optimized")
    state.engines = {"baseline": baseline, "optimized": optimized}
    state.request_ids = {path: f"{path}-{request.request_id}" for path in state.engines}
    async for item in compare_stream(baseline, optimized, request, lambda t: optimized.decode([t])):
        if isinstance(item, CompareResult):
            view.show_result(item)
            extra: dict[str, object] = {
                "compare": item.summary(),
                "baseline_metrics": item.baseline.metrics.summary_line(),
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
