"""A deadline for an engine start that neither succeeds nor fails (issue 64, item 6).

vLLM waits for its engine core's "ready" without a deadline, and notices only a core that exits.
A core that fails its initialisation and then does not exit (seen with a ``VLLM_CACHE_ROOT``
holding a ``"``), or one that hangs, left ``ask`` at "loading the model and warming up the engine"
for ever. So while a start runs, ``watched`` looks at the processes it spawned and at the engine
log, every ``POLL_S``:

* the core said it failed (``EngineCore failed to start``, vLLM's words) and is still there
  ``FAILED_GRACE_S`` later: it will not exit by itself;
* the start's processes used no CPU time and wrote nothing to the log for ``STALL_S``: it makes
  no progress (a compile waiting on another's lock is slow, but not that slow).

Either way the start's processes are ended (so vLLM's own wait returns with an error) and the
start fails with ``StartStopped``'s reason, which the engine puts before the log's root cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import psutil

from backend.engine.cpu.processes import with_children

POLL_S = 1.0
FAILED_GRACE_S = 15.0
STALL_S = 600.0
STOP_GRACE_S = 60.0
"""How long a stopped start has to end once its processes are killed."""
READ_MAX = 4 << 20
FAILED_MARK = "EngineCore failed to start"
"""What vLLM's engine core logs when its initialisation raised."""

T = TypeVar("T")


class StartStopped(Exception):
    """The watch ended a start; the text says why (to go before the log's own cause)."""


@dataclass
class StartWatch:
    """What one start has done so far: its log (read up to ``offset``) and its processes' CPU time."""

    log_path: Path | None
    offset: int = 0
    failed_grace_s: float = FAILED_GRACE_S
    stall_s: float = STALL_S
    _failed_at: float | None = None
    _failed_pids: frozenset[int] = frozenset()
    _progress: tuple[float, int] = (-1.0, -1)
    _progress_at: float = field(default_factory=time.monotonic)

    @classmethod
    def from_now(cls, log_path: Path | None) -> StartWatch:
        """A watch over the log's lines written from now on, with this module's bounds."""
        return cls(log_path, _size(log_path), FAILED_GRACE_S, STALL_S)

    def verdict(self, processes: list[psutil.Process]) -> str:
        """Why the start should be stopped now ("" while it may go on)."""
        now = time.monotonic()
        log_size = _size(self.log_path)
        pids = frozenset(process.pid for process in processes)
        if self._failed_at is not None and pids and not pids & self._failed_pids:
            self._failed_at = None  # the failed attempt's processes are gone: a new attempt (a retry)
        if self._failed_at is None and processes and FAILED_MARK in self._new_lines(log_size):
            self._failed_at, self._failed_pids = now, pids
        if self._failed_at is not None and now - self._failed_at >= self.failed_grace_s:
            return f"said it failed to start and had not exited {self.failed_grace_s:g} s later"
        progress = (_cpu_seconds(processes), log_size)
        if progress != self._progress or not processes:
            self._progress, self._progress_at = progress, now
        elif now - self._progress_at >= self.stall_s:
            return f"used no CPU time and wrote nothing to its log for {self.stall_s:g} s"
        return ""

    def _new_lines(self, size: int) -> str:
        """What the log gained since the last look (from a little before, so a mark split across
        two looks is still seen); at most ``READ_MAX`` bytes a look."""
        if self.log_path is None or size <= self.offset:
            return ""
        start = max(self.offset - len(FAILED_MARK), 0)
        try:
            with open(self.log_path, "rb") as log:
                log.seek(start)
                new = log.read(min(size - start, READ_MAX))
        except OSError:
            return ""
        self.offset = start + len(new)
        return new.decode(errors="replace")


async def watched(
    build: Awaitable[T],
    log_path: Path | None,
    processes: Callable[[], list[psutil.Process]],
    stop: Callable[[], None],
) -> T:
    """``build``'s result, watched (``StartWatch``) over the ``processes`` it spawns and the log it
    writes from now on; where the watch gives a verdict first, ``stop`` is called (it ends the
    start's processes) and, once ``build`` has ended, ``StartStopped`` is raised with the reason
    (the build's own error is its cause)."""
    watch = StartWatch.from_now(log_path)
    task = asyncio.ensure_future(build)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=POLL_S)
            if done:
                return task.result()
            reason = watch.verdict(processes())
            if reason:
                break
    except asyncio.CancelledError:  # the caller gave up on the start: so does the build
        task.cancel()
        raise
    stop()
    await asyncio.wait({task}, timeout=STOP_GRACE_S)
    if not task.done():  # a start stuck in this process: left to end on its own
        task.add_done_callback(lambda ended: ended.cancelled() or ended.exception())
        raise StartStopped(reason)
    error = task.exception()
    if error is None:
        return task.result()  # it got ready as it was stopped
    raise StartStopped(reason) from error


def end_all(found: list[psutil.Process]) -> None:
    """Kill ``found`` (a start's processes), whatever has already ended."""
    for process in found:
        with contextlib.suppress(psutil.Error):
            process.kill()


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def _cpu_seconds(processes: list[psutil.Process]) -> float:
    """The CPU time the processes and their children have used (what is readable of it)."""
    total = 0.0
    for member in with_children(processes):
        with contextlib.suppress(psutil.Error):
            times = member.cpu_times()
            total += times.user + times.system
    return total
