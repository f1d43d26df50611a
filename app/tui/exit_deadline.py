"""A signal ends the app within a bounded time, whatever its screen's thread is doing.

The app quits on SIGTERM, SIGHUP and SIGINT as on Ctrl+Q, through its event loop (the turn in
progress is stopped and saved, engines shut down). A loop held by a long piece of work (a pasted
megabyte being laid out held it for minutes) never got to the signal: SIGHUP and SIGTERM were
ignored, and the app outlived its terminal. The handler here is a plain Python signal handler: it
runs in the main thread at the next bytecode even while the loop is busy, hands the quit to the
loop, and arms a deadline. Past the deadline the process restores the terminal as far as it can
(leaves the alternate screen, shows the cursor, ends mouse reporting and bracketed paste, puts the
terminal's saved mode back) and exits with 128 + the signal's number; what gemma-chat started ends
with it (``backend.lifetime``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

DEADLINE_S = 20.0
"""How long a quit by signal may take (stopping and saving the turn takes at most 5 s, engines a
few more) before the process exits anyway."""
RESTORE = "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?25h\x1b[?1049l"
"""Mouse reporting off, bracketed paste off, cursor shown, alternate screen left."""

_armed: dict[str, Any] = {"timer": None}


def arm(code: int, deadline_s: float, terminal_mode: Any = None) -> None:
    """Exit with ``code`` after ``deadline_s`` unless ``disarm`` comes first (once)."""
    if _armed["timer"] is not None:
        return
    timer = threading.Timer(deadline_s, _exit_now, args=(code, terminal_mode))
    timer.daemon = True
    timer.start()
    _armed["timer"] = timer


def disarm() -> None:
    timer = _armed["timer"]
    if timer is not None:
        timer.cancel()
        _armed["timer"] = None


def _exit_now(code: int, terminal_mode: Any) -> None:
    with contextlib.suppress(Exception):
        sys.__stdout__.write(RESTORE)  # type: ignore[union-attr]
        sys.__stdout__.flush()  # type: ignore[union-attr]
    if terminal_mode is not None:
        with contextlib.suppress(Exception):
            import termios

            termios.tcsetattr(sys.__stdin__.fileno(), termios.TCSANOW, terminal_mode)  # type: ignore[union-attr]
    os._exit(code)


def _before_us(handler: Any, signum: int) -> Any:
    """The handler ``signum`` had before any app of this process installed one (a second app in
    one process — the tests' — does not chain to the first)."""
    earlier = getattr(handler, "previous", None)
    return handler if earlier is None else earlier.get(signum, signal.SIG_DFL)


def install(
    signals: dict[signal.Signals, str],
    quit_by: Callable[[str], None],
    running: Callable[[], bool],
    terminal_mode: Callable[[], Any] = lambda: None,
    deadline_s: float = DEADLINE_S,
) -> None:
    """Route ``signals`` to ``quit_by(name)`` on the loop with a deadline; where the app is no
    longer running, the handler that was there before takes the signal."""
    import asyncio

    loop = asyncio.get_running_loop()
    previous: dict[int, Any] = {int(s): _before_us(signal.getsignal(s), int(s)) for s in signals}
    names = {int(signum): name for signum, name in signals.items()}

    def caught(signum: int, frame: Any) -> None:
        if not running() or loop.is_closed():
            before = previous[signum]
            signal.signal(signum, before if before is not None else signal.SIG_DFL)
            if callable(before):
                before(signum, frame)
            elif before == signal.SIG_DFL:
                os.kill(os.getpid(), signum)
            return
        arm(128 + signum, deadline_s, terminal_mode())
        loop.call_soon_threadsafe(quit_by, names[signum])

    caught.previous = previous  # type: ignore[attr-defined]
    for signum in signals:
        with contextlib.suppress(ValueError, OSError, RuntimeError):  # not the main thread
            signal.signal(signum, caught)
