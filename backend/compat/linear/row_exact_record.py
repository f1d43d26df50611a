"""Row-exact verification's verdict on a model's linear layers at its last start here, kept so that
``gemma-chat paths`` can name, before any engine starts, the layers a verifying step computes
row by row (the one-pass kernel could not prove them) — the engine's log says it at every start.

One entry per model folder and CPU (its flags), in the cache folder's ``row-exact-layers.json``
(``backend.config.cache_json``: written whole, locked, a file that is not gemma-chat's refused).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from backend.config.cache_json import locked, read_object, write_object
from backend.config.locations import cache_dir
from backend.provenance import cpu_flags

RECORD_NAME = "row-exact-layers.json"
MOST_ENTRIES = 32
"""The oldest entries go beyond this many (models seen on this machine)."""
NAMES_KEPT = 64


def this_cpu() -> str:
    """The CPU classes' flags this CPU has (``provenance.cpu_flags``), as the key's second half."""
    return " ".join(cpu_flags())


def record_file() -> Path:
    return cache_dir() / RECORD_NAME


def entry_key(model: str, flags: str) -> str:
    return f"{Path(model).expanduser().resolve()}|{flags}"


def keep(model: str, verdict: dict[str, Any], flags: str | None = None) -> None:
    """Keep ``verdict`` (``row_exact_linear.verdict()``) for ``model`` on a CPU with ``flags``."""
    path = record_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        data = read_object(path)
        data[entry_key(model, this_cpu() if flags is None else flags)] = {
            **verdict,
            "at": time.strftime("%Y-%m-%d %H:%M"),
        }
        newest = sorted(
            data.items(), key=lambda item: str(item[1].get("at", "") if isinstance(item[1], dict) else "")
        )
        write_object(path, dict(newest[-MOST_ENTRIES:]))


def _when(item: tuple[str, Any]) -> str:
    return str(item[1].get("at", "")) if isinstance(item[1], dict) else ""


def kept(model: str, flags: str | None = None) -> dict[str, Any] | None:
    """The verdict of ``model``'s last start on this CPU, if one was kept."""
    found = read_object(record_file()).get(entry_key(model, this_cpu() if flags is None else flags))
    return found if isinstance(found, dict) else None


def describe(verdict: dict[str, Any]) -> str:
    """One line for ``paths``: how many layers are checked, proven, and which are not."""
    text = f"{verdict.get('variant', 0)} of {verdict.get('checked', 0)} linear layers row-variant"
    if verdict.get("kernel"):
        text += (
            f"; one pass: {verdict.get('whole', 0)} layers whole, the verified rows of "
            f"{verdict.get('rows_only', 0)} more"
        )
    unproven = [str(name) for name in verdict.get("unproven", [])]
    if unproven:
        more = verdict.get("unproven_count", len(unproven)) - len(unproven)
        text += f"; row by row (no proof): {', '.join(unproven)}" + (f" and {more} more" if more > 0 else "")
    elif verdict.get("kernel"):
        text += "; none row by row"
    return f"{text} (at the last start here, {verdict.get('at', '?')})"
