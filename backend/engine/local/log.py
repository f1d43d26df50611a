"""Where the engine's own log goes, and what a failed start's log means for the user.

vLLM's engine core runs in child processes that write to the inherited standard error.
``capture_stderr(path)`` points file descriptor 2 at a log file (children inherit it), so
the terminal stays clean and the cause of a failure can be read back by ``diagnose``. The log is
opened without blocking and must be a regular file: a FIFO in its place is refused by name.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from backend.config.file_checks import open_append_checked
from backend.engine.local.disk_space import LOW_BYTES, NO_SPACE, full_disk, start_folders
from backend.engine.local.start_watch import StartStopped
from backend.errors import EngineStartFailed, GemmaChatError, NotEnoughMemory

_KV_TOO_SMALL = re.compile(
    r"max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed, which is larger than the available "
    r"KV cache memory \(([\d.]+) GiB\)\.(?: Based on the available memory, the estimated maximum "
    r"model length is (\d+)\.)?"
)
_NO_KV = "No available memory for the cache blocks"
_KILLED = re.compile(r"died unexpectedly \(exit code: -9\)")
"""vLLM's words when the system killed a worker (the kernel's out-of-memory killer sends SIGKILL)."""
_OOM = ("CUDA out of memory", "OutOfMemoryError", "Cannot allocate memory", "std::bad_alloc")
_RAISED = re.compile(
    r"^(?:\([\w:-]+ pid=\d+\) )?(?:[A-Z]+ [\d-]+ [\d:]+ \[[^\]]+\] )?"
    r"([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$"
)
"""A traceback's last line (``RuntimeError: ...``), bare or behind vLLM's log prefix."""
_WRAPPERS = ("initialization failed", "See root cause", "See stack trace", "cancelled")
"""vLLM's own words for "a process below failed": they point at the cause, they are not it."""


def root_cause(log_text: str) -> str | None:
    """The last exception the engine's processes raised (``Type: message``; the log is appended to,
    so an earlier one may belong to an earlier start), passing over vLLM's wrappers that only say
    a child process failed; None when the log holds none."""
    for line in reversed(log_text.splitlines()):
        found = _RAISED.match(line.strip())
        if found and not any(wrapper in found.group(2) for wrapper in _WRAPPERS):
            return f"{found.group(1)}: {found.group(2).strip()}"
    return None


@contextlib.contextmanager
def capture_stderr(path: Path) -> Iterator[TextIO]:
    """Send this process's (and its future children's) fd 2 to ``path`` until the block ends.

    Yields a text stream on the original standard error, for messages meant for the user.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # without blocking: a FIFO or a device in the log's place is refused by name
        descriptor = open_append_checked(path)
    except (OSError, ValueError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise EngineStartFailed(
            f"The engine log {path} cannot be written: {why}.",
            "Remove it (gemma-chat writes a regular file there), or point GEMMA_CHAT_HOME elsewhere.",
        ) from None
    sys.stderr.flush()
    saved = os.dup(2)
    # in standard error's character set (PYTHONIOENCODING included), what it cannot show as "?"
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    console = os.fdopen(os.dup(saved), "w", buffering=1, encoding=encoding, errors="replace")
    with os.fdopen(descriptor, "ab", buffering=0) as log:
        os.dup2(log.fileno(), 2)
        try:
            yield console
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            console.close()


def tail(path: Path | None, max_chars: int = 4000) -> str:
    if path is None or not path.is_file():
        return ""
    return path.read_text(errors="replace")[-max_chars:]


_UNWRITABLE = re.compile(
    r"\[Errno (?:30|13)\] (?P<why>Read-only file system|Permission denied): '(?P<path>[^']+)'"
)
"""vLLM's (or torch's) write into a cache folder that is read-only or not the user's."""


def diagnose(error: BaseException, log_text: str, log_path: Path | None) -> GemmaChatError:
    """The user-facing error for a failed engine start, from the exception and the engine log."""
    if isinstance(error, StartStopped):  # the watch ended a start that neither got ready nor failed
        raised = error.__cause__ if isinstance(error.__cause__, Exception) else RuntimeError(str(error))
        inner = diagnose(raised, log_text, log_path)
        return EngineStartFailed(f"The engine core {error}, so it was stopped. {inner.problem}", inner.fix)
    text = f"{log_text}\n{error}"
    where = f" The engine log is {log_path}." if log_path else ""
    found = _KV_TOO_SMALL.search(text)
    if found:
        window, needed, available, estimate = found.groups()
        hint = f" (about {estimate} tokens fit)" if estimate else ""
        return NotEnoughMemory(
            f"Not enough memory for the KV cache: a {window}-token context window needs {needed} GiB "
            f"of KV cache, and {available} GiB is available{hint}.",
            "Lower --max-model-len, or give the KV cache more memory (--kv-cache-gib on CPU, "
            f"--gpu-memory-utilization on a GPU).{where}",
        )
    if _NO_KV in text:
        return NotEnoughMemory(
            "Not enough memory for the KV cache: the model's weights left no room for it.",
            f"Give the engine more memory (--kv-cache-gib on CPU, --gpu-memory-utilization on a GPU) "
            f"or use a smaller model.{where}",
        )
    if _KILLED.search(text):
        return NotEnoughMemory(
            "The engine's worker process was killed by the system while starting (exit code -9): "
            "most likely there was not enough memory for the model.",
            f"Close other programs, lower --max-model-len, or use a smaller model.{where}",
        )
    if any(marker in text for marker in _OOM):
        return NotEnoughMemory(
            "The engine ran out of memory while starting.",
            f"Close other programs, lower --max-model-len, or use a smaller model.{where}",
        )
    unwritable = _UNWRITABLE.search(text)
    if unwritable:
        folder = unwritable.group("path")
        return EngineStartFailed(
            f"The engine could not write {folder}: {unwritable.group('why')}.",
            "vLLM keeps its compile cache under VLLM_CACHE_ROOT (default ~/.cache/vllm) and gemma-chat "
            "its own under GEMMA_CHAT_HOME: point the one named at a writable folder, or make it "
            f"writable.{where}",
        )
    full = full_disk(start_folders(log_path), low_bytes=1 << 30 if NO_SPACE in text else LOW_BYTES)
    if full is not None:
        return EngineStartFailed(
            f"The engine could not start: {full}.",
            f"Free space on that disk, or point GEMMA_CHAT_HOME (or VLLM_CACHE_ROOT) at another.{where}",
        )
    last = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
    cause = root_cause(log_text) if any(wrapper in last for wrapper in _WRAPPERS) else None
    return EngineStartFailed(f"The engine failed to start: {cause or last}", where.strip())
