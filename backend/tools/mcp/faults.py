"""Messages from an MCP server that could not be read, as the reason the request waiting for them
fails — at once, with what was wrong — instead of that request waiting for its timeout.

The SDK hands each stdout line it cannot parse to the session as an exception and carries on, so
the request the unreadable line answered never completes: a 3,000-deep schema or a 100,000-deep
result used to end as "no answer within 30 s". A line that is not JSON at all (a server printing
its banner on stdout) answers nothing and is only logged; a line that starts like a JSON-RPC
message but cannot be read fails the request now being waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def route_sdk_log(log_dir: Path) -> None:
    """The MCP SDK's own log — a traceback for each line a server wrote to stdout that is not
    JSON — goes to ``log_dir/mcp-sdk.log``, never to the terminal (``gemma-chat tools`` printed
    them); the server's state says what went wrong."""
    import logging

    path = log_dir / "mcp-sdk.log"
    sdk = logging.getLogger("mcp")
    if any(getattr(h, "baseFilename", None) == str(path) for h in sdk.handlers):
        return
    with contextlib.suppress(OSError):  # a log that cannot be written must not stop the servers
        log_dir.mkdir(parents=True, exist_ok=True)
        sdk.addHandler(logging.FileHandler(path, encoding="utf-8"))
        sdk.propagate = False


class UnreadableAnswer(Exception):
    """A server's answer that could not be read; the text says why."""


def unreadable(error: Exception) -> str | None:
    """Why a message meant as JSON-RPC could not be read; None for a line that is not JSON at all."""
    from pydantic import ValidationError

    if not isinstance(error, ValidationError) or not error.errors():
        return None
    first = error.errors()[0]
    line = first.get("input")
    if not isinstance(line, str | bytes) or not str(line).lstrip().startswith("{"):
        return None
    message = str(first.get("msg", ""))
    if "recursion limit" in message:
        return "its answer is nested too deeply to read (JSON nested beyond the reader's limit)"
    return f"its answer could not be read ({message[:200]})"


class Faults:
    """The unreadable answers of one server's session."""

    def __init__(self) -> None:
        self.reason = ""
        self._event: asyncio.Event | None = None

    def record(self, error: Exception) -> None:
        """The session's fault handler (on the host's loop)."""
        reason = unreadable(error)
        if reason is None:
            return
        self.reason = reason
        self._wake().set()

    def _wake(self) -> asyncio.Event:
        if self._event is None:
            self._event = asyncio.Event()
        return self._event

    async def race(self, awaitable: Awaitable[T]) -> T:
        """``awaitable``'s result, or ``UnreadableAnswer`` as soon as an answer cannot be read."""
        event = self._wake()
        event.clear()
        self.reason = ""
        work: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        fault: asyncio.Task[Any] = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({work, fault}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (work, fault):
                if not pending.done():
                    pending.cancel()
                    with contextlib.suppress(BaseException):
                        await pending
        if work.done() and not work.cancelled():
            return work.result()
        raise UnreadableAnswer(self.reason)
