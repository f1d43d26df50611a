"""The turn pipeline the chat app and ``gemma-chat ask`` share: one user turn, on one path or both.

A ``TurnPipeline`` is made for one user turn from a ``TurnSource`` (the messages the model sees
and their attachments). ``run(target)`` runs it on one engine path; ``compare(baseline,
optimized, first, pause)`` runs it on both, one after the other so neither steals the other's cores
(the second after the caller's pause, while the first one's worker still spins; which goes first
is ``backend.chat.verdict.first_path``'s choice), and ends with a ``CompareResult`` (speed-up,
token parity, what differed between the paths).

Before any engine work, every path is checked: the attachments against the model's towers and
the prompt plus the reply budget against the context window, dropping the oldest turns first
where the source allows it (``HistoryTrimmed``). With tools on, each path runs the tool loop
(``ToolTurn``), and the two paths of a comparison share one result cache so each distinct call
runs once; with tools off, a path is one request. ``stop()`` ends the turn from outside (Esc).

Callers only render: ``backend.chat.rendering.dispatch`` hands each event to a ``TurnRenderer``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from backend.chat.compare import CompareResult, kernel_mode, path_differences
from backend.chat.tool_budget import declarations_too_large
from backend.config.settings import ToolSettings
from backend.engine.metrics import TurnMetrics
from backend.engine.parity import compare_tokens, tokenization_difference
from backend.engine.protocol import (
    Cancelled,
    EngineRequest,
    Failed,
    Finished,
    PathEngine,
    SamplingSettings,
    TurnEvent,
)
from backend.engine.reply_events import ReplyDelta, finish_step, read_step
from backend.errors import PromptTooLong
from backend.gemma4.defuse import Structure
from backend.gemma4.messages import IMAGE_PLACEHOLDER, ChatMessage, RenderedPrompt
from backend.gemma4.reply import Prompted, ReplyStream
from backend.media.attachment import Attachment, AttachmentError, media_payloads
from backend.media.load import load_attachment
from backend.tools.loop import ToolEvent, ToolTurn
from backend.tools.runner import ToolRunner
from backend.tools.shared_results import SharedResults
from backend.tools.transcript import transcript_to_json


class TurnSource(Protocol):
    """What a turn is made of."""

    def messages(self) -> list[ChatMessage]:
        """What the model sees, system prompt first."""
        ...

    def attachments(self) -> list[Attachment]:
        """Every attachment of those messages, in prompt order."""
        ...

    def drop_oldest(self) -> str | None:
        """Drop the oldest turn to make room; its role, or None when nothing more can go."""
        ...


@dataclass
class FixedPrompt:
    """A source that cannot shrink: ``ask``'s one prompt (and system prompt)."""

    prompt: list[ChatMessage]
    media: list[Attachment] = field(default_factory=list)

    def messages(self) -> list[ChatMessage]:
        return list(self.prompt)

    def attachments(self) -> list[Attachment]:
        return list(self.media)

    def drop_oldest(self) -> str | None:
        return None


@dataclass(frozen=True)
class TurnOptions:
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    trim_history: bool = False
    """Drop the oldest turns of a chat that outgrows the window (else refuse the turn)."""
    too_long_fix: str = "Shorten the prompt, lower the reply budget, or raise --max-model-len."
    """What the user can do when the prompt does not fit (the app and the CLI differ)."""
    think: bool = False
    """Gemma 4's thinking mode: the prompt asks for a thought before the answer."""


@dataclass(frozen=True)
class HistoryTrimmed:
    """The oldest turn of the chat was dropped so the prompt fits the window."""

    path: str
    role: str


@dataclass(frozen=True)
class PromptSized:
    """A request was built: its prompt tokens (attachments included) and the window."""

    path: str
    tokens: int
    window: int


PipelineEvent = TurnEvent | ReplyDelta | ToolEvent | HistoryTrimmed | PromptSized


@dataclass(frozen=True)
class PathEvent:
    """An event of one path during a comparison."""

    path: str
    event: PipelineEvent


ENDINGS = (Finished, Cancelled, Failed)


def check_towers(kinds: set[str], modalities: frozenset[str], who: str) -> None:
    """Refuse attachments the model has no tower for, before anything is sent."""
    missing = kinds - modalities
    if missing:
        raise AttachmentError(
            f"{who} cannot take {', '.join(sorted(missing))} (it has no tower for it).",
            "Remove that attachment (or start a new chat), or use a model with that tower.",
        )


