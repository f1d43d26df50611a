"""A turn with tools: generate, run the calls the reply asks for, feed the results back, repeat —
until the model answers without calling, the step limit is reached, or the user cancels.

``ToolTurn.run()`` yields the engine's events of every step (so the reply streams as usual) and
``ToolEvent`` values around each call; it ends with exactly one ``Finished`` / ``Cancelled`` /
``Failed`` whose text is everything the user should read and whose token ids are the model's
tokens of all steps (what compare mode's parity verdict compares). Afterwards ``records`` is
the timeline and ``transcript`` the messages to keep in the history (calls and responses).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.engine.metrics import TurnMetrics, combine_metrics
from backend.engine.protocol import Cancelled, Engine, EngineRequest, Failed, Finished, TurnEvent
from backend.engine.reply_events import ReplyDelta, finish_step, read_step
from backend.errors import GemmaChatError
from backend.gemma4.messages import ChatMessage
from backend.gemma4.reply import Prompted, Reply, ReplyStream
from backend.gemma4.tool_call import ToolCall
from backend.tools.runner import ToolRecord, ToolRunner

MAX_CALLS_PER_STEP = 16
"""Calls past this many in one reply are recorded as skipped, not run (a reply of a thousand
calls would otherwise run them all, and fill the next prompt with their responses)."""

RequestBuilder = Callable[[list[ChatMessage], list[dict[str, Any]]], EngineRequest]
"""Turns the messages so far (and the tool declarations) into the next step's request."""


@dataclass(frozen=True)
class ToolStarted:
    step: int
    index: int
    call: ToolCall


@dataclass(frozen=True)
class ToolFinished:
    index: int
    record: ToolRecord


@dataclass(frozen=True)
class StepLimitReached:
    steps: int


ToolEvent = ToolStarted | ToolFinished | StepLimitReached


