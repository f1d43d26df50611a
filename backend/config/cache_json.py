"""Small JSON files in the cache directory that gemma-chat keeps between runs (the last start's
time, the engine core's environment, speculation choices): read as an object or nothing, written or
not, never an error — such a file only saves work or says what to expect.

They are the project's own files, but anything may have replaced them: each is read as a config
file is (``file_checks``: a regular file, opened without blocking, at most ``MAX_BYTES``, nesting
the parser can take). One that fails is set aside — renamed beside itself, not deleted — and a
notice says so (``take_notices``); the next write makes a new one. Writes go to a temporary file
renamed over the old one, so a FIFO or a device in its place is replaced, never opened."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from backend.config import file_lock
from backend.config.file_checks import parse_bounded, read_checked

MAX_BYTES = 4 << 20
"""4 MiB: these files hold a few entries of a few hundred bytes each."""
SET_ASIDE_SUFFIX = ".set-aside"
LOCK_WAIT_S = 10.0
"""The longest an update waits for another process's lock (each update holds it for milliseconds)."""

_notices: list[str] = []
_lock = threading.Lock()


def set_aside(path: Path, reason: str) -> None:
    """Rename ``path`` out of the way (``<name>.set-aside-<time>``) and keep a notice naming both."""
    target = path.with_name(f"{path.name}{SET_ASIDE_SUFFIX}-{int(time.time() * 1000)}")
    try:
        os.rename(path, target)
        done = f"set aside as {target.name}; a new one is written"
    except OSError as error:
        done = f"it could not be set aside ({error.strerror or error}); it is ignored"
    with _lock:
        _notices.append(f"{path}: {reason} — {done}.")


def take_notices() -> list[str]:
    """The notices about files set aside since the last call."""
    with _lock:
        taken = list(_notices)
        _notices.clear()
    return taken


def notice(path: Path, text: str) -> None:
    """Keep a notice about ``path`` (``take_notices`` hands it on)."""
    with _lock:
        _notices.append(f"{path}: {text}.")


def refuse(path: Path, reason: str) -> None:
    """Keep a notice that ``path`` (a path the user named) is not used, and leave it as it is."""
    notice(path, f"{reason} — left as it is and not used")


def is_regular_or_missing(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def read_object(path: Path, own: bool = True) -> dict[str, Any]:
    """The file's JSON object; empty where it is missing, unreadable or not an object (a file
    that is there but no JSON object is set aside). ``own=False``: a path the user named (a
    variable, a flag): what is not a regular file there is refused by name and left alone."""
    if not own and not is_regular_or_missing(path):
        refuse(path, "not a regular file")
        return {}
    try:
        raw = read_checked(path, MAX_BYTES)
    except FileNotFoundError:
        return {}
    except ValueError as error:  # not a regular file, too large
        set_aside(path, str(error).removeprefix(f"{path} "))
        return {}
    except OSError:  # unreadable: permissions, I/O; nothing to gain from moving it
        return {}
    try:
        data = parse_bounded(json.loads, raw.decode("utf-8"), str(path))
    except (ValueError, UnicodeDecodeError) as error:
        set_aside(path, f"not JSON ({str(error)[:120]})")
        return {}
    if not isinstance(data, dict):
        set_aside(path, f"a JSON {type(data).__name__}, not an object")
        return {}
    return data


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``path`` (``.<name>.lock``) while a read-modify-write runs, so
    two processes storing at once merge instead of losing each other's entries. Without a lock
    file (a folder that cannot be written) the body runs unlocked: the write fails there anyway.
    A lock another process holds past ``LOCK_WAIT_S`` is not waited on further: a notice names it
    and its holder, and the body runs unlocked (the worst case is a lost entry of a cache)."""
    lock_path = path.with_name(f".{path.name}.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError:
        yield
        return
    try:
        try:
            file_lock.hold(descriptor, lock_path, LOCK_WAIT_S)
        except file_lock.LockHeld as held:
            notice(path, f"not locked while updated: {held}")
        yield
    finally:
        os.close(descriptor)


def write_object(path: Path, data: dict[str, Any], own: bool = True) -> bool:
    """Write ``data`` (False where the cache directory cannot be written, or where a path the user
    named, ``own=False``, holds anything but a regular file: it is never replaced)."""
    if not own and not is_regular_or_missing(path):
        return False
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        return False
    return True
