"""One chat turn in the app: the shared turn pipeline's events drawn on a reply or a compare view.

The app calls ``run_single`` / ``run_compare`` from an async worker on its own loop, so no thread
touches a widget. They get what they need — the pipeline, the engine pool, the conversation to
save the reply in, and two hooks into the app — never the app itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.tui.widgets.attachment_bar import AttachmentBar
from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.prompt_input import PromptInput
from backend.chat.compare import CompareResult
from backend.chat.conversation import Conversation, Turn
from backend.chat.limits import MAX_MESSAGE_CHARS, too_long
from backend.chat.pipeline import HistoryTrimmed, PromptSized, TurnPipeline
from backend.chat.rendering import TurnRenderer, dispatch
from backend.chat.verdict import Verdict, compares_so_far, first_path
from backend.engine.local.quiet import settle
from backend.engine.metrics import TurnMetrics
from backend.engine.paths.values import COMPARED
from backend.engine.protocol import Cancelled, Failed, Finished, MetricsUpdate, PathEngine
from backend.engine.reply_events import ReplyDelta
from backend.engine.session.pool import EnginePool
from backend.errors import GemmaChatError
from backend.gemma4.reply import empty_answer_note
from backend.media.attachment import Attachment
from backend.tools.loop import StepLimitReached, ToolFinished, ToolStarted
from backend.tools.runner import ToolRecord


@dataclass(frozen=True)
class TurnHooks:
    """What a turn tells the app beyond its widgets."""

    notify: Callable[[str, str], None]
    """A notification: message and severity (``information``, ``warning``, ``error``)."""
    context_used: Callable[[int], None]
    """Tokens of the chat the model sees now (the status bar's gauge)."""


def turn_view(turn: Turn) -> MessageView:
    """The view of a stored turn (a reply's tool timeline included)."""
    raw = turn.extra.get("tools")
    records = tuple(ToolRecord.from_json(r) for r in raw) if isinstance(raw, list) else ()
    seconds = turn.extra.get("tool_seconds")
    tool_s = float(seconds) if isinstance(seconds, int | float) else None
    status = turn.extra.get("status")
    shown = status if isinstance(status, str) and status != "done" else ""
    thought = turn.extra.get("thought")
    return MessageView(
        turn.role,
        turn.text,
        turn.path,
        turn.metrics,
        turn.attachments,
        records,
        tool_s,
        shown,
        thought if isinstance(thought, str) else "",
    )


class ReplyRenderer(TurnRenderer):
    """Draws one path's events on its reply view; ``status`` says how the path ended."""

    def __init__(self, view: MessageView, hooks: TurnHooks) -> None:
        self.view = view
        self.hooks = hooks
        self.status: str | None = None
        """``done``, ``stopped`` or ``failed`` once the path has ended."""
        self.failure: Failed | None = None

    async def on_delta(self, event: ReplyDelta) -> None:
        await self.view.append(event.text, event.thought)

    async def on_metrics(self, event: MetricsUpdate) -> None:
        self.view.show_metrics(event.metrics)

    async def on_tool_started(self, event: ToolStarted) -> None:
        await self.view.add_tool_call(event.index, event.call)

    async def on_tool_finished(self, event: ToolFinished) -> None:
        self.view.finish_tool_call(event.index, event.record)

    async def on_step_limit(self, event: StepLimitReached) -> None:
        self.hooks.notify(
            f"The model called tools {event.steps} times; stopped there (tools.max_steps).", "information"
        )

    async def on_history_trimmed(self, event: HistoryTrimmed) -> None:
        self.hooks.notify(f"Dropped the oldest {event.role} turn to fit the context window.", "warning")

    async def on_prompt_sized(self, event: PromptSized) -> None:
        self.hooks.context_used(event.tokens)

    async def on_finished(self, event: Finished) -> None:
        self.view.token_ids = event.token_ids
        self.view.settle(event.text, event.thought)
        await self.view.finish(event.metrics)
        note = empty_answer_note(event.text, event.thought, event.finish_reason)
        if note:
            await self.view.add_note(note)
        self._ended("done", event.metrics)

    async def on_cancelled(self, event: Cancelled) -> None:
        self.view.settle(event.text, event.thought)
        await self.view.finish(event.metrics, "stopped")
        self._ended("stopped", event.metrics)

    async def on_failed(self, event: Failed) -> None:
        await self.view.fail(event.message)
        self.status, self.failure = "failed", event

    def _ended(self, status: str, metrics: TurnMetrics) -> None:
        self.status = status
        if metrics.prompt_tokens:
            self.hooks.context_used(metrics.prompt_tokens + metrics.generated_tokens)


async def _after(pool: EnginePool, path: str, renderer: ReplyRenderer) -> None:
    """A path's engine that died during the turn is dropped; the next turn starts a new one."""
    if renderer.failure is not None and renderer.failure.engine_died:
        await pool.discard(path, renderer.failure.message)


async def run_single(
    pipeline: TurnPipeline,
    pool: EnginePool,
    path: str,
    view: MessageView,
    conversation: Conversation,
    hooks: TurnHooks,
) -> None:
    if not pool.state(path).ready:
        view.show_note(f"waiting for the {path} engine to start…")
    target = await pool.ensure(path)
    renderer = ReplyRenderer(view, hooks)
    async for event in pipeline.run(target):
        await dispatch(renderer, event)
    await _after(pool, path, renderer)
    if renderer.status is not None and (renderer.status != "failed" or view.text):
        extra = {"status": renderer.status, **pipeline.history_extra(path)}
        if view.thought.text:
            extra["thought"] = view.thought.text
        conversation.add_reply(view.text, path, view.metrics, extra)


async def run_compare(
    pipeline: TurnPipeline,
    pool: EnginePool,
    view: CompareView,
    conversation: Conversation,
    hooks: TurnHooks,
) -> None:
    for pane in view.panes.values():
        if not pool.state(pane.path or "").ready:
            pane.show_note("waiting for this path's engine to start…")
    earlier = compares_so_far(turn.extra for turn in conversation.turns)
    started: dict[str, PathEngine] = {}
    refused: GemmaChatError | None = None
    for name in COMPARED:
        try:
            started[name] = await pool.ensure(name)
        except GemmaChatError as error:  # e.g. an unreachable server: that pane says so
            refused = error
            await view.panes[name].fail(f"The {name} engine did not start: {error}")
    if refused is not None:
        if not started:
            raise refused
        (alone,) = started
        view.show_failure(f"comparison incomplete: only the {alone} path could answer")
        await run_single(pipeline, pool, alone, view.panes[alone], conversation, hooks)
        return
    baseline, optimized = started["baseline"], started["optimized"]
    resident = pool.swapper.resident if pool.swapper is not None else None
    first = first_path(len(earlier), resident if resident in started else None)
    view.show_order(first)
    renderers = {path: ReplyRenderer(pane, hooks) for path, pane in view.panes.items()}
    async for item in pipeline.compare(baseline, optimized, first, settle):
        if isinstance(item, CompareResult):
            verdict = Verdict(item, tuple(earlier), first, swapped=pool.swapper is not None)
            view.show_result(verdict)
            extra: dict[str, object] = {
                **verdict.extra(),
                "baseline_metrics": item.baseline.metrics.summary_line(),
                **pipeline.history_extra("optimized"),
            }
            if item.optimized.thought:
                extra["thought"] = item.optimized.thought
            conversation.add_reply(item.optimized.text, "optimized", item.optimized.metrics, extra)
            return
        await dispatch(renderers[item.path], item.event)
    for path, renderer in renderers.items():
        await _after(pool, path, renderer)
        if renderer.status in ("stopped", "failed"):
            view.show_failure(f"the {path} path {renderer.status}")
            if renderer.view.text:
                kept: dict[str, object] = {"status": renderer.status, "think": pipeline.options.think}
                if renderer.view.thought.text:
                    kept["thought"] = renderer.view.thought.text
                conversation.add_reply(renderer.view.text, path, renderer.view.metrics, kept)


async def give_back(
    withdrawn: Turn | None, prompt: PromptInput, bar: AttachmentBar, pending: list[Attachment]
) -> list[Attachment]:
    """A message refused before it was sent returns to an empty input: its text there, its
    attachments on the bar again. The attachments pending from now on (``pending`` where nothing
    was given back)."""
    if withdrawn is None or prompt.text:
        return pending
    prompt.text = withdrawn.text
    given = list(withdrawn.attachments)
    await bar.show(given)
    return given


def size_refusal(text: str) -> str | None:
    """Why a message is too large to send (None: it is not)."""
    return too_long(len(text)) if len(text) > MAX_MESSAGE_CHARS else None