@dataclass
class ToolTurn:
    engine: Engine
    runner: ToolRunner
    messages: list[ChatMessage]
    build_request: RequestBuilder
    max_steps: int = 5
    max_result_chars: int = 4000
    cache: MutableMapping[str, ToolRecord] | None = None
    """A comparison's results of the other path's calls (``backend.tools.shared_results``)."""
    records: list[ToolRecord] = field(default_factory=list)
    transcript: list[ChatMessage] = field(default_factory=list)
    request_id: str | None = None
    """The request streaming now (``abort`` it to stop the model)."""
    tool_seconds: float = 0.0
    cancelled: bool = False
    final_thought: str = ""
    """The last step's thinking."""
    final_text: str = ""
    """The last step's text alone (earlier steps' text is in ``transcript``): the history keeps it
    as the turn's closing message, so no text reaches the model twice."""

    def cancel(self) -> None:
        """Stop at the next boundary (the caller also aborts ``request_id`` to stop the model now)."""
        self.cancelled = True

    async def run(self) -> AsyncIterator[TurnEvent | ReplyDelta | ToolEvent]:
        declarations = self.runner.registry.declarations()
        shown: list[str] = []
        thoughts: list[str] = []
        token_ids: list[int] = []
        step_metrics: list[TurnMetrics] = []
        stream = ReplyStream()
        first_id = ""
        for step in range(1, self.max_steps + 1):
            try:
                request = self.build_request(self.messages + self.transcript, declarations)
            except GemmaChatError as error:  # e.g. tool results pushed the prompt past the window
                if step == 1:
                    raise
                yield Failed(first_id, f"{error.problem} (after the tool results of step {step - 1})")
                return
            self.request_id = request.request_id
            first_id = first_id or request.request_id
            stream.next_step(Prompted.by(request.prompt))
            final: Finished | Cancelled | Failed | None = None
            async for event in self.engine.stream(request):
                if isinstance(event, Finished | Cancelled):
                    final = event
                    continue
                read = read_step(stream, event)
                if isinstance(read, Failed):
                    final = read
                else:
                    yield read
            if isinstance(final, Failed) or final is None:
                yield final or Failed(first_id, "The engine ended the turn without a result.")
                return
            token_ids.extend(final.token_ids)
            ended = finish_step(stream, final)
            reply = ended.reply
            step_metrics.append(ended.metrics)
            if ended.rest is not None:
                yield ended.rest
            self.final_text, self.final_thought = reply.answer, reply.thought
            shown += [reply.answer] if reply.answer else []
            thoughts += [reply.thought] if reply.thought else []
            metrics = combine_metrics(step_metrics)
            if isinstance(final, Cancelled) or self.cancelled:
                yield Cancelled(first_id, _joined(shown), tuple(token_ids), metrics, _joined(thoughts))
                return
            if not reply.calls:
                yield Finished(
                    first_id,
                    _joined(shown),
                    tuple(token_ids),
                    metrics,
                    final.finish_reason,
                    _joined(thoughts),
                )
                return
            last = step == self.max_steps
            async for tool_event in self._run_calls(step, reply, skip=last):
                yield tool_event
            if self.cancelled:
                yield Cancelled(first_id, _joined(shown), tuple(token_ids), metrics, _joined(thoughts))
                return
        yield StepLimitReached(self.max_steps)
        self.final_text, self.final_thought = (
            f"(stopped after {self.max_steps} tool steps: the step limit)",
            "",
        )
        shown.append(self.final_text)
        yield Finished(
            first_id,
            _joined(shown),
            tuple(token_ids),
            combine_metrics(step_metrics),
            "tool_steps",
            _joined(thoughts),
        )

    async def _run_calls(self, step: int, parsed: Reply, skip: bool) -> AsyncIterator[ToolEvent]:
        """Run the step's calls in order (``skip``: the last allowed step — the model could not read
        the results, so none runs). Past ``MAX_CALLS_PER_STEP`` calls, the rest are one record and
        one response, naming how many were not run and of which tools: a reply with a thousand
        calls costs the timeline and the next prompt what a reply with seventeen does."""
        kept, extra = list(parsed.calls[:MAX_CALLS_PER_STEP]), parsed.calls[MAX_CALLS_PER_STEP:]
        summary = _summary(extra) if extra else None
        shown = [*kept, summary] if summary is not None else kept
        calls = [
            {"type": "function", "function": {"name": c.name or "unknown", "arguments": c.arguments}}
            for c in shown
        ]
        self.transcript.append(
            ChatMessage("assistant", parsed.answer, tool_calls=tuple(calls), thought=parsed.thought)
        )
        for position, call in enumerate(shown):
            index = len(self.records)
            yield ToolStarted(step, index, call)
            if self.cancelled:
                record = ToolRecord(
                    step, call.name, call.arguments, "cancelled", message="stopped by the user"
                )
            elif skip:
                message = f"not run: the step limit ({self.max_steps}) was reached"
                record = ToolRecord(step, call.name, call.arguments, "skipped", message=message)
            elif position >= MAX_CALLS_PER_STEP:
                message = f"not run: {_many(extra)} past the {MAX_CALLS_PER_STEP} one reply may make"
                record = ToolRecord(step, call.name, call.arguments, "skipped", message=message)
            else:
                record = await self._run_one(call, step)
            self.tool_seconds += 0.0 if record.reused else record.duration_s
            self.records.append(record)
            yield ToolFinished(index, record)
            response = record.response(self.max_result_chars)
            images = record.images if record.ok else ()
            self.transcript.append(ChatMessage("tool", "", name=record.name, data=response, images=images))

    async def _run_one(self, call: ToolCall, step: int) -> ToolRecord:
        import asyncio

        try:  # bounded at once: the timeline, the history and the model all get the same cut copy
            return (await self.runner.run(call, step, self.cache)).bounded(self.max_result_chars)
        except asyncio.CancelledError:
            self.cancelled = True
            return ToolRecord(step, call.name, call.arguments, "cancelled", message="stopped by the user")


def _many(calls: Sequence[ToolCall]) -> str:
    """``984 more calls (get_weather ×500, search ×484)``: the calls past the bound, by tool."""
    counts = Counter(call.name or "unknown" for call in calls)
    tools = ", ".join(f"{name[:64]} ×{count}" for name, count in counts.most_common(8))
    more = f", {len(counts) - 8} more tools" if len(counts) > 8 else ""
    return f"{len(calls)} more call{'s' if len(calls) != 1 else ''} ({tools}{more})"


def _summary(calls: Sequence[ToolCall]) -> ToolCall:
    """The first call past the bound stands for them all (its tool's name, no arguments)."""
    return ToolCall(calls[0].name or "unknown", {})


def _joined(parts: list[str]) -> str:
    return "\n\n".join(p for p in parts if p)
