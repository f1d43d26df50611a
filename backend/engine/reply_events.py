"""An engine's raw events of one model step as the reader sees them: new answer and thought text
(``ReplyDelta``) while it streams, the whole reply read once it ends (``finish_step``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from backend.engine.metrics import TurnMetrics
from backend.engine.protocol import Cancelled, Delta, Failed, Finished, MetricsUpdate, Started, TurnEvent
from backend.gemma4.reply import Reply, ReplyStream, read_reply


@dataclass(frozen=True)
class ReplyDelta:
    """New text of a reply as the user reads it: answer and thought apart, markers and calls
    removed (the turn pipeline makes these from the engine's raw ``Delta`` events)."""

    request_id: str
    text: str
    thought: str
    token_ids: tuple[int, ...]


def read_step(stream: ReplyStream, event: TurnEvent) -> ReplyDelta | Started | MetricsUpdate | Failed:
    """A step's raw engine event as the reader sees it. ``Finished``/``Cancelled`` are not handled
    here: ``finish_step`` reads the whole reply."""
    if isinstance(event, Delta):
        piece = stream.feed(event.text, len(event.token_ids))
        return ReplyDelta(event.request_id, piece.answer, piece.thought, event.token_ids)
    if isinstance(event, Finished | Cancelled):
        raise TypeError("a step's end goes to finish_step")
    return event


@dataclass(frozen=True)
class StepEnd:
    """A model step that ended, read whole."""

    reply: Reply
    rest: ReplyDelta | None
    """What the stream held back (a possible marker or label) and is shown now, if anything."""
    metrics: TurnMetrics
    """The step's figures, its thought tokens counted."""


def finish_step(stream: ReplyStream, end: Finished | Cancelled) -> StepEnd:
    """The whole reply of a step that ended (a call the model closed with its stop token counts
    only when it ended on its own); the stream's thought count starts again for the next step."""
    complete = isinstance(end, Finished) and end.finish_reason not in ("length", "abort")
    reply = read_reply(end.text, stream.prompted, complete=complete)
    piece = stream.flush(reply.answer, reply.thought)
    rest = (
        ReplyDelta(end.request_id, piece.answer, piece.thought, ()) if piece.answer or piece.thought else None
    )
    metrics = replace(end.metrics, thought_tokens=stream.thought_tokens)
    stream.thought_tokens = 0
    return StepEnd(reply, rest, metrics)
