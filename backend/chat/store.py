"""Chat history in SQLite under the user data directory: chats, messages (a tree, so edits
branch), attachment references, and each reply's path and figures.

A write that fails (read-only directory, full disk, another program holding the lock) raises
``StoreError``; callers keep the conversation in memory. Each message is one transaction, in WAL
mode with a busy timeout, so a reader elsewhere never blocks a save. A database another process
holds locked is never taken for a corrupt one: only a file that fails ``PRAGMA quick_check`` (or
is not a database at all) is moved aside — never dropped — and a fresh one started. Attachment
copies are written to a temporary file, checked against their hash, then renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from backend.chat.store_parts import (
    BUSY_TIMEOUT_S,
    ChatGone,
    ChatSummary,
    StoredMessage,
    StoreError,
    busy,
    check_side_files,
    is_corrupt,
)
from backend.chat.store_schema import Schema, prepare
from backend.engine.metrics import TurnMetrics
from backend.media.attachment import sha256_of

__all__ = ["BUSY_TIMEOUT_S", "ChatGone", "ChatStore", "ChatSummary", "StoreError", "StoredMessage"]


class ChatStore:
    """One SQLite file; every method is a short transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.moved_aside: Path | None = None
        self.schema = Schema()
        """What opening found: a newer version's database is read-only (``schema.read_only``)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(
                f"Cannot create the data directory {path.parent}: {error.strerror or error}.",
                "Chats are kept in memory this session; fix the directory or pass --data-dir.",
            ) from None
        check_side_files(path)
        try:
            self._db, self.schema = self._open(path)
        except sqlite3.DatabaseError as error:
            if busy(error) or not path.is_file() or not is_corrupt(path):
                raise self._unopenable(error) from None
            self.moved_aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
            for suffix in ("", "-wal", "-shm"):
                side = Path(f"{path}{suffix}")
                if side.exists():
                    side.rename(Path(f"{self.moved_aside}{suffix}"))
            try:
                self._db, self.schema = self._open(path)
            except sqlite3.Error as again:
                raise self._unopenable(again) from None
        if self.schema.unusable is not None:
            self._db.close()
            raise StoreError(
                f"The history database {path} {self.schema.unusable}: it is not a gemma-chat history "
                "(another program's file?), and was left as it is.",
                "Chats are kept in memory this session; move that file away (the next start makes a "
                "new one) or pass --data-dir.",
            )

    def read_only_notice(self) -> str | None:
        """What to tell the user where the database cannot be written (None: it can)."""
        if self.schema.read_only is None:
            return None
        return (
            f"The history database {self.path} {self.schema.read_only}: its chats are shown, nothing "
            "is saved into it (update gemma-chat, or pass --data-dir for a history of its own)."
        )

    def _unopenable(self, error: sqlite3.Error) -> StoreError:
        if busy(error):
            return StoreError(
                f"The history database {self.path} is locked by another program (waited "
                f"{BUSY_TIMEOUT_S:g} s).",
                "Chats are kept in memory this session; close the other gemma-chat and start again.",
            )
        return StoreError(
            f"Cannot open the history database {self.path}: {error}.",
            "Chats are kept in memory this session; check the data directory (read-only? full?).",
        )

    @staticmethod
    def _open(path: Path) -> tuple[sqlite3.Connection, Schema]:
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
        try:
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            try:
                db.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError as error:  # a read-only directory keeps the default journal
                if busy(error):
                    raise
            db.execute("PRAGMA foreign_keys = ON")
            check = db.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(
                    f"database disk image is malformed ({check[0] if check else '?'})"
                )
            return db, prepare(db)
        except sqlite3.Error:
            db.close()
            raise

    def _write(self, *statements: tuple[str, tuple[Any, ...]]) -> int:
        """Run ``statements`` in one transaction; the first one's new row id."""
        notice = self.read_only_notice()
        if notice is not None:
            raise StoreError(notice, "The conversation stays in memory.")
        try:
            with self._db:
                first = 0
                for index, (sql, params) in enumerate(statements):
                    cursor = self._db.execute(sql, params)
                    if index == 0:
                        first = int(cursor.lastrowid or 0)
                return first
        except sqlite3.Error as error:
            raise self._unwritten(error) from None

    def _unwritten(self, error: sqlite3.Error) -> StoreError:
        """The error for a failed write, with the advice its cause calls for."""
        if isinstance(error, sqlite3.IntegrityError) and "FOREIGN KEY" in str(error):
            return ChatGone(
                "This chat was deleted (in another gemma-chat window) while it was open here.",
                "It is saved again as a new chat.",
            )
        if busy(error):
            return StoreError(
                f"Could not save to {self.path}: {error} (another program holds it; waited "
                f"{BUSY_TIMEOUT_S:g} s).",
                "The conversation stays in memory and is saved with the next message that gets through.",
            )
        if isinstance(error, sqlite3.IntegrityError) or "no column" in str(error) or "no such" in str(error):
            return StoreError(
                f"Could not save to {self.path}: its tables are not the ones this gemma-chat "
                f"writes ({error}).",
                "The conversation stays in memory; pass --data-dir for a history of its own.",
            )
        return StoreError(
            f"Could not save to {self.path}: {error}.",
            "The conversation stays in memory; free disk space or fix the data directory's permissions.",
        )

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as error:
            raise StoreError(
                f"Could not read the history database {self.path}: {error}.",
                "The chat stays as it is on screen; restart gemma-chat to check the database.",
            ) from None

    def new_chat(self, title: str = "New chat", system_prompt: str = "") -> int:
        now = time.time()
        return self._write(
            (
                "INSERT INTO chats(title, system_prompt, created, updated) VALUES (?, ?, ?, ?)",
                (title, system_prompt, now, now),
            )
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
        insert = (
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
        leaf = (  # one transaction: the message and the chat's leaf land together, or neither
            "UPDATE chats SET updated = ?, current_leaf = last_insert_rowid() WHERE id = ?",
            (time.time(), chat_id),
        )
        return self._write(insert, leaf)

    def withdraw_message(self, chat_id: int, message_id: int, leaf_id: int | None) -> None:
        """Delete a message no reply follows (one refused before it was sent); ``leaf_id`` leads."""
        self._write(
            ("DELETE FROM messages WHERE id = ? AND chat_id = ?", (message_id, chat_id)),
            ("UPDATE chats SET current_leaf = ? WHERE id = ?", (leaf_id, chat_id)),
        )

    def set_leaf(self, chat_id: int, leaf_id: int | None) -> None:
        self._write(("UPDATE chats SET current_leaf = ? WHERE id = ?", (leaf_id, chat_id)))

    def rename(self, chat_id: int, title: str) -> None:
        self._write(("UPDATE chats SET title = ? WHERE id = ?", (title, chat_id)))

    def set_system_prompt(self, chat_id: int, system_prompt: str) -> None:
        self._write(("UPDATE chats SET system_prompt = ? WHERE id = ?", (system_prompt, chat_id)))

    def delete_chat(self, chat_id: int) -> None:
        self._write(("DELETE FROM chats WHERE id = ?", (chat_id,)))

    def chats(self, search: str = "") -> list[ChatSummary]:
        sql = "SELECT DISTINCT c.id, c.title, c.system_prompt, c.updated FROM chats c"
        params: tuple[Any, ...] = ()
        if search:
            sql += " LEFT JOIN messages m ON m.chat_id = c.id WHERE c.title LIKE ? OR m.text LIKE ?"
            params = (f"%{search}%", f"%{search}%")
        rows = self._read(sql + " ORDER BY c.updated DESC", params)
        return [ChatSummary(*row) for row in rows]

    def chat(self, chat_id: int) -> ChatSummary:
        rows = self._read("SELECT id, title, system_prompt, updated FROM chats WHERE id = ?", (chat_id,))
        if not rows:
            raise StoreError(f"There is no chat {chat_id}.")
        return ChatSummary(*rows[0])

    def last_chat(self) -> int | None:
        rows = self._read("SELECT id FROM chats ORDER BY updated DESC LIMIT 1")
        return int(rows[0][0]) if rows else None

    def messages(self, chat_id: int) -> list[StoredMessage]:
        rows = self._read(
            "SELECT id, chat_id, parent_id, role, text, path, metrics, attachments, extra"
            " FROM messages WHERE chat_id = ? ORDER BY id",
            (chat_id,),
        )
        return [_message(row) for row in rows]

    def branch(self, chat_id: int) -> list[StoredMessage]:
        """The messages from the root to the chat's current leaf (the branch on screen)."""
        rows = self._read("SELECT current_leaf FROM chats WHERE id = ?", (chat_id,))
        by_id = {m.id: m for m in self.messages(chat_id)}
        leaf = rows[0][0] if rows else None
        path: list[StoredMessage] = []
        while leaf is not None and leaf in by_id:
            path.append(by_id[leaf])
            leaf = by_id[leaf].parent_id
        return path[::-1]

    def branch_tail(self, chat_id: int, count: int) -> tuple[list[StoredMessage], bool]:
        """The last ``count`` messages of the branch on screen, oldest first, and whether earlier
        ones lead to them: at most ``count + 1`` rows are read, however long the chat."""
        rows = self._read("SELECT current_leaf FROM chats WHERE id = ?", (chat_id,))
        return self._up_from(chat_id, rows[0][0] if rows else None, count)

    def branch_before(self, chat_id: int, message_id: int, count: int) -> tuple[list[StoredMessage], bool]:
        """The ``count`` messages the branch has before ``message_id`` (``branch_tail``'s way)."""
        rows = self._read(
            "SELECT parent_id FROM messages WHERE id = ? AND chat_id = ?", (message_id, chat_id)
        )
        return self._up_from(chat_id, rows[0][0] if rows else None, count)

    def path_length(self, leaf_id: int, limit: int) -> int:
        """How many messages lead from the root to ``leaf_id``, counted up to ``limit``."""
        return int(self._read(f"{_UP} SELECT count(*) FROM up", (leaf_id, limit - 1))[0][0])

    def _up_from(self, chat_id: int, start: int | None, count: int) -> tuple[list[StoredMessage], bool]:
        if start is None or count < 1:
            return [], start is not None
        columns = ", ".join(f"m.{c}" for c in _COLUMNS)
        rows = self._read(
            f"{_UP} SELECT {columns} FROM up JOIN messages m ON m.id = up.id WHERE m.chat_id = ?"
            " ORDER BY up.depth DESC",
            (start, count, chat_id),
        )
        return [_message(row) for row in rows[-count:]], len(rows) > count

    def leaves(self, chat_id: int) -> list[StoredMessage]:
        """The chat's messages nothing follows: one per branch (an edit's, a regenerated reply's,
        or another window's writing to the same chat), oldest first."""
        rows = self._read(
            "SELECT id, chat_id, parent_id, role, text, path, metrics, attachments, extra FROM messages m"
            " WHERE chat_id = ? AND NOT EXISTS (SELECT 1 FROM messages c WHERE c.parent_id = m.id)"
            " ORDER BY id",
            (chat_id,),
        )
        return [_message(row) for row in rows]

    def siblings(self, message_id: int) -> list[StoredMessage]:
        """Other versions of a message (same parent, same role): the branches an edit made."""
        rows = self._read("SELECT chat_id, parent_id, role FROM messages WHERE id = ?", (message_id,))
        if not rows:
            return []
        chat_id, parent_id, role = rows[0]
        return [m for m in self.messages(chat_id) if m.parent_id == parent_id and m.role == role]

    def keep_file(self, source: Path, sha256: str) -> Path:
        """Copy an attachment next to the database, named by its content hash (once).

        The copy is made under a temporary name, checked against ``sha256`` and renamed into place,
        so a full disk leaves no partial file under the hash name; a copy already there is used only
        if its content still has that hash. Raises ``OSError`` (the caller keeps the original path)."""
        folder = self.path.parent / "attachments"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{sha256}{source.suffix.lower()}"
        if target.is_file() and sha256_of(target) == sha256:
            return target
        partial = folder / f".{sha256}.{os.getpid()}.partial"
        try:
            shutil.copyfile(source, partial)
            if sha256_of(partial) != sha256:
                raise OSError(f"{source} changed while it was being copied")
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        return target

    def close(self) -> None:
        self._db.close()


_COLUMNS = ("id", "chat_id", "parent_id", "role", "text", "path", "metrics", "attachments", "extra")
_UP = (
    "WITH RECURSIVE up(id, depth) AS (SELECT ?, 0 UNION ALL SELECT m.parent_id, up.depth + 1"
    " FROM messages m JOIN up ON m.id = up.id WHERE m.parent_id IS NOT NULL AND up.depth < ?)"
)
"""A message and its ancestors, nearest first, each with its distance (bounded by the second ``?``)."""


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
