"""Unexpected errors made readable: the traceback goes to a log file, the user gets one sentence.

Used wherever an error could otherwise end the program silently (the chat app's handlers and
workers, the command line's commands). The sentence names what failed and where the details are.
The log is opened without blocking and must be a regular file: a FIFO, a device or a socket in its
place is named in the sentence and never waited on (issue 64, item 8).
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path

from backend.config import locations
from backend.config.file_checks import open_append_checked


def default_log() -> Path:
    return locations.logs_dir() / "gemma-chat-errors.log"


def record_failure(what: str, error: BaseException, log_path: Path | None = None) -> str:
    """Append ``error``'s traceback to the log; return "Internal error while WHAT: ... (details in LOG)"."""
    log = log_path or default_log()
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(open_append_checked(log), "a", encoding="utf-8") as out:
            out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} internal error while {what}\n")
            traceback.print_exception(error, file=out)
        where = f"details in {log}"
    except OSError as write_error:
        where = f"the log {log} could not be written: {write_error.strerror or write_error}"
    except ValueError as refused:
        where = f"the log {log} was not written: {refused}"
    detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
    name = type(error).__name__
    return f"Internal error while {what}: {name}{': ' + detail if detail else ''} ({where})."
