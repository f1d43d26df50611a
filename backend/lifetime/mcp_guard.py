"""The guard a stdio MCP server runs under: ``python -S mcp_guard.py COMMAND ARGS…``.

The MCP SDK starts the guard in a new session; the guard makes itself a child subreaper (so a
server's children that detach — double fork, ``setsid`` — are re-parented to it, not to init),
starts the server with its own stdin, stdout and stderr, and then waits. It ends the server's
whole tree (SIGTERM, then SIGKILL after a grace) when:

* the server exits (its leftover children go with it);
* the guard gets SIGTERM, SIGHUP or SIGINT (the SDK's close, or the app's exit);
* the app is gone (its pid is no longer the guard's parent — after a SIGKILL too): a server that
  ignores EOF on stdin would otherwise run on.

The server gets SIGKILL when the guard ends (a parent-death signal set before it runs): a server
that kills its guard does not outlive it (issue 64, item 19); the app, a subreaper itself
(``owner``), adopts and ends what the server leaves.

It exits with the server's status. Standard library only; it runs without site-packages.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 0.2
GRACE_S = 1.0
"""Shorter than the SDK's own SIGTERM-to-SIGKILL wait (2 s), so the guard ends the tree first."""


def command(server: list[str]) -> list[str]:
    """The command line that runs ``server`` under the guard."""
    return [sys.executable, "-S", str(Path(__file__).resolve()), *server]


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: mcp_guard.py COMMAND [ARGS…]", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from backend.lifetime.descendants import become_subreaper, die_with_parent, end_descendants

    stop: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, lambda number, _frame: stop.append(number))
    become_subreaper()  # not Linux: orphans go to init, the rest works
    parent, guard = os.getppid(), os.getpid()
    try:
        # One thread here, so preexec_fn is safe: the server dies with the guard, even a SIGKILLed one.
        server = subprocess.Popen(argv, preexec_fn=lambda: die_with_parent(guard))
    except OSError as error:
        print(f"gemma-chat: cannot start the MCP server {argv[0]}: {error}", file=sys.stderr)
        return 127
    devnull = os.open(os.devnull, os.O_RDWR)  # the server alone holds the app's pipes now
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    status = None
    while status is None and not stop and os.getppid() == parent:
        time.sleep(POLL_S)
        status = server.poll()
    end_descendants(GRACE_S)
    if status is None:
        return 128 + (stop[0] if stop else signal.SIGTERM)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
