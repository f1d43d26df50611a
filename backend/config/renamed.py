"""Settings that were renamed, still accepted under their old names so no config file or script
breaks: ``profile`` (config.toml) and ``GEMMA_CHAT_PROFILE`` (environment) are now ``path`` and
``GEMMA_CHAT_PATH``. The new name wins where both are given; ``notes`` says each old name in use
(the command line prints it once). The command line's own old names: ``app.commands.renamed``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

RENAMED_KEYS: dict[str, str] = {"profile": "path"}
"""Old top-level config key → the setting it names now."""


def variable(key: str, prefix: str) -> str:
    return prefix + key.upper()


def renamed_variables(prefix: str) -> frozenset[str]:
    """The old environment variables (accepted, so not refused as unknown)."""
    return frozenset(variable(old, prefix) for old in RENAMED_KEYS)


def from_file(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``doc`` (the config file's tables) with each old key under its new name — unless the new
    one is there too — and a note for each old key found."""
    doc, notes = dict(doc), []
    for old, new in RENAMED_KEYS.items():
        if old in doc:
            value = doc.pop(old)
            doc.setdefault(new, value)
            notes.append(f"the config file's `{old}` is now `{new}` (the old name still works)")
    return doc, notes


def from_environment(
    prefix: str, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """The values of the old variables under their new keys (where the new variable is unset),
    and a note for each old variable found."""
    environ = os.environ if environ is None else environ
    values, notes = {}, []
    for old, new in RENAMED_KEYS.items():
        name, current = variable(old, prefix), variable(new, prefix)
        if name in environ:
            if current not in environ:
                values[new] = environ[name]
            notes.append(f"{name} is now {current} (the old name still works)")
    return values, notes
