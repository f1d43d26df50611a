"""Peak resident memory of the engine's processes while a path runs (sampled every 0.2 s).

vLLM's engine core runs in child processes; their RSS (and this process's) is summed at each
sample; the peak is reported. On a GPU the peak of allocated device memory is added by the
caller if it can read it.
"""

from __future__ import annotations

import threading
from types import TracebackType

from backend.engine.platform import process_tree_rss


class PeakMemory:
    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-memory", daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        self.peak_bytes = max(self.peak_bytes, process_tree_rss())

    @property
    def peak_gib(self) -> float:
        return self.peak_bytes / 2**30
