"""Ctrl+L: the chats list — search, switch, rename, delete."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from app.tui.untrusted import literal
from backend.chat.store import ChatStore


@dataclass(frozen=True)
class ChatAction:
    action: str
    """``open``, ``rename`` or ``delete``."""
    chat_id: int


class ChatsScreen(ModalScreen[ChatAction | None]):
    BINDINGS = [
        Binding("escape", "cancel", "Close"),
        Binding("ctrl+r", "rename", "Rename", priority=True),
        Binding("ctrl+d", "delete", "Delete", priority=True),
    ]

    def __init__(self, store: ChatStore) -> None:
        super().__init__()
        self.store = store

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Chats — type to search · Enter open · Ctrl+R rename · Ctrl+D delete · Esc close")
            yield Input(placeholder="search titles and messages", id="search")
            yield OptionList(id="chats")

    def on_mount(self) -> None:
        self._fill("")

    def _fill(self, search: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        chats = self.store.chats(search)
        options.add_options([Option(literal(chat.title), id=str(chat.id)) for chat in chats])
        if options.option_count:
            options.highlighted = 0

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._choose("open")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._choose("open")

    def _choose(self, action: str) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is None or not options.option_count:
            return
        option_id = options.get_option_at_index(options.highlighted).id
        if option_id is not None:
            self.dismiss(ChatAction(action, int(option_id)))

    def action_rename(self) -> None:
        self._choose("rename")

    def action_delete(self) -> None:
        self._choose("delete")

    def action_cancel(self) -> None:
        self.dismiss(None)
