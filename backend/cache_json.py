"""Small JSON files in the cache directory that gemma-chat keeps between runs (the last start's
time, the engine core's environment): read as an object or nothing, written or not, never an
error — such a file only saves work or says what to expect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_object(path: Path) -> dict[str, Any]:
    """The file's JSON object; empty where it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_object(path: Path, data: dict[str, Any]) -> bool:
    """Write ``data`` (False where the cache directory cannot be written)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    except OSError:
        return False
    return True
