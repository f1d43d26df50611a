"""``ReportingApp``: a Textual app on which no error of ours ends the app silently.

Textual exits on an exception that escapes a handler, an action, a worker or a callback. Here
handlers and actions are caught where Textual dispatches them (``_dispatch_message``,
``_dispatch_action``), workers in one ``on_worker_state_changed`` (every worker of the app is
made with ``exit_on_error=False``), and the callbacks handed to Textual — screen results,
palette commands, timers — go through ``guard``. Each error goes to ``report_failure``: the
traceback to the log, one sentence to the screen, and the chat, the prompt and the attachments
stay as they were. Only an error Textual itself cannot recover from reaches
``_handle_exception``; then ``fatal`` holds the one line the terminal gets.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.dom import DOMNode
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from app.failure_log import record_failure
from app.tui.untrusted import escaped
from backend.terminal_text import terminal_safe


class ReportingApp(App[None]):
    def __init__(self, log_path: Path | None = None) -> None:
        super().__init__()
        self.log_path = log_path
        """Where unexpected errors' tracebacks go (the chat's log; None: the default error log)."""
        self.fatal: str | None = None
        """Set when an error had to end the app: the one line the terminal gets."""

    def report_failure(self, what: str, error: Exception) -> str:
        """Log ``error``'s traceback and show one sentence naming what failed and where the log is."""
        message = record_failure(what, error, self.log_path)
        self.notify(message, title="Internal error", severity="error", timeout=30)
        return message

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Textual's ``notify``; a notice can quote a server, a tool, a title or a file name, so
        it is shown as text, never markup (``app.tui.untrusted``); ``markup=True`` only for the
        app's own markup, where anything quoted in it went through ``untrusted.escaped``."""
        super().notify(
            terminal_safe(message) if markup else escaped(message),
            title=terminal_safe(title),
            severity=severity,
            timeout=timeout,
            markup=True,
        )

    def guard(self, what: str, callback: Callable[..., Any]) -> Callable[..., Awaitable[None]]:
        """``callback`` (sync or async) with its exceptions reported instead of raised."""

        @functools.wraps(callback)
        async def run(*args: Any) -> None:
            try:
                result = callback(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception as error:
                self.report_failure(what, error)

        return run

    async def _dispatch_action(self, namespace: DOMNode, action_name: str, params: Any) -> bool:
        try:
            return await super()._dispatch_action(namespace, action_name, params)
        except Exception as error:
            self.report_failure(f"running the {action_name.replace('_', ' ')} action", error)
            return True

    async def _dispatch_message(self, message: Message) -> None:
        try:
            await super()._dispatch_message(message)
        except Exception as error:
            self.report_failure(f"handling {type(message).__name__}", error)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state == WorkerState.ERROR and isinstance(worker.error, Exception):
            self.report_failure(worker.description or worker.name or "a background task", worker.error)

    def _handle_exception(self, error: Exception) -> None:
        """Textual's last resort (an error outside every net above): the app must exit."""
        if self.fatal is None:
            self.fatal = record_failure("running the app", error, self.log_path)
        super()._handle_exception(error)

    def push_screen(self, screen: Any, callback: Any = None, *args: Any, **kwargs: Any) -> Any:
        """Textual's ``push_screen``, with the screen's result callback guarded."""
        if callback is not None:
            callback = self.guard(f"acting on the {type(screen).__name__} result", callback)
        return super().push_screen(screen, callback, *args, **kwargs)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette's commands (``palette_commands``), each callback guarded."""
        for command in self.palette_commands(screen):
            yield command._replace(callback=self.guard(f"running {command.title!r}", command.callback))

    def palette_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """Textual's own commands; the app adds its own."""
        yield from super().get_system_commands(screen)
