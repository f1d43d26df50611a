"""A long chat on screen a page at a time (issue 64, item 10): it opens with its last
``SHOWN_PAGE`` turns (``backend.chat.conversation`` holds its last ``HISTORY_TURNS``), and the
``EarlierButton`` above them shows a page more each time it is pressed — from the turns held
first, then from the history."""

from __future__ import annotations

from typing import Any, Protocol

from textual.containers import VerticalScroll
from textual.widgets import Button

from app.tui import turn_runs
from app.tui.widgets.earlier_button import SHOWN_PAGE, EarlierButton, label
from backend.chat.conversation import Conversation, Turn


class EarlierHost(Protocol):
    conversation: Conversation
    _first_shown: Turn | None

    @property
    def messages_view(self) -> VerticalScroll: ...
    def query_one(self, selector: Any, expect_type: Any = ...) -> Any: ...
    def _report_store(self) -> None: ...


class EarlierActions:
    """Mixed into ``GemmaChatApp``."""

    _first_shown: Turn | None = None
    """The oldest turn on screen (None: every turn is)."""

    async def _show_chat_turns(self: EarlierHost) -> None:
        """The chat's last ``SHOWN_PAGE`` turns, below a button for the rest where there is more."""
        view = self.messages_view
        await view.remove_children()
        held = self.conversation.turns
        shown = held[-SHOWN_PAGE:]
        self._first_shown = shown[0] if len(shown) < len(held) or self.conversation.earlier else None
        widgets: list[Any] = [turn_runs.turn_view(t) for t in shown]
        if self._first_shown is not None:
            widgets.insert(0, EarlierButton(len(held) - len(shown), self.conversation.earlier))
        await view.mount_all(widgets)

    async def on_button_pressed(self: EarlierHost, event: Button.Pressed) -> None:
        if not isinstance(event.button, EarlierButton) or self._first_shown is None:
            return
        event.stop()
        held = self.conversation.turns
        first = next((i for i, t in enumerate(held) if t is self._first_shown), 0)
        if first < SHOWN_PAGE and self.conversation.earlier:
            first += self.conversation.load_earlier(SHOWN_PAGE)
            self._report_store()
        start = max(first - SHOWN_PAGE, 0)
        self._first_shown = held[start] if start or self.conversation.earlier else None
        await self.messages_view.mount_all(
            [turn_runs.turn_view(t) for t in held[start:first]], after=event.button
        )
        if self._first_shown is None:
            await event.button.remove()
        else:
            event.button.label = label(start, self.conversation.earlier)