class TurnPipeline:
    """One user turn: checked requests in, the engines' events (and the tool loop's) out."""

    def __init__(
        self,
        source: TurnSource,
        options: TurnOptions,
        tools: ToolRunner | None = None,
        tool_limits: ToolSettings | None = None,
    ) -> None:
        self.source = source
        self.options = options
        self.tools = tools
        self.tool_limits = tool_limits or ToolSettings()
        self.stopped = False
        self._targets: dict[str, PathEngine] = {}
        self._request_ids: dict[str, str] = {}
        self._tool_turns: dict[str, ToolTurn] = {}
        self._shared = SharedResults()
        self._notes: list[HistoryTrimmed | PromptSized] = []
        self._tool_media: dict[str, Attachment | None] = {}
        self._checked: dict[str, tuple[EngineRequest, list[HistoryTrimmed | PromptSized]]] = {}
        """Each path's first request as ``check`` rendered it (with its notes): a path's prompt is
        rendered once per step, the first step's by the check."""

    # -- requests ----------------------------------------------------------------------------
    def _declarations(self) -> list[dict[str, Any]]:
        return self.tools.registry.declarations() if self.tools is not None else []

    def check(self, *targets: PathEngine) -> None:
        """Raise (AttachmentError, PromptTooLong) unless the turn can go to every path; keeps each
        path's first request. Where fitting one path drops history, the others are rendered again
        (the paths see the same conversation)."""
        trimmed: dict[str, list[HistoryTrimmed | PromptSized]] = {}
        while missing := [t for t in targets if t.name not in self._checked]:
            for target in missing:
                notes, self._notes = self._notes, []
                request = self._request(target, [], self._declarations())
                fresh, self._notes = self._notes, notes
                if any(isinstance(note, HistoryTrimmed) for note in fresh):
                    for name, (_, old) in self._checked.items():  # rendered with history now dropped
                        trimmed.setdefault(name, []).extend(n for n in old if isinstance(n, HistoryTrimmed))
                    self._checked.clear()
                self._checked[target.name] = (request, [*trimmed.pop(target.name, []), *fresh])

    def _first_request(
        self, target: PathEngine, transcript: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> EngineRequest:
        """The path's request for this step: the first step's as ``check`` rendered it, any other's now."""
        checked = self._checked.pop(target.name, None) if not transcript else None
        if checked is not None and tools == self._declarations():
            request, notes = checked
            self._notes.extend(notes)
            return request
        return self._request(target, transcript, tools)

    def _request(
        self, target: PathEngine, transcript: list[ChatMessage], tools: list[dict[str, Any]]
    ) -> EngineRequest:
        """The request for the source plus this turn's tool calls and responses so far."""
        kinds = {a.kind for a in self.source.attachments()}
        check_towers(kinds, target.info.modalities, f"The {target.name} path's model")
        transcript, tool_media = self._tool_images(target, transcript)
        prompt, used = self._fit(target, transcript, tools, tool_media)
        self._notes.append(PromptSized(target.name, used, target.info.max_model_len))
        return EngineRequest(
            request_id=f"{target.name}-{uuid.uuid4().hex[:8]}",
            prompt=prompt.text,
            multi_modal_data=media_payloads(self.source.attachments() + tool_media),
            sampling=self.options.sampling,
        )

    def _tool_images(
        self, target: PathEngine, transcript: list[ChatMessage]
    ) -> tuple[list[ChatMessage], list[Attachment]]:
        """This turn's tool messages with their images' placeholders, and those images — for a
        model that sees images (any other reads the result's text, which describes them)."""
        if "image" not in target.info.modalities:
            return transcript, []
        shown: list[ChatMessage] = []
        media: list[Attachment] = []
        for message in transcript:
            loaded = [a for a in map(self._tool_image, message.images) if a is not None]
            if loaded and isinstance(message.data, dict):
                placeholders = Structure(IMAGE_PLACEHOLDER * len(loaded))  # the app's own: not defused
                message = replace(message, data={**message.data, "images": placeholders})
                media.extend(loaded)
            shown.append(message)
        return shown, media

    def _tool_image(self, path: str) -> Attachment | None:
        if path not in self._tool_media:
            try:
                self._tool_media[path] = load_attachment(path)
            except AttachmentError:  # gone since the call (the result's text still describes it)
                self._tool_media[path] = None
        return self._tool_media[path]

    def _fit(
        self,
        target: PathEngine,
        transcript: list[ChatMessage],
        tools: list[dict[str, Any]],
        tool_media: list[Attachment],
    ) -> tuple[RenderedPrompt, int]:
        window, budget = target.info.max_model_len, self.options.sampling.max_tokens
        while True:
            prompt = target.prompts.render(
                self.source.messages() + transcript, tools, think=self.options.think
            )
            # each attachment's placeholder is one token of the text; vLLM expands it
            media = self.source.attachments() + tool_media
            used = prompt.token_count + sum(a.tokens - 1 for a in media)
            if used + budget <= window:
                return prompt, used
            dropped = self.source.drop_oldest() if self.options.trim_history else None
            if dropped is None:
                messages, media_tokens = self.source.messages() + transcript, used - prompt.token_count
                args = (messages, tools, prompt.token_count, media_tokens, budget, window, target.name)
                raise declarations_too_large(target.prompts, *args) or PromptTooLong(
                    f"The prompt ({used} tokens) plus the reply budget ({budget}) exceeds the "
                    f"{target.name} path's context window ({window} tokens).",
                    self.options.too_long_fix,
                )
            self._notes.append(HistoryTrimmed(target.name, dropped))

    # -- running -----------------------------------------------------------------------------
    async def run(self, target: PathEngine) -> AsyncIterator[PipelineEvent]:
        """The turn on one path; it ends with ``Finished``, ``Cancelled`` or ``Failed``."""
        self.check(target)
        async for event in self._path(target):
            yield event

    async def compare(
        self, baseline: PathEngine, optimized: PathEngine, first: str, pause: Callable[[], Awaitable[None]]
    ) -> AsyncIterator[PathEvent | CompareResult]:
        """Both paths' events, the ``first`` path's first (``backend.chat.verdict.first_path``), then a
        ``CompareResult`` if both finished. ``pause`` runs between the paths, so the second is timed
        alone (stock vLLM's worker still spins a while after a request: ``backend.engine.local.quiet``)."""
        if first not in (baseline.name, optimized.name):
            raise ValueError(f"first must be {baseline.name!r} or {optimized.name!r}, got {first!r}")
        self.check(baseline, optimized)
        for target in (baseline, optimized):
            problem = await tokenization_difference(target.prompts, self._checked[target.name][0].prompt)
            if problem:
                yield PathEvent(target.name, Failed(target.name, problem, "rejected"))
                return
        finals: dict[str, Finished] = {}
        order = (baseline, optimized) if first == baseline.name else (optimized, baseline)
        for target in order:
            if target is order[1] and not self.stopped:
                await pause()  # the first path's worker may still spin
            async for event in self._path(target):
                yield PathEvent(target.name, event)
                if isinstance(event, ENDINGS) and not isinstance(event, Finished):
                    return
                if isinstance(event, Finished):
                    finals[target.name] = event
        base, opt = finals[baseline.name], finals[optimized.name]
        parity = compare_tokens(base.token_ids, opt.token_ids, lambda t: optimized.prompts.decode([t]))
        differences = path_differences(baseline.info, optimized.info)
        yield CompareResult(base, opt, parity, differences, kernel_mode(baseline.info, optimized.info))

    async def _path(self, target: PathEngine) -> AsyncIterator[PipelineEvent]:
        self._targets[target.name] = target
        events: AsyncIterator[Any]
        if self.stopped:  # Esc before this path began (e.g. while its engine started)
            events = _stopped(target.name)
        elif self.tools is None:
            request = self._first_request(target, [], [])
            self._request_ids[target.name] = request.request_id
            events = _one_step(target.engine.stream(request), request.prompt)
        else:
            limits = self.tool_limits
            turn = ToolTurn(
                target.engine,
                self.tools,
                [],
                lambda transcript, tools: self._first_request(target, transcript, tools),
                limits.max_steps,
                limits.max_result_chars,
                self._shared.view(target.name),
            )
            self._tool_turns[target.name] = turn
            events = turn.run()
        for note in self._drain():
            yield note
        async for event in events:
            for note in self._drain():
                yield note
            yield event

    def _drain(self) -> list[HistoryTrimmed | PromptSized]:
        notes, self._notes = self._notes, []
        return notes

    async def stop(self) -> None:
        """Stop now: the tool loop at its next boundary, the model's current request at once."""
        self.stopped = True
        for turn in self._tool_turns.values():
            turn.cancel()
        for name, target in self._targets.items():
            running = self._tool_turns.get(name)
            request_id = running.request_id if running else self._request_ids.get(name)
            if request_id:
                await target.engine.abort(request_id)

    def history_extra(self, path: str) -> dict[str, object]:
        """What the history keeps of a path's turn: whether it asked for thinking (as it was sent, not
        as F6 left it by the reply's end) and of a tool loop the timeline and the messages the
        model saw."""
        turn = self._tool_turns.get(path)
        if turn is None or not turn.records:
            return {"think": self.options.think}
        return {
            "think": self.options.think,
            "tools": [r.to_json() for r in turn.records],
            "tool_seconds": round(turn.tool_seconds, 4),
            "final_text": turn.final_text,
            "final_thought": turn.final_thought,
            "transcript": transcript_to_json(turn.transcript),
        }


async def _one_step(events: AsyncIterator[TurnEvent], prompt: str) -> AsyncIterator[TurnEvent | ReplyDelta]:
    """A turn without tools: the engine's events as the reader sees them (answer and thought apart)."""
    stream = ReplyStream(Prompted.by(prompt))
    async for event in events:
        if isinstance(event, Finished | Cancelled):
            ended = finish_step(stream, event)
            if ended.rest is not None:
                yield ended.rest
            yield replace(event, text=ended.reply.answer, thought=ended.reply.thought, metrics=ended.metrics)
        else:
            yield read_step(stream, event)


async def _stopped(request_id: str) -> AsyncIterator[TurnEvent]:
    yield Cancelled(request_id, "", (), TurnMetrics())
