"""The history under fault for the hostile corpus: full, locked, read-only, missing or corrupt."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from tests.hostile.hostile_case import Case
from tests.hostile.hostile_files import (
    with_corrupt_page,
)
from tests.support.media_files import image_file


def store_cases(d: Path) -> Iterator[Case]:
    def store(id: str, path: Path, expect: str, *phrases: str) -> Case:
        return Case(
            id, "tests.hostile.hostile_cases:open_store", [str(path)], expect, phrases, {"timeout_s": 30}
        )

    (d / "garbage").mkdir()
    (d / "garbage" / "history.db").write_bytes(os.urandom(8192))
    yield store("garbage database file", d / "garbage" / "history.db", "ok", "moved aside: ", ".corrupt-")
    yield store(
        "missing directory that cannot be made",
        Path("/proc/gemma-chat/history.db"),
        "refused",
        "/proc/gemma-chat",
        "in memory",
    )
    corrupt = with_corrupt_page(d / "corrupt")
    yield store("corrupt page in the messages table", corrupt, "ok", ".corrupt-")
    full = d / "full"
    full.mkdir()
    yield Case(
        "disk full while saving a message with an attachment",
        "tests.hostile.hostile_cases:full_disk_then_space",
        [str(full), str(image_file(d / "attached.png"))],
        "ok",
        ("while full: Could not save", "then all saved in order"),
    )
    (d / "locked").mkdir()
    yield Case(
        "database locked by another process during a save",
        "tests.hostile.hostile_cases:locked_write",
        [str(d / "locked" / "history.db")],
        "ok",
        ("while locked: Could not save", "database is locked", "then all saved in order"),
    )
    (d / "held").mkdir()
    yield Case(
        "database locked by another process at start (rollback journal)",
        "tests.hostile.hostile_cases:locked_at_open",
        [str(d / "held" / "history.db")],
        "refused",
        ("locked by another program", "kept in memory", "not moved aside"),
    )
    for name in ("my#chats", "what?"):
        folder = d / "uri" / name
        folder.mkdir(parents=True)
        yield Case(
            f"search_history in a folder named {name}",
            "tests.hostile.hostile_cases:search_history",
            [str(folder)],
            "ok",
            ("1 found",),
        )
