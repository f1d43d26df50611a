"""Chat-management actions of the app: new chat, chats list, rename, system prompt, copy, export."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Protocol

from app.tui.screens.chats import ChatAction, ChatsScreen
from app.tui.screens.drafts import DraftsScreen
from app.tui.screens.text_prompt import TextPromptScreen
from app.tui.widgets.message_view import MessageView
from backend.chat.conversation import Conversation
from backend.chat.export import chat_markdown, receipt_json
from backend.chat.store import ChatStore, StoreError
from backend.config.settings import Settings
from backend.engine.session.pool import EnginePool


class ChatHost(Protocol):
    """What the chat actions need of the app they are mixed into."""

    store: ChatStore | None
    conversation: Conversation
    settings: Settings
    pool: EnginePool
    turn: object
    sub_title: str

    @property
    def messages_view(self) -> Any: ...
    def notify(self, message: str, *, severity: str = ..., timeout: float | None = ...) -> None: ...
    def push_screen(self, screen: Any, callback: Any = ...) -> Any: ...
    def copy_to_clipboard(self, text: str) -> None: ...
    async def _show_chat(self, chat_id: int | None) -> None: ...
    def _rename(self, chat_id: int) -> None: ...
    def _last_reply(self) -> MessageView | None: ...
    def export(self, kind: str) -> Path: ...
    def call_later(self, callback: Any, *args: Any, **kwargs: Any) -> bool: ...


class ChatActions:
    """Mixed into ``GemmaChatApp``; uses its store, conversation, settings and widgets."""

    async def action_new_chat(self: ChatHost) -> None:
        if self.turn is None:
            await self._show_chat(None)

    def action_chats(self: ChatHost) -> None:
        if self.turn is not None:
            self.notify("A reply is still running: press Esc to stop it first.", severity="warning")
            return
        if self.store is None:
            self.notify("History is unavailable (see the earlier error).", severity="error")
            return

        async def chosen(choice: ChatAction | None) -> None:
            if choice is None or self.store is None:
                return
            if choice.action == "open":
                await self._show_chat(choice.chat_id)
            elif choice.action == "delete":
                self.store.delete_chat(choice.chat_id)
                if choice.chat_id == self.conversation.chat_id:
                    await self._show_chat(None)
            elif choice.action == "rename":
                self._rename(choice.chat_id)

        self.push_screen(ChatsScreen(self.store), chosen)

    def _rename(self: ChatHost, chat_id: int) -> None:
        def renamed(title: str | None) -> None:
            if title and self.store is not None:
                self.store.rename(chat_id, title)
                if chat_id == self.conversation.chat_id:
                    self.conversation.title = self.sub_title = title

        self.push_screen(TextPromptScreen("New title:"), renamed)

    def action_system_prompt(self: ChatHost) -> None:
        def chosen(text: str | None) -> None:
            if text is not None:
                self.conversation.set_system_prompt(text)
                self.notify("System prompt set for this chat.")

        self.push_screen(
            TextPromptScreen("System prompt for this chat:", self.conversation.system_prompt), chosen
        )

    def _last_reply(self: ChatHost) -> MessageView | None:
        replies = [v for v in self.messages_view.query(MessageView) if v.role != "user"]
        return replies[-1] if replies else None

    def action_copy_reply(self: ChatHost) -> None:
        reply = self._last_reply()
        if reply is not None:
            self.copy_to_clipboard(reply.text)
            self.notify("Reply copied.")

    def action_show_drafts(self: ChatHost) -> None:
        """The last reply with its accepted drafts shaded (the engine's per-step figures)."""
        reply = self._last_reply()
        metrics = reply.metrics if reply is not None else None
        engine = self.pool.engine(reply.path or "") if reply is not None else None
        if reply is None or metrics is None or not reply.token_ids or engine is None:
            self.notify("No reply of this session to show drafts of.", severity="warning")
        elif not metrics.drafted_tokens:
            self.notify("The last reply was decoded without drafts (its path does not speculate here).")
        elif not metrics.step_tokens:
            self.notify("The engine's figures for the last reply do not tell its steps apart for certain.")
        else:
            self.push_screen(DraftsScreen(reply.token_ids, metrics, engine.decode))

    def action_copy_code(self: ChatHost) -> None:
        reply = self._last_reply()
        code = reply.last_code_block() if reply else None
        if code is None:
            self.notify("The last reply has no code block.", severity="warning")
            return
        self.copy_to_clipboard(code)
        self.notify("Code block copied.")

    def _open_store(self: ChatHost) -> ChatStore | None:
        try:
            store = ChatStore(self.settings.history_path())
        except StoreError as error:
            self.call_later(self.notify, str(error), severity="error", timeout=15)
            return None
        if store.moved_aside is not None:
            moved = f"The history database was unreadable; moved aside to {store.moved_aside}."
            self.call_later(self.notify, moved, severity="error")
        read_only = store.read_only_notice()
        if read_only is not None:  # another version's database: shown, never written into
            self.call_later(self.notify, read_only, severity="warning", timeout=15)
        return store

    def try_export(self: ChatHost, kind: str) -> Path | None:
        """``export``, with a failure to write said in the UI (the chat itself is untouched)."""
        try:
            return self.export(kind)
        except OSError as error:
            self.notify(export_problem(error), severity="error", timeout=15)
            return None

    def export(self: ChatHost, kind: str) -> Path:
        folder = (self.settings.data_dir or self.settings.history_path().parent) / "exports"
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        if kind == "markdown":
            target = folder / f"chat-{stamp}.md"
            target.write_text(chat_markdown(self.conversation))
        else:
            engines = {p: s.info.engine_args for p, s in self.pool.states.items() if s.info is not None}
            target = folder / f"receipt-{stamp}.json"
            target.write_text(receipt_json(self.conversation, json.loads(json.dumps(engines, default=str))))
        self.notify(f"Exported to {target}")
        return target


EXPORTS = (
    ("Export Markdown", "Write this chat as Markdown", "markdown"),
    ("Export receipt (JSON)", "Chat + engine args + versions + figures", "json"),
)
"""The palette's export entries: title, what it writes, kind."""


def export_problem(error: OSError) -> str:
    """What a failed export says: the path, what is wrong there, and what to do."""
    where = error.filename or "the exports folder"
    if isinstance(error, FileExistsError | NotADirectoryError):
        return (
            f"Not exported: {where} is a file where the exports folder belongs. Move it away, or set "
            "data_dir to another folder."
        )
    if isinstance(error, PermissionError):
        return (
            f"Not exported: {where} cannot be written (permission denied). Make it writable, or set "
            "data_dir to another folder."
        )
    return f"Not exported: {where}: {error.strerror or error}."
