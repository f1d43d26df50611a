"""A write that failed because a disk is full (issue 64, item 26), said as such: ``ask … >
/dev/full`` or a reply piped into a file on a full disk ends with one line that names where the
output went and why it stopped, not an internal error, and the exit status says it failed.

Like a reader that left (a broken pipe), the rest of the output is dropped: stdout is pointed at
``/dev/null`` so that Python's own flush at exit raises nothing more."""

from __future__ import annotations

import errno
import os
import stat
import sys

EXIT_OUTPUT_FAILED = 74
"""``EX_IOERR`` of ``sysexits.h``: an input/output error."""
SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
DEV_FULL = (1, 7)
"""Linux's ``/dev/full`` (major, minor): every write to it fails with ENOSPC."""


def out_of_space(error: OSError) -> str | None:
    """The sentence for a write that failed for want of space; None for any other ``OSError``."""
    if error.errno not in SPACE_ERRNOS:
        return None
    reason = error.strerror or os.strerror(error.errno or errno.ENOSPC)
    if _stdout_is_full():
        return f"the output could not be written: {_stdout_target()} is full ({reason})."
    where = f" ({error.filename})" if error.filename else ""
    return f"a write failed: {reason}{where}. Free space on that disk and run it again."


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit raises nothing more (Python's own advice
    for a closed pipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _stdout_is_full() -> bool:
    try:
        info = os.fstat(sys.stdout.fileno())
        if stat.S_ISCHR(info.st_mode):
            return (os.major(info.st_rdev), os.minor(info.st_rdev)) == DEV_FULL
        return os.fstatvfs(sys.stdout.fileno()).f_bavail == 0
    except (OSError, ValueError):
        return False


def _stdout_target() -> str:
    """Where stdout goes (``/dev/full``, a file's path), as ``/proc`` says; "stdout" otherwise."""
    try:
        return f"stdout ({os.readlink(f'/proc/self/fd/{sys.stdout.fileno()}')})"
    except (OSError, ValueError):
        return "stdout"
