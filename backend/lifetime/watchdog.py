"""A process started by gemma-chat ends when its parent is gone, even when the parent was
SIGKILLed and had no chance to end it.

``watch_parent()`` starts a daemon thread that blocks on a pidfd of the parent (no polling; a
kernel without pidfd is polled every second). When the parent exits, the thread sends this
process SIGTERM — vLLM's engine core and workers shut down on it, ending their own children —
and, if it is still running ``GRACE_S`` later, SIGKILLs its descendants and itself; a shell started
before the SIGTERM SIGKILLs it then too, should its shutdown have stopped the thread.

It runs in every interpreter gemma-chat starts, through ``backend.compat``'s import hooks (the
environment's ``.pth`` file): only where ``GEMMA_CHAT_OWNER`` is set (the ``gemma-chat`` process
sets it, its children inherit it), never in the owner itself. vLLM's engine core and workers also
call it when they begin (a forked child runs no ``.pth``). Standard library only.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time

from backend.config import switch_rules

OWNER_VARIABLE = switch_rules.OWNER
GRACE_S = 10.0
"""After SIGTERM, how long the process gets to shut down before it is killed."""

_watched: set[int] = set()
"""The pids this interpreter started a watch in (a forked child starts its own)."""


def watch_parent() -> bool:
    """Start the watch in this process if gemma-chat started it; True if one runs now."""
    owner = os.environ.get(OWNER_VARIABLE)
    pid, parent = os.getpid(), os.getppid()
    if not owner or owner == str(pid) or parent <= 1:
        return False
    if pid in _watched:
        return True
    _watched.add(pid)
    threading.Thread(target=_watch, args=(parent,), name="gemma-chat-parent-watch", daemon=True).start()
    return True


def _watch(parent: int) -> None:
    _wait_for_exit(parent)
    _parent_gone()


def _wait_for_exit(parent: int) -> None:
    try:
        fd = os.pidfd_open(parent)
    except (AttributeError, OSError):  # no pidfd (old kernel), or the parent is already gone
        fd = -1
    if fd >= 0:
        try:
            if os.getppid() == parent:  # still ours after the open: the pidfd is the parent's
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                while not poller.poll():
                    pass
        finally:
            os.close(fd)
        return
    while os.getppid() == parent:
        time.sleep(1.0)


def _parent_gone() -> None:
    _kill_later(os.getpid(), GRACE_S + 0.5)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_S)
    from backend.lifetime.descendants import end_descendants

    end_descendants(grace_s=1.0)
    os.kill(os.getpid(), signal.SIGKILL)


def start_ticks(pid: int) -> str | None:
    """The process's start time (``/proc/PID/stat`` field 22, clock ticks since boot): with the
    PID, it names one process — a PID alone may be taken again once that process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat_file:
            fields = stat_file.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 else None


KILL_LATER = (
    'pid={pid}; start={start}; i=0; while [ "$i" -lt {rounds} ]; do sleep 0.5; '
    "s=$(cat /proc/$pid/stat 2>/dev/null) || exit 0; s=${{s##*) }}; set -- $s; "
    '[ "${{20}}" = "$start" ] || exit 0; i=$((i+1)); done; kill -9 $pid'
)
"""The shell's script: every half second, end at once if the process is gone or its PID now names
another process (start time differs); after the rounds, SIGKILL it."""


def _kill_later(pid: int, after_s: float) -> None:
    """SIGKILL ``pid`` after ``after_s`` from a shell of its own, which needs nothing of this
    interpreter: SIGTERM may start the interpreter's shutdown, and a shutdown that hangs (joining a
    thread or a child, an exit handler) stops this daemon thread for good — its own SIGKILL below
    would never come (an engine core was seen alive 30 s after its parent was SIGKILLed, under
    load). The shell checks the process by its identity (PID and start time) every half second and
    ends as soon as it is gone: a PID taken again by an unrelated process is never killed, and a
    clean exit leaves no shell behind."""
    import contextlib
    import subprocess

    start = start_ticks(pid)
    if start is None:
        return
    script = KILL_LATER.format(pid=pid, start=start, rounds=max(1, round(after_s / 0.5)))
    with contextlib.suppress(OSError):  # no shell: the thread's own SIGKILL remains
        subprocess.Popen(
            ["/bin/sh", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
