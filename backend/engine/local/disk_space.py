"""Which disk is full, when an engine start fails on one (issue 64, item 17).

With ``GEMMA_CHAT_HOME`` on a full disk the engine log itself stays empty, and vLLM's own words
are only "Engine core initialization failed. See root cause above.". So a failed start looks at
the folders an engine start writes to (its log's, gemma-chat's cache, vLLM's cache, the temporary
folder, the shared memory vLLM's processes talk through) and names the first one whose disk has
(almost) no room left, with its mount point.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from backend.config import locations

LOW_BYTES = 16 * 2**20
"""Less free room than this is a full disk for an engine start (a log line, a cache entry)."""
NO_SPACE = "No space left on device"


def start_folders(log_path: Path | None) -> list[Path]:
    """The folders an engine start writes to, in the order a user would look at them."""
    vllm_cache = os.environ.get("VLLM_CACHE_ROOT") or str(Path.home() / ".cache" / "vllm")
    found = [log_path.parent] if log_path is not None else []
    shared = [Path("/dev/shm")] if Path("/dev/shm").is_dir() else []  # vLLM's messages between processes
    return [*found, locations.cache_dir(), Path(vllm_cache), Path(tempfile.gettempdir()), *shared]


def full_disk(folders: Iterable[Path], low_bytes: int = LOW_BYTES) -> str | None:
    """``"/home/me/.gemma-chat/logs is on a full disk (0 bytes free, mounted at /home)"`` for the
    first folder with less than ``low_bytes`` free; None where every one has room."""
    for folder in folders:
        existing = _existing(folder)
        if existing is None:
            continue
        try:
            info = os.statvfs(existing)
        except OSError:
            continue
        free = info.f_bavail * info.f_frsize
        if free < low_bytes:
            return f"{folder} is on a full disk ({_size(free)} free, mounted at {_mount_point(existing)})"
    return None


def _existing(folder: Path) -> Path | None:
    """``folder`` or its nearest ancestor that exists."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return candidate
    return None


def _mount_point(path: Path) -> Path:
    path = path.resolve()
    device = path.stat().st_dev
    while path.parent != path and path.parent.stat().st_dev == device:
        path = path.parent
    return path


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count:,} bytes"
