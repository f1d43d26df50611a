"""The ``gemma-chat`` process as the owner of everything it starts.

``own()`` (first thing in the CLI) marks this process the owner in the environment its children
inherit (their watchdogs end them if it dies), makes SIGTERM and SIGHUP an orderly way out — the
same as Ctrl+C: ``Interrupted`` is raised in the main thread, so ``finally`` blocks shut engines
and MCP servers down — and registers ``end_children`` to run at exit, which ends any descendant
still running (SIGTERM, then SIGKILL after a grace). It is a child subreaper too: a process
orphaned below it (a detached child, an MCP server whose guard was killed) is re-parented to it,
not to init, so it is still a descendant to end. The chat app replaces the signal handlers
with its own (it saves the reply in progress first, then quits).
"""

from __future__ import annotations

import atexit
import os
import signal
from types import FrameType

from backend.lifetime.descendants import become_subreaper, command_line, end_descendants
from backend.lifetime.watchdog import OWNER_VARIABLE

EXIT_GRACE_S = 5.0
SIGNAL_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP", signal.SIGINT: "SIGINT"}


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwind like Ctrl+C (a ``KeyboardInterrupt``, so code that
    already handles Ctrl+C handles these too)."""

    def __init__(self, signum: int) -> None:
        super().__init__(SIGNAL_NAMES.get(signal.Signals(signum), str(signum)))
        self.signum = signum


_owned = False


def own() -> None:
    """Make this process the owner of the ones it starts (once)."""
    global _owned
    if _owned:
        return
    _owned = True
    os.environ[OWNER_VARIABLE] = str(os.getpid())
    become_subreaper()  # orphans below (an MCP server whose guard was killed) stay ours to end
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_interrupted)
    atexit.register(end_children)


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    for other in (signal.SIGTERM, signal.SIGHUP):  # a second signal while unwinding: no second unwind
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum)


def _resource_tracker(pid: int) -> bool:
    """multiprocessing's resource tracker ignores SIGTERM and exits by itself once every process
    holding its pipe (this one included) is gone, cleaning up after them: it is left to do that."""
    return "multiprocessing.resource_tracker" in command_line(pid)


def end_children(grace_s: float = EXIT_GRACE_S) -> list[int]:
    """End every descendant still running (engines, MCP servers and their children); the pids
    that had to be SIGKILLed."""
    if os.environ.get(OWNER_VARIABLE) != str(os.getpid()):
        return []  # a forked child running the parent's atexit handlers
    try:
        return end_descendants(grace_s, keep=_resource_tracker)
    except OSError:  # /proc unreadable (out of memory at exit): a traceback would bury the message
        return []
