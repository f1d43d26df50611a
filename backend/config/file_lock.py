"""An exclusive ``flock`` with a deadline (issue 64, item 9): a process that holds a lock file and
never lets go (stopped, hung, or another program) must not hold every other gemma-chat for ever.

``hold`` tries the lock without blocking, again and again, until its deadline; then it raises
``LockHeld``, whose text names the lock file and, where Linux says (``/proc/locks``), the process
that holds it and its command line.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

POLL_S = 0.05
POLL_MAX_S = 0.5


class LockHeld(Exception):
    """The lock stayed held past the deadline; the text names the file and the holder."""

    def __init__(self, lock_path: Path, waited_s: float) -> None:
        self.lock_path = lock_path
        holder = lock_holder(lock_path)
        self.holder = holder
        by = f" by {holder}" if holder else " by another process"
        super().__init__(f"the lock {lock_path} is held{by}; waited {waited_s:g} s")


def hold(descriptor: int, lock_path: Path, timeout_s: float) -> None:
    """Take an exclusive ``flock`` on ``descriptor`` (the open ``lock_path``) within ``timeout_s``."""
    import fcntl

    deadline = time.monotonic() + timeout_s
    pause = POLL_S
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockHeld(lock_path, timeout_s) from None
        time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
        pause = min(pause * 2, POLL_MAX_S)


def lock_holder(lock_path: Path) -> str:
    """``process 1234 (python -m app.cli chat)`` holding a ``flock`` on ``lock_path``, from
    ``/proc/locks``; "" where that cannot be known (another system, the file gone, no access)."""
    try:
        info = os.stat(lock_path)
        with open("/proc/locks", encoding="ascii", errors="replace") as table:
            rows = table.read().splitlines()
    except OSError:
        return ""
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    for row in rows:
        fields = row.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device and fields[4].isdigit():
            return _process(int(fields[4]))
    return ""


def _process(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"process {pid}"
    command = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    return f"process {pid} ({command[:200]})" if command else f"process {pid}"
