"""The built-in tools. None has side effects: they compute, tell the time, or read (the file tools
only inside the sandbox's directories, size-capped; ``search_history`` only the user's chats)."""

from __future__ import annotations

import datetime as dt
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from backend.gemma4.messages import valid_utf8
from backend.tools.calculator import evaluate
from backend.tools.sandbox import Sandbox
from backend.tools.spec import Tool

MAX_LISTED = 200


@dataclass(frozen=True)
class ToolContext:
    """What the built-ins may touch."""

    sandbox: Sandbox
    history_path: Path | None = None
    max_read_bytes: int = 64 * 1024


def builtin_tools(context: ToolContext) -> list[Tool]:
    makers: list[Callable[[ToolContext], Tool]] = [
        _calculator,
        _current_time,
        _read_file,
        _list_directory,
        _search_history,
    ]
    return [make(context) for make in makers]


def _calculator(_: ToolContext) -> Tool:
    def calculator(expression: str) -> int | float:
        """Evaluate an arithmetic expression exactly, e.g. "(17 * 23) / 4" or "sqrt(2) ** 3"."""
        return evaluate(expression)

    return Tool.from_function(calculator, timeout_s=2.0)


def _current_time(_: ToolContext) -> Tool:
    def current_time(timezone: str = "local") -> dict[str, str]:
        """The current date and time, in an IANA time zone such as "Europe/Paris" (default: local)."""
        if timezone == "local":
            now = dt.datetime.now().astimezone()
        else:
            try:
                now = dt.datetime.now(ZoneInfo(timezone))
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"unknown time zone {timezone!r} (use an IANA name like Asia/Tokyo)"
                ) from None
        return {
            "iso": now.isoformat(timespec="seconds"),
            "weekday": now.strftime("%A"),
            "timezone": str(now.tzinfo),
        }

    return Tool.from_function(current_time, timeout_s=2.0)


def _read_file(context: ToolContext) -> Tool:
    def read_file(path: str) -> dict[str, object]:
        """Read a text file inside the directories the user allowed (long files are cut)."""
        fd, real = context.sandbox.open(path, directory=False)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(context.max_read_bytes + 1)
        if b"\0" in data[:4096]:
            raise ValueError(f"{path} is a binary file")
        text = data[: context.max_read_bytes].decode("utf-8", errors="replace")
        return {"path": str(real), "content": text, "truncated": len(data) > context.max_read_bytes}

    return Tool.from_function(read_file, timeout_s=5.0)


def _list_directory(context: ToolContext) -> Tool:
    def list_directory(path: str = ".") -> dict[str, object]:
        """List a directory inside the directories the user allowed: names, kinds and sizes."""
        fd, real = context.sandbox.open(path, directory=True)
        try:
            with os.scandir(fd) as scan:
                children = sorted(scan, key=lambda entry: entry.name)
            entries = []
            for child in children[:MAX_LISTED]:
                info = child.stat(follow_symlinks=False)
                mode = info.st_mode
                kind = "dir" if stat.S_ISDIR(mode) else "link" if stat.S_ISLNK(mode) else "file"
                entries.append({"name": valid_utf8(child.name), "kind": kind, "bytes": info.st_size})
        finally:
            os.close(fd)
        return {"path": str(real), "entries": entries, "truncated": len(children) > MAX_LISTED}

    return Tool.from_function(list_directory, timeout_s=5.0)


def _search_history(context: ToolContext) -> Tool:
    def search_history(query: str, limit: int = 5) -> list[dict[str, str]]:
        """Search the user's saved chats for messages containing the query text."""
        import sqlite3

        if context.history_path is None or not context.history_path.exists():
            return []
        # read-only, and never through ChatStore (which moves an unreadable database aside)
        uri = context.history_path.resolve().as_uri() + "?mode=ro"  # '#' and '?' in the path escaped
        db = sqlite3.connect(uri, uri=True, timeout=2)
        try:
            rows = db.execute(
                "SELECT c.title, m.role, m.text FROM messages m JOIN chats c ON c.id = m.chat_id"
                " WHERE m.text LIKE ? ORDER BY m.id DESC LIMIT ?",
                (f"%{query}%", max(1, min(limit, 20))),
            ).fetchall()
        finally:
            db.close()
        return [{"chat": title, "role": role, "text": text[:300]} for title, role, text in rows]

    return Tool.from_function(search_history, timeout_s=5.0)
