"""A process's descendants, read from ``/proc``, and how they are ended: SIGTERM to all, a grace,
then SIGKILL to what is left; and how they stay descendants (a subreaper adopts orphans) or end
with their parent (a parent-death signal). Standard library only (the MCP guard runs without
site-packages)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

GRACE_S = 5.0
"""How long ended processes get to exit after SIGTERM before SIGKILL."""
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    """Linux's ``prctl(option, value)``; False where it is not there or refused."""
    try:
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # not Linux
        return False


def become_subreaper() -> bool:
    """Orphans among this process's descendants (a detached child, a server whose guard died) are
    re-parented to this process instead of init, so they stay its descendants and end with it."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(parent: int) -> None:
    """In a child between fork and exec: SIGKILL it when ``parent`` ends (kept across exec). Where
    the parent has already ended, it ends at once."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


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
