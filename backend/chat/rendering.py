"""How a caller receives a turn's events: a ``TurnRenderer`` with one method per kind, and ``dispatch``.

The chat app draws widgets from them, ``ask`` prints; both get every event of the turn pipeline
(``backend.chat.pipeline``) through ``dispatch``, the one place that tells the kinds apart.
"""

from __future__ import annotations

from backend.chat.pipeline import ENDINGS, HistoryTrimmed, PipelineEvent, PromptSized
from backend.engine.protocol import Cancelled, Failed, Finished, MetricsUpdate, Started
from backend.engine.reply_events import ReplyDelta
from backend.tools.loop import StepLimitReached, ToolFinished, ToolStarted


class TurnRenderer:
    """What a caller shows of a turn; each method does nothing until overridden."""

    async def on_started(self, event: Started) -> None:
        return None

    async def on_delta(self, event: ReplyDelta) -> None:
        """New answer text (``event.text``) and thought text (``event.thought``)."""
        return None

    async def on_metrics(self, event: MetricsUpdate) -> None:
        return None

    async def on_tool_started(self, event: ToolStarted) -> None:
        return None

    async def on_tool_finished(self, event: ToolFinished) -> None:
        return None

    async def on_step_limit(self, event: StepLimitReached) -> None:
        return None

    async def on_history_trimmed(self, event: HistoryTrimmed) -> None:
        return None

    async def on_prompt_sized(self, event: PromptSized) -> None:
        return None

    async def on_finished(self, event: Finished) -> None:
        return None

    async def on_cancelled(self, event: Cancelled) -> None:
        return None

    async def on_failed(self, event: Failed) -> None:
        return None


async def dispatch(renderer: TurnRenderer, event: PipelineEvent) -> bool:
    """Hand ``event`` to the renderer's method for its kind; True when it ended the turn."""
    match event:
        case Started():
            await renderer.on_started(event)
        case ReplyDelta():
            await renderer.on_delta(event)
        case MetricsUpdate():
            await renderer.on_metrics(event)
        case ToolStarted():
            await renderer.on_tool_started(event)
        case ToolFinished():
            await renderer.on_tool_finished(event)
        case StepLimitReached():
            await renderer.on_step_limit(event)
        case HistoryTrimmed():
            await renderer.on_history_trimmed(event)
        case PromptSized():
            await renderer.on_prompt_sized(event)
        case Finished():
            await renderer.on_finished(event)
        case Cancelled():
            await renderer.on_cancelled(event)
        case Failed():
            await renderer.on_failed(event)
    return isinstance(event, ENDINGS)
