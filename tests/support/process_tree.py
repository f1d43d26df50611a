"""Looking at processes from a test, tolerant of zombies and races: a process may end, or become
a zombie (ended, not yet reaped), between being listed and being read. Every helper here treats
such a process as ended instead of failing the test with ``psutil.ZombieProcess`` or
``NoSuchProcess``."""

from __future__ import annotations

import psutil


def command_line(process: psutil.Process | int) -> str:
    """The process's command line; "" where it has ended, is a zombie or cannot be read."""
    try:
        found = process if isinstance(process, psutil.Process) else psutil.Process(process)
        return " ".join(found.cmdline())
    except psutil.Error:
        return ""


def is_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended: only its parent has not reaped it yet)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def alive(pids: list[int] | set[int]) -> list[int]:
    return [pid for pid in pids if is_alive(pid)]


def descendants(pid: int | None = None) -> list[psutil.Process]:
    """The live (non-zombie) descendants of ``pid`` (this process by default); [] where it ended."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [child for child in found if is_alive(child.pid)]


def descendants_running(needle: str, pid: int | None = None) -> set[int]:
    """The live descendants whose command line holds ``needle``."""
    return {child.pid for child in descendants(pid) if needle in command_line(child)}


def descendant_pids(pid: int | None = None) -> list[int]:
    return [child.pid for child in descendants(pid)]
