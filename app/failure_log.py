"""Unexpected errors made readable: the traceback goes to a log file, the user gets one sentence.

Used wherever an error could otherwise end the program silently (the chat app's handlers and
workers, the command line's commands). The sentence names what failed and where the details are.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from backend.config import paths


def default_log() -> Path:
    return paths.logs_dir() / "gemma-chat-errors.log"


def record_failure(what: str, error: BaseException, log_path: Path | None = None) -> str:
    """Append ``error``'s traceback to the log; return "Internal error while WHAT: ... (details in LOG)"."""
    log = log_path or default_log()
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as out:
            out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} internal error while {what}\n")
            traceback.print_exception(error, file=out)
        where = f"details in {log}"
    except OSError as write_error:
        where = f"the log {log} could not be written: {write_error.strerror or write_error}"
    detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
    name = type(error).__name__
    return f"Internal error while {what}: {name}{': ' + detail if detail else ''} ({where})."
