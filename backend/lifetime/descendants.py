"""A process's descendants, read from ``/proc``, and how they are ended: SIGTERM to all, a grace,
then SIGKILL to what is left. Standard library only (the MCP guard runs without site-packages)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

GRACE_S = 5.0
"""How long ended processes get to exit after SIGTERM before SIGKILL."""


def _parents() -> dict[int, int]:
    """``pid -> parent pid`` of every process visible in ``/proc``."""
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                data = stat.read()
        except OSError:  # ended meanwhile
            continue
        fields = data[data.rfind(b")") + 2 :].split()  # after "pid (name) "
        if len(fields) > 1 and fields[0] != b"Z":
            found[int(entry)] = int(fields[1])
    return found


def descendants(pid: int | None = None) -> list[int]:
    """Every live (not zombie) descendant of ``pid`` (default: this process), parents first."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    queue = [root]
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 : data.rfind(b")") + 3] != b"Z"


def _reap() -> None:
    """Collect exited children (zombies) so they stop counting as alive."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_processes(pids: list[int], grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM ``pids``, wait up to ``grace_s`` for them to exit, SIGKILL the rest; those killed."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        _reap()
        time.sleep(0.05)
    killed = [p for p in pids if _alive(p)]
    for pid in killed:
        _signal(pid, signal.SIGKILL)
    _reap()
    return killed


def end_descendants(grace_s: float = GRACE_S, keep: Callable[[int], bool] = lambda _pid: False) -> list[int]:
    """End every descendant of this process (but those ``keep`` spares); the ones SIGKILLed.

    Descendants are listed again after the first round: a process ending can start another
    (a shell's trap, vLLM's shutdown) or leave orphans behind."""
    killed: list[int] = []
    for _round in range(2):
        pids = [p for p in descendants() if not keep(p)]
        if not pids:
            break
        killed += end_processes(pids, grace_s)
    return killed


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)
