"""Reaching every branch of a chat (``backend.chat.branches``): a palette entry per branch, and a
notice when a chat with several opens — another window's turns are one of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from textual.app import SystemCommand

from app.tui.untrusted import escaped
from backend.chat.branches import Branch, branch_count, branches, show_branch
from backend.chat.conversation import Conversation
from backend.chat.store import ChatStore, StoreError


class BranchHost(Protocol):
    store: ChatStore | None
    conversation: Conversation
    turn: object

    def notify(self, message: str, *, severity: str = ..., timeout: float | None = ...) -> None: ...
    def call_later(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...
    async def _show_chat(self, chat_id: int | None) -> None: ...
    def _branches(self) -> list[Branch]: ...
    def _branch_count(self) -> int: ...
    async def _switch_branch(self, leaf_id: int) -> None: ...

    _told_branches: frozenset[int]


class BranchActions:
    """Mixed into ``GemmaChatApp``."""

    _told_branches: frozenset[int] = frozenset()
    """Chats whose branches were mentioned already (once a session each)."""

    def _branches(self: BranchHost) -> list[Branch]:
        chat = self.conversation.chat_id
        if self.store is None or chat is None:
            return []
        try:
            return branches(self.store, chat)
        except StoreError:
            return []

    def _branch_count(self: BranchHost) -> int:
        chat = self.conversation.chat_id
        if self.store is None or chat is None:
            return 0
        try:
            return branch_count(self.store, chat)
        except StoreError:
            return 0

    def tell_branches(self: BranchHost) -> None:
        count = self._branch_count()  # not every branch's walk: a long chat opens at once
        chat = self.conversation.chat_id
        if count > 1 and chat is not None and chat not in self._told_branches:
            self._told_branches = self._told_branches | {chat}
            self.notify(
                f"This chat has {count} branches (edits, regenerated replies, or another window "
                "writing to it): Ctrl+P → Branch shows the others.",
                timeout=8,
            )

    def branch_commands(self: BranchHost) -> Iterable[SystemCommand]:
        if self._branch_count() < 2:
            return
        found = self._branches()
        shown = self.conversation.turns[-1].message_id if self.conversation.turns else None
        for number, branch in enumerate(found, 1):
            mark = " (shown)" if branch.leaf_id == shown else ""
            yield SystemCommand(
                f"Branch {number} of {len(found)}{mark}: {escaped(branch.preview)}",
                f"Show this branch of the chat ({branch.messages} messages)",
                lambda leaf=branch.leaf_id: self.call_later(self._switch_branch, leaf),
            )

    async def _switch_branch(self: BranchHost, leaf_id: int) -> None:
        chat = self.conversation.chat_id
        if self.store is None or chat is None:
            return
        if self.turn is not None:
            self.notify("A reply is still streaming: press Esc to stop it first.", severity="warning")
            return
        try:
            show_branch(self.store, chat, leaf_id)
        except StoreError as error:
            self.notify(str(error), severity="error", timeout=10)
            return
        await self._show_chat(chat)
