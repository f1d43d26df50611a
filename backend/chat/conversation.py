"""One chat as the app holds it: the visible branch of turns, mirrored to the store when it can be.

Writes go through ``_save``: a failing store records the error in ``last_store_error`` and
the conversation carries on in memory (nothing the user typed or received is lost). A chat opens
with its last ``HISTORY_TURNS`` turns; ``load_earlier`` brings the ones before, a page at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from backend.chat.store import ChatGone, ChatStore, StoredMessage, StoreError
from backend.engine.metrics import TurnMetrics
from backend.gemma4.messages import ChatMessage, MediaKind, Role
from backend.media.attachment import Attachment, AttachmentError
from backend.media.load import load_attachment
from backend.tools.transcript import transcript_from_json

HISTORY_TURNS = 400
"""The most turns a chat opens with, its latest (issue 64, item 10): a 100,000-message chat opens
as fast as a short one and holds as little. More than a context window's worth of ordinary turns;
the model never saw more than the window anyway (the oldest are dropped until the prompt fits)."""


@dataclass(frozen=True)
class Turn:
    role: str
    text: str
    path: str | None = None
    metrics: TurnMetrics | None = None
    message_id: int | None = None
    extra: dict[str, object] = field(default_factory=dict)
    attachments: tuple[Attachment, ...] = ()


class Conversation:
    def __init__(self, store: ChatStore | None, chat_id: int | None = None) -> None:
        self.store = store
        self.chat_id = chat_id
        self.title = "New chat"
        self.system_prompt = ""
        self.turns: list[Turn] = []
        self.last_store_error: str | None = None
        self.earlier = False
        """Whether the stored branch has turns before the first one held (a long chat opens with
        its last ``HISTORY_TURNS``; ``load_earlier`` brings more)."""
        self._saved_anew = False
        """Set where the stored chat was deleted elsewhere and the next save starts it again."""
        self.think: bool | None = None
        """This chat's thinking mode (None: the setting's); its replies record it, so it is
        remembered with the chat."""
        if store is not None and chat_id is not None:
            self._load(store, chat_id)

    def _load(self, store: ChatStore, chat_id: int) -> None:
        summary = store.chat(chat_id)
        self.title, self.system_prompt = summary.title, summary.system_prompt
        missing: list[str] = []
        stored, self.earlier = store.branch_tail(chat_id, HISTORY_TURNS)
        self.turns = _turns(stored, missing)
        said = [bool(t.extra["think"]) for t in self.turns if isinstance(t.extra.get("think"), bool)]
        self.think = said[-1] if said else None
        if missing:
            self.last_store_error = (
                f"{len(missing)} attachment(s) of this chat could not be loaded again: {'; '.join(missing)}"
            )

    def load_earlier(self, count: int) -> int:
        """Put up to ``count`` of the stored turns before the first one held in front of it; how
        many came (0 where none are left, or the store cannot be read)."""
        first = self.turns[0].message_id if self.turns else None
        if not self.earlier or self.store is None or self.chat_id is None or first is None:
            return 0
        missing: list[str] = []
        try:
            stored, self.earlier = self.store.branch_before(self.chat_id, first, count)
        except StoreError as error:
            self.last_store_error = str(error)
            return 0
        self.turns[:0] = _turns(stored, missing)
        return len(stored)

    def _save(self, write: Callable[[ChatStore, int], object]) -> int | None:
        """Run ``write(store, chat_id)``, creating the chat first if needed; its id result, if any."""
        if self.store is None:
            return None
        try:
            if self.chat_id is None:
                self.chat_id = self.store.new_chat(self.title, self.system_prompt)
            result = write(self.store, self.chat_id)
            self.last_store_error = None
            return result if isinstance(result, int) else None
        except ChatGone as error:  # another window deleted it: every turn is saved again, in a new chat
            self.chat_id = None
            self.turns = [replace(turn, message_id=None) for turn in self.turns]
            self._saved_anew = True
            self.last_store_error = f"{error.problem} {error.fix}"
            return None
        except StoreError as error:
            self.last_store_error = str(error)
            return None

    def messages(self) -> list[ChatMessage]:
        """What the model sees: the system prompt, then the visible turns."""
        out = [ChatMessage("system", self.system_prompt)] if self.system_prompt else []
        for t in self.turns:
            kinds: tuple[MediaKind, ...] = tuple(a.kind for a in t.attachments)  # type: ignore[misc]
            transcript = t.extra.get("transcript")
            text, thought = t.text, t.extra.get("thought", "")
            if t.role != "user" and isinstance(transcript, list):
                out.extend(transcript_from_json(transcript))  # the turn's tool calls and responses
                text = str(t.extra.get("final_text", t.text))  # earlier steps' text is in the transcript
                thought = t.extra.get("final_thought", "")
            role: Role = "user" if t.role == "user" else "assistant"
            out.append(ChatMessage(role, text, media=kinds, thought=str(thought or "")))
        return out

    def attachments(self) -> list[Attachment]:
        """Every attachment of the visible branch, in prompt order."""
        return [a for t in self.turns for a in t.attachments]

    def drop_oldest(self) -> str | None:
        """Drop the oldest visible turn (the prompt no longer fits); its role, or None for the last."""
        if len(self.turns) <= 1:
            return None
        return self.turns.pop(0).role

    def _set_leaf(self) -> None:
        """The stored chat's visible branch ends where the in-memory one does."""
        parent = self._parent()
        self._save(lambda store, chat: store.set_leaf(chat, parent))

    def _parent(self) -> int | None:
        return self.turns[-1].message_id if self.turns else None

    def add_user(self, text: str, attachments: tuple[Attachment, ...] = ()) -> Turn:
        if not self.turns and self.title == "New chat":
            self.title = " ".join(text.split())[:48] or "New chat"
        self.turns.append(Turn("user", text, attachments=attachments))
        self._sync()
        return self.turns[-1]

    def add_reply(
        self, text: str, path: str, metrics: TurnMetrics | None, extra: dict[str, object] | None = None
    ) -> Turn:
        kept = dict(extra or {})
        if self.think is not None:
            kept.setdefault("think", self.think)
        self.turns.append(Turn("assistant", text, path, metrics, None, kept))
        self._sync()
        return self.turns[-1]

    def _sync(self) -> None:
        """Save every turn the store does not have yet, in order, each under the one before it.

        It stops at the first write that fails: what follows stays in memory (nothing is saved
        without its parent) and the next write that works saves it all, so a full disk or a
        locked database loses neither the prompt nor the reply. Where another window deleted the
        chat, the whole branch is saved again once, as a new chat."""
        notice = None
        for _ in range(2):
            self._saved_anew = False
            for index, turn in enumerate(self.turns):
                if turn.message_id is not None:
                    continue
                message_id = self._store(turn, self.turns[index - 1].message_id if index else None)
                if message_id is None:
                    break
                self.turns[index] = replace(turn, message_id=message_id)
            if not self._saved_anew:
                break
            notice = self.last_store_error
        self.last_store_error = self.last_store_error or notice

    def _store(self, turn: Turn, parent: int | None) -> int | None:
        kept = tuple(self._keep(a) for a in turn.attachments)
        return self._save(
            lambda store, chat: store.add_message(
                chat, parent, turn.role, turn.text, turn.path, turn.metrics, kept, turn.extra
            )
        )

    def _keep(self, attachment: Attachment) -> str:
        """The stored copy's path (by content hash), or the original's if it cannot be copied."""
        if self.store is None:
            return str(attachment.path)
        try:
            return str(self.store.keep_file(attachment.path, attachment.sha256))
        except OSError as error:
            self.last_store_error = f"Could not copy {attachment.path} into the history: {error}."
            return str(attachment.path)

    def pop_reply(self) -> Turn | None:
        """Remove the last reply (for regenerate); the stored one stays as another branch."""
        if self.turns and self.turns[-1].role == "assistant":
            removed = self.turns.pop()
            self._set_leaf()
            return removed
        return None

    def withdraw_user(self) -> Turn | None:
        """Take back the last message when nothing answered it (it was refused before being sent):
        out of the conversation and the history, so it is never sent with a later turn."""
        if not self.turns or self.turns[-1].role != "user":
            return None
        withdrawn = self.turns.pop()
        message_id = withdrawn.message_id
        if message_id is not None:
            parent = self._parent()
            self._save(lambda store, chat: store.withdraw_message(chat, message_id, parent))
        return withdrawn

    def edit_last_user(self, text: str) -> Turn:
        """Replace the last user message (and what followed) with a new branch from its parent."""
        while self.turns and self.turns[-1].role != "user":
            self.turns.pop()
        attachments = self.turns.pop().attachments if self.turns else ()
        self._set_leaf()
        return self.add_user(text, attachments)

    def last_user_text(self) -> str | None:
        return next((t.text for t in reversed(self.turns) if t.role == "user"), None)

    def set_system_prompt(self, text: str) -> None:
        self.system_prompt = text
        self._save(lambda store, chat: store.set_system_prompt(chat, text))

    def rename(self, title: str) -> None:
        self.title = title
        self._save(lambda store, chat: store.rename(chat, title))


def _turns(stored: list[StoredMessage], missing: list[str]) -> list[Turn]:
    return [
        Turn(m.role, m.text, m.path, m.metrics, m.id, dict(m.extra), _reload(m.attachments, missing))
        for m in stored
    ]


def _reload(paths: tuple[str, ...], missing: list[str]) -> tuple[Attachment, ...]:
    """Attachments of a stored message, from their copies in the data directory; each one that
    cannot be loaded (a copy deleted by hand) goes to ``missing`` and the chat's text still loads."""
    loaded = []
    for path in paths:
        try:
            loaded.append(load_attachment(path))
        except AttachmentError as error:
            missing.append(error.problem)
    return tuple(loaded)
