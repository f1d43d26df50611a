"""A measuring request's final event: speculation's measurements (the probe, the first start,
drafts by load) run short greedy requests to their end and need the ``Finished`` one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from backend.engine.protocol import EngineRequest, Finished
from backend.errors import GemmaChatError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from backend.engine.protocol import TurnEvent


class Streams(Protocol):
    def stream(self, request: EngineRequest) -> AsyncIterator[TurnEvent]: ...


async def final_reply(engine: Streams, request: EngineRequest, failed: str, fix: str) -> Finished:
    """``request`` run to its end on ``engine``: its ``Finished`` event; a ``GemmaChatError``
    ``"{failed}: {why}."`` (with ``fix``) where it ended any other way."""
    events = [event async for event in engine.stream(request)]
    final = events[-1] if events else None
    if not isinstance(final, Finished):
        detail = getattr(final, "message", type(final).__name__)
        raise GemmaChatError(f"{failed}: {detail}.", fix)
    return final
