"""How long the last start of each engine took, so the next one can say what to expect.

One small JSON file in the cache directory maps ``model:profile`` to the seconds of that
engine's last start (start and warm-up, as the status bar counts them). A file that cannot be
read or written is ignored: the status bar then shows the elapsed time alone.
"""

from __future__ import annotations

import json
from pathlib import Path

from backend import paths

FILE_NAME = "engine-starts.json"


class StartHistory:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.cache_dir() / FILE_NAME

    def _read(self) -> dict[str, float]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float) and v > 0}

    def expected_s(self, key: str) -> float | None:
        """The seconds the last start of ``key`` took (None: never started here)."""
        return self._read().get(key)

    def record(self, key: str, seconds: float) -> None:
        data = self._read()
        data[key] = round(seconds, 1)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        except OSError:
            return
