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

OWNER_VARIABLE = "GEMMA_CHAT_OWNER"
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


def _kill_later(pid: int, after_s: float) -> None:
    """SIGKILL ``pid`` after ``after_s`` from a shell of its own, which needs nothing of this
    interpreter: SIGTERM may start the interpreter's shutdown, and a shutdown that hangs (joining a
    thread or a child, an exit handler) stops this daemon thread for good — its own SIGKILL below
    would never come (an engine core was seen alive 30 s after its parent was SIGKILLed, under
    load). The shell ends at once if the process is gone by then (its descendants watch it)."""
    import contextlib
    import subprocess

    with contextlib.suppress(OSError):  # no shell: the thread's own SIGKILL remains
        subprocess.Popen(
            ["/bin/sh", "-c", f"sleep {after_s:g}; kill -0 {pid} 2>/dev/null && kill -9 {pid}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
