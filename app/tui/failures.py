"""Wrapping callbacks so their unexpected errors reach the app's one reporter.

Textual exits the app on an exception that escapes a handler, an action, a worker or a
callback. The app catches its own handlers' and actions' errors where Textual dispatches them
(``GemmaChatApp._dispatch_message`` and ``_dispatch_action``) and its workers' in one
``on_worker_state_changed``; the callbacks it hands to Textual (screen results, palette
commands, timers) go through ``guarded``. Each error goes to ``report_failure``: the traceback
to the log, one sentence to the screen, and the chat, the prompt and the attachments stay.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol


class FailureSink(Protocol):
    def report_failure(self, what: str, error: Exception) -> str: ...


def guarded(sink: FailureSink, what: str, callback: Callable[..., Any]) -> Callable[..., Awaitable[None]]:
    """``callback`` (sync or async) with its exceptions reported instead of raised."""

    @functools.wraps(callback)
    async def run(*args: Any) -> None:
        try:
            result = callback(*args)
            if inspect.isawaitable(result):
                await result
        except Exception as error:
            sink.report_failure(what, error)

    return run
