"""Reading a file a user points gemma-chat at (config.toml, an MCP servers JSON file), checked
before it is read: it must be a regular file (a FIFO would block, ``/dev/zero`` never ends, a
directory is no file), no larger than a bound, and its parsed structure no deeper than the parser
can take. Each refusal is a ``ValueError`` whose text names the file and the reason; the callers
wrap it in their own error type.

The file is opened without blocking (``O_NONBLOCK``: a FIFO swapped in after the check cannot
hang the open) and checked again on the open descriptor, and at most the bound plus one byte is
read, so neither a growing file nor a race costs more than the bound in memory.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

CONFIG_MAX_BYTES = 1 << 20
"""1 MiB: a config file (TOML or JSON) is a few KB; anything near this is not one."""

T = TypeVar("T")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_checked(path: Path, max_bytes: int = CONFIG_MAX_BYTES) -> bytes:
    """The bytes of ``path`` (``FileNotFoundError`` if it is missing; ``ValueError`` if it is not a
    regular file or larger than ``max_bytes``; other ``OSError`` as raised)."""
    target = os.path.realpath(path)
    shown = str(path) if target == str(path) else f"{path} (→ {target})"
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise ValueError(f"{shown} is {_kind(mode)}, not a regular file")
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{shown} is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise ValueError(f"{shown} is {info.st_size:,} bytes, more than the {max_bytes:,} allowed")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes and (chunk := os.read(descriptor, min(1 << 16, max_bytes + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(descriptor)
    if size > max_bytes:
        raise ValueError(f"{shown} grew past the {max_bytes:,} bytes allowed while it was read")
    return b"".join(chunks)


def open_append_checked(path: Path) -> int:
    """A descriptor for appending to ``path`` (created if missing), opened without blocking: a
    FIFO with no reader fails at once (``OSError``), and anything that is not a regular file (a
    FIFO with one, ``/dev/tty``, a socket) is refused with a ``ValueError`` naming what it is."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    descriptor = os.open(path, flags, 0o644)
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise ValueError(f"it is {_kind(mode)}, not a regular file")
    return descriptor


def parse_bounded(parse: Callable[[str], T], text: str, shown: str) -> T:
    """``parse(text)``, with a structure nested deeper than the parser's recursion can take (a
    100,000-deep ``[[[…`` or ``{"a":{…``) refused by name rather than as a ``RecursionError``."""
    try:
        return parse(text)
    except RecursionError:
        raise ValueError(f"{shown} is nested too deeply to read (thousands of levels)") from None
