"""Chat history in SQLite under the user data directory: chats, messages (a tree, so edits
branch), attachment references, and each reply's path and figures.

A write that fails (read-only directory, full disk) raises ``StoreError``; callers keep
the conversation in memory. A database that cannot be read is moved aside, never dropped.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from backend.engine.metrics import TurnMetrics
from backend.errors import GemmaChatError

SCHEMA = """
CREATE TABLE IF NOT EXISTS chats (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL,
    current_leaf INTEGER
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    chat_id INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    path TEXT,
    metrics TEXT,
    attachments TEXT NOT NULL DEFAULT '[]',
    extra TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_chat ON messages(chat_id);
"""


class StoreError(GemmaChatError):
    """History could not be written or read; the conversation stays in memory."""


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


class ChatStore:
    """One SQLite file; every method is a short transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.moved_aside: Path | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = self._open(path)
        except sqlite3.DatabaseError:
            self.moved_aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
            path.rename(self.moved_aside)
            self._db = self._open(path)
        except OSError as error:
            raise StoreError(
                f"Cannot open the history database {path}: {error}.", "Check the data directory."
            ) from None

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path)
        db.execute("PRAGMA foreign_keys = ON")
        db.executescript(SCHEMA)
        db.execute("SELECT count(*) FROM chats").fetchone()
        return db

    def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        try:
            with self._db:
                cursor = self._db.execute(sql, params)
                return int(cursor.lastrowid or 0)
        except sqlite3.Error as error:
            raise StoreError(
                f"Could not save to {self.path}: {error}.",
                "The conversation stays in memory; free disk space or fix the data directory's permissions.",
            ) from None

    def new_chat(self, title: str = "New chat", system_prompt: str = "") -> int:
        now = time.time()
        return self._write(
            "INSERT INTO chats(title, system_prompt, created, updated) VALUES (?, ?, ?, ?)",
            (title, system_prompt, now, now),
        )

    def add_message(
        self,
        chat_id: int,
        parent_id: int | None,
        role: str,
        text: str,
        path: str | None = None,
        metrics: TurnMetrics | None = None,
        attachments: tuple[str, ...] = (),
        extra: dict[str, Any] | None = None,
    ) -> int:
        message_id = self._write(
            "INSERT INTO messages(chat_id, parent_id, role, text, path, metrics, attachments, extra, created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                chat_id,
                parent_id,
                role,
                text,
                path,
                json.dumps(asdict(metrics)) if metrics else None,
                json.dumps(list(attachments)),
                json.dumps(extra or {}),
                time.time(),
            ),
        )
        self._write(
            "UPDATE chats SET updated = ?, current_leaf = ? WHERE id = ?", (time.time(), message_id, chat_id)
        )
        return message_id

    def set_leaf(self, chat_id: int, leaf_id: int | None) -> None:
        self._write("UPDATE chats SET current_leaf = ? WHERE id = ?", (leaf_id, chat_id))

    def rename(self, chat_id: int, title: str) -> None:
        self._write("UPDATE chats SET title = ? WHERE id = ?", (title, chat_id))

    def set_system_prompt(self, chat_id: int, system_prompt: str) -> None:
        self._write("UPDATE chats SET system_prompt = ? WHERE id = ?", (system_prompt, chat_id))

    def delete_chat(self, chat_id: int) -> None:
        self._write("DELETE FROM chats WHERE id = ?", (chat_id,))

    def chats(self, search: str = "") -> list[ChatSummary]:
        sql = "SELECT DISTINCT c.id, c.title, c.system_prompt, c.updated FROM chats c"
        params: tuple[Any, ...] = ()
        if search:
            sql += " LEFT JOIN messages m ON m.chat_id = c.id WHERE c.title LIKE ? OR m.text LIKE ?"
            params = (f"%{search}%", f"%{search}%")
        rows = self._db.execute(sql + " ORDER BY c.updated DESC", params).fetchall()
        return [ChatSummary(*row) for row in rows]

    def chat(self, chat_id: int) -> ChatSummary:
        row = self._db.execute(
            "SELECT id, title, system_prompt, updated FROM chats WHERE id = ?", (chat_id,)
        ).fetchone()
        if row is None:
            raise StoreError(f"There is no chat {chat_id}.")
        return ChatSummary(*row)

    def last_chat(self) -> int | None:
        row = self._db.execute("SELECT id FROM chats ORDER BY updated DESC LIMIT 1").fetchone()
        return int(row[0]) if row else None

    def messages(self, chat_id: int) -> list[StoredMessage]:
        rows = self._db.execute(
            "SELECT id, chat_id, parent_id, role, text, path, metrics, attachments, extra"
            " FROM messages WHERE chat_id = ? ORDER BY id",
            (chat_id,),
        ).fetchall()
        return [_message(row) for row in rows]

    def branch(self, chat_id: int) -> list[StoredMessage]:
        """The messages from the root to the chat's current leaf (the branch on screen)."""
        row = self._db.execute("SELECT current_leaf FROM chats WHERE id = ?", (chat_id,)).fetchone()
        by_id = {m.id: m for m in self.messages(chat_id)}
        leaf = row[0] if row else None
        path: list[StoredMessage] = []
        while leaf is not None and leaf in by_id:
            path.append(by_id[leaf])
            leaf = by_id[leaf].parent_id
        return path[::-1]

    def siblings(self, message_id: int) -> list[StoredMessage]:
        """Other versions of a message (same parent, same role): the branches an edit made."""
        target = self._db.execute(
            "SELECT chat_id, parent_id, role FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if target is None:
            return []
        chat_id, parent_id, role = target
        return [m for m in self.messages(chat_id) if m.parent_id == parent_id and m.role == role]

    def keep_file(self, source: Path, sha256: str) -> Path:
        """Copy an attachment next to the database, named by its content hash (once)."""
        folder = self.path.parent / "attachments"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{sha256}{source.suffix.lower()}"
        if not target.exists():
            shutil.copyfile(source, target)
        return target

    def close(self) -> None:
        self._db.close()


def _message(row: tuple[Any, ...]) -> StoredMessage:
    metrics = TurnMetrics(**json.loads(row[6])) if row[6] else None
    return StoredMessage(
        id=row[0],
        chat_id=row[1],
        parent_id=row[2],
        role=row[3],
        text=row[4],
        path=row[5],
        metrics=metrics,
        attachments=tuple(json.loads(row[7])),
        extra=json.loads(row[8]),
    )
