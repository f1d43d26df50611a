"""How long the last start of each engine took, so the next one can say what to expect.

One small JSON file in the cache directory maps ``model:path`` to the seconds of that
engine's last start (start and warm-up, as the status bar counts them). A file that cannot be
read or written is ignored: the status bar then shows the elapsed time alone.
"""

from __future__ import annotations

from pathlib import Path

from backend.config import locations
from backend.config.cache_json import read_object, write_object

FILE_NAME = "engine-starts.json"


class StartHistory:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or locations.cache_dir() / FILE_NAME

    def _read(self) -> dict[str, float]:
        data = read_object(self.path)
        return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float) and v > 0}

    def expected_s(self, key: str) -> float | None:
        """The seconds the last start of ``key`` took (None: never started here)."""
        return self._read().get(key)

    def record(self, key: str, seconds: float) -> None:
        data = self._read()
        data[key] = round(seconds, 1)
        write_object(self.path, data)
