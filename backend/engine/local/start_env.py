"""The environment vLLM's engine-core process will be spawned with, learned from the last start.

vLLM sets variables while an engine starts, before it spawns the engine core (on the CPU build:
``LD_PRELOAD`` with torch's libgomp and vLLM's tcmalloc, ``LOCAL_WORLD_SIZE``, inductor's thread
counts). ``backend.compat.processes.early_core`` must give its early interpreter exactly that environment,
so each start records what vLLM changed (variable → value, or None where it removed one) and the
next start of the same path predicts: this process's environment, the engine's own variables,
then the recorded changes. A wrong prediction costs the early start, never correctness: the
hand-over compares the whole environment and spawns afresh when it differs.

One small JSON file in the cache directory, by engine path; unreadable or unwritable is ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from backend.config import locations
from backend.config.cache_json import read_object, write_object

FILE_NAME = "engine-env.json"

Changes = dict[str, str | None]


class StartEnv:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or locations.cache_dir() / FILE_NAME

    def _read(self) -> dict[str, Changes]:
        found: dict[str, Changes] = {}
        for key, changes in read_object(self.path).items():
            if isinstance(changes, dict) and all(
                isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in changes.items()
            ):
                found[str(key)] = changes
        return found

    def changes(self, key: str) -> Changes | None:
        """What vLLM changed in the last start of ``key`` (None: no start recorded)."""
        return self._read().get(key)

    def record(self, key: str, changes: Changes) -> None:
        data = self._read()
        if data.get(key) != changes:
            write_object(self.path, {**data, key: changes})


def predicted(base: Mapping[str, str], own: Mapping[str, str], changes: Changes) -> dict[str, str]:
    """The engine core's environment: ``base`` with the engine's variables and vLLM's changes."""
    env = {**base, **own}
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def changed(before: Mapping[str, str], after: Mapping[str, str]) -> Changes:
    """The variables that differ from ``before`` in ``after`` (None: removed)."""
    return {k: after.get(k) for k in sorted(before.keys() | after.keys()) if before.get(k) != after.get(k)}


def current() -> dict[str, str]:
    return dict(os.environ)
