"""What chat history is made of, and the checks before its database is opened: the store's
errors, its stored values, and the tests that tell a locked database from a damaged one.
``backend.chat.store`` re-exports the names its callers use."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.engine.metrics import TurnMetrics
from backend.errors import GemmaChatError

BUSY_TIMEOUT_S = 10.0
"""How long an operation waits for another program's lock before it fails (and is retried later)."""


class StoreError(GemmaChatError):
    """History could not be written or read; the conversation stays in memory."""


class ChatGone(StoreError):
    """The chat (or the message a new one follows) is no longer in the database: another window
    deleted it. The conversation saves itself again as a new chat."""


@dataclass(frozen=True)
class StoredMessage:
    id: int
    chat_id: int
    parent_id: int | None
    role: str
    text: str
    path: str | None = None
    metrics: TurnMetrics | None = None
    attachments: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatSummary:
    id: int
    title: str
    system_prompt: str
    updated: float


def busy(error: sqlite3.Error) -> bool:
    text = str(error).lower()
    return "locked" in text or "busy" in text


def is_corrupt(path: Path) -> bool:
    """True only when ``path`` holds something SQLite calls damaged (not when it is merely locked)."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error:
        return False
    try:
        result = db.execute("PRAGMA quick_check").fetchone()
        return result is None or result[0] != "ok"
    except sqlite3.DatabaseError as error:
        return not busy(error)
    finally:
        db.close()


def check_side_files(path: Path) -> None:
    """SQLite's own files beside the database (``-wal``, ``-shm``, ``-journal``) must be regular
    files: a directory or a FIFO there makes every open fail as if the database were damaged, and a
    healthy database would be moved aside for it."""
    for suffix in ("-wal", "-shm", "-journal"):
        side = Path(f"{path}{suffix}")
        if side.exists() and not side.is_file():
            kind = "a directory" if side.is_dir() else "not a regular file"
            raise StoreError(
                f"The history database's {suffix.lstrip('-')} file {side} is {kind}, so SQLite cannot "
                "open the history (the database itself was left as it is).",
                f"Chats are kept in memory this session; remove or rename {side} and start again.",
            )
