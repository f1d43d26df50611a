"""Hardening round 5, items 15 and 16: a history database another version of gemma-chat wrote
(older: migrated; newer: read-only, said so; not a history: refused by name), and a chat another
window deleted (the next message saves it again as a new chat). Never "free disk space" for these."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from backend.chat.conversation import Conversation
from backend.chat.store import ChatStore, StoreError
from backend.chat.store_schema import SCHEMA, VERSION

OLDER = """
CREATE TABLE chats (
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    chat_id INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
    role TEXT NOT NULL, text TEXT NOT NULL, path TEXT, created REAL NOT NULL
);
INSERT INTO chats VALUES (1, 'Old chat', 0, 0);
INSERT INTO messages VALUES (1, 1, NULL, 'user', 'from long ago', NULL, 0);
"""


def _database(path: Path, script: str, version: int = 0) -> Path:
    db = sqlite3.connect(path)
    db.executescript(script)
    db.execute(f"PRAGMA user_version = {version}")
    db.commit()
    db.close()
    return path


def _columns(path: Path, table: str) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
    finally:
        db.close()


def test_an_older_history_is_migrated_and_takes_new_messages(tmp_path: Path) -> None:
    """Round 5 item 15: every message failed with "no column named attachments" and the advice
    "free disk space or fix permissions"."""
    path = _database(tmp_path / "history.db", OLDER)
    store = ChatStore(path)
    assert store.read_only_notice() is None
    assert {"messages.attachments", "messages.extra", "chats.system_prompt"} <= set(store.schema.migrated)
    assert [m.text for m in store.messages(1)] == ["from long ago"]
    new = store.add_message(1, 1, "assistant", "and now", attachments=("a.png",), extra={"k": 1})
    assert store.messages(1)[-1].id == new and store.messages(1)[-1].extra == {"k": 1}
    store.close()
    assert "attachments" in _columns(path, "messages")
    reopened = ChatStore(path)
    assert reopened.schema.migrated == () and reopened.chat(1).title == "Old chat"
    reopened.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == VERSION
    db.close()


NEWER = SCHEMA.replace("    path TEXT,", "    path TEXT,\n    author TEXT NOT NULL,") + (
    "INSERT INTO chats(id, title, created, updated) VALUES (1, 'Old chat', 0, 0);\n"
    "INSERT INTO messages(id, chat_id, role, text, author, created)"
    " VALUES (1, 1, 'user', 'from long ago', 'me', 0);"
)
"""Tables a later version might write: one more column that every message must name."""


@pytest.mark.parametrize("version", [VERSION + 1, 0])
def test_a_newer_history_opens_read_only_and_says_why(tmp_path: Path, version: int) -> None:
    """Round 5 item 15: a newer one failed every save with "NOT NULL constraint failed" and the
    disk-space advice. Now its chats read, nothing is written, and the notice says why (a newer
    version number, or a column this version cannot fill)."""
    path = _database(tmp_path / "history.db", NEWER, version)
    store = ChatStore(path)
    notice = store.read_only_notice()
    assert notice is not None and "newer" in notice and "nothing is saved" in notice
    assert ("author" in notice) is (version == 0)
    assert [m.text for m in store.messages(1)] == ["from long ago"]
    with pytest.raises(StoreError) as refused:
        store.add_message(1, 1, "user", "hello")
    assert "newer" in str(refused.value) and "disk space" not in str(refused.value)
    store.close()
    assert store.moved_aside is None and "author" in _columns(path, "messages")
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == version
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
    db.close()


def test_a_database_that_is_no_history_is_refused_by_name_and_left_alone(tmp_path: Path) -> None:
    path = _database(tmp_path / "history.db", "CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT);")
    with pytest.raises(StoreError) as refused:
        ChatStore(path)
    assert str(path) in refused.value.problem and "without the column" in refused.value.problem
    assert "not a gemma-chat history" in refused.value.problem and "disk space" not in str(refused.value)
    assert _columns(path, "messages") == ["id", "body"]


def test_a_chat_deleted_in_another_window_is_saved_again_as_a_new_chat(tmp_path: Path) -> None:
    """Round 5 item 16: window B's next messages failed with "FOREIGN KEY constraint failed" and
    the disk-space advice, and were never saved."""
    path = tmp_path / "history.db"
    window_a, window_b = ChatStore(path), ChatStore(path)
    shown = Conversation(window_b)
    shown.system_prompt = "Be brief."
    shown.add_user("first question")
    shown.add_reply("first answer", "optimized", None)
    deleted = shown.chat_id
    assert deleted is not None and shown.last_store_error is None
    window_a.delete_chat(deleted)
    shown.add_user("second question")
    notice = shown.last_store_error or ""
    assert "deleted" in notice and "saved again as a new chat" in notice
    assert "FOREIGN KEY" not in notice and "disk space" not in notice
    assert shown.chat_id is not None
    saved = [m.text for m in window_a.branch(shown.chat_id)]
    assert saved == ["first question", "first answer", "second question"]
    assert window_a.chat(shown.chat_id).system_prompt == "Be brief."
    shown.add_reply("second answer", "optimized", None)
    assert shown.last_store_error is None
    assert [m.text for m in window_a.branch(shown.chat_id)][-1] == "second answer"
    window_a.close()
    window_b.close()
