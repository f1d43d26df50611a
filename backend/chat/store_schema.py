"""The history database's tables, their version (SQLite's ``user_version``), and what is done with
a database another version of gemma-chat wrote.

* An older one (a column this version writes is missing) is migrated in place: each missing column
  is added with its default (``ALTER TABLE ... ADD COLUMN``), then the version is written.
* A newer one (a higher version, or a column that must be filled and that this version does not
  know) is opened read-only, with a message that says so: never written into, never moved aside.
* One that lacks a column nothing can fill (a message's text, a chat's title) is not a gemma-chat
  history: it is refused by name, left as it is.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

VERSION = 1
"""This version's tables. Raise it with every change to them, and add the change to ``ADDABLE``.
A database at 0 (written before versions were kept) is judged by its columns alone."""

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
CREATE INDEX IF NOT EXISTS messages_parent ON messages(parent_id);
"""

REQUIRED = {"chats": ("id", "title"), "messages": ("id", "chat_id", "role", "text")}
"""Columns without which a table is not gemma-chat's: nothing could fill them for the rows there."""

ADDABLE = {
    "chats": {
        "system_prompt": "TEXT NOT NULL DEFAULT ''",
        "created": "REAL NOT NULL DEFAULT 0",
        "updated": "REAL NOT NULL DEFAULT 0",
        "current_leaf": "INTEGER",
    },
    "messages": {
        "parent_id": "INTEGER REFERENCES messages(id) ON DELETE CASCADE",
        "path": "TEXT",
        "metrics": "TEXT",
        "attachments": "TEXT NOT NULL DEFAULT '[]'",
        "extra": "TEXT NOT NULL DEFAULT '{}'",
        "created": "REAL NOT NULL DEFAULT 0",
    },
}
"""The columns an older version's table may lack, each as it is added to one."""


@dataclass(frozen=True)
class Schema:
    """What opening found: ``read_only`` says why nothing may be written (None: writable);
    ``unusable`` why the tables are not a gemma-chat history at all; ``migrated`` the columns added."""

    read_only: str | None = None
    unusable: str | None = None
    migrated: tuple[str, ...] = ()


def prepare(db: sqlite3.Connection) -> Schema:
    """Create, migrate or judge the tables of ``db`` (see the module's rules)."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > VERSION:
        db.execute("PRAGMA query_only = ON")
        return Schema(
            read_only=f"was written by a newer gemma-chat (tables version {version}; this one "
            f"knows {VERSION})"
        )
    found = {table: _columns(db, table) for table in REQUIRED}
    fresh = not any(found.values())
    for table, names in REQUIRED.items():
        lacking = [name for name in names if found[table] and name not in found[table]]
        if lacking:
            return Schema(unusable=f"has a table {table} without the column {', '.join(lacking)}")
    unknown = [
        f"{table}.{name}"
        for table, columns in found.items()
        for name, must_fill in columns.items()
        if must_fill and name not in ADDABLE[table] and name not in REQUIRED[table]
    ]
    if unknown:
        db.execute("PRAGMA query_only = ON")
        return Schema(
            read_only=f"has columns this gemma-chat cannot fill ({', '.join(unknown)}): a newer one wrote it"
        )
    missing = [(t, n) for t, columns in ADDABLE.items() if found[t] for n in columns if n not in found[t]]
    with db:
        for table, name in missing:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {ADDABLE[table][name]}")
    added = [f"{table}.{name}" for table, name in missing]
    db.executescript(SCHEMA)  # the tables (a fresh file) and indexes that are missing
    if fresh or added:  # else nothing is written (a read-only folder's history still opens)
        db.execute(f"PRAGMA user_version = {VERSION}")
        db.commit()
    return Schema(migrated=tuple(added))


def _columns(db: sqlite3.Connection, table: str) -> dict[str, bool]:
    """``table``'s columns, each with whether a row must name it (NOT NULL without a default)."""
    rows = db.execute(f"PRAGMA table_info({table})").fetchall()
    return {str(row[1]): bool(row[3]) and row[4] is None and not row[5] for row in rows}
