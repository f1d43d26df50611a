"""The directories the file tools may read, and the one safe way to open something inside them.

A path is opened, never checked and then opened by name: starting from the allowed directory's
own descriptor, each component is opened with ``O_NOFOLLOW`` relative to the one before
(``openat``), so a symlink swapped in between a check and an open cannot lead outside. A symlink
met on the way is read and its target put through the same walk — links that stay inside work,
links that point out are refused — and the final descriptor is ``fstat``'ed: only a regular file
(or a directory, for listings) is read, so a FIFO or a device never blocks or floods a tool.
``..``, absolute paths elsewhere, NUL bytes and symlinks pointing out are refused with a
sentence the model (and the user, in the timeline) can read.

A hard link has no target to check: a name inside an allowed directory can be the same inode as
a file anywhere on the file system (``ln /etc/shadow allowed/x``). A regular file with more than
one link is therefore refused — its other names may lie outside — with a sentence saying so.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MAX_LINKS = 40


class SandboxError(PermissionError):
    pass


@dataclass(frozen=True)
class Sandbox:
    roots: tuple[Path, ...]

    @classmethod
    def of(cls, directories: Iterable[str | Path]) -> Sandbox:
        return cls(tuple(Path(d).expanduser().resolve() for d in directories))

    def describe(self) -> str:
        return ", ".join(str(root) for root in self.roots) or "none"

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` inside the allowed directories (it must exist)."""
        fd, real = self.open(path)
        os.close(fd)
        return real

    def open(self, path: str, directory: bool | None = None) -> tuple[int, Path]:
        """A descriptor for ``path`` and its real path; ``directory`` True/False demands the kind.

        Relative paths start at the first allowed directory."""
        if not self.roots:
            raise SandboxError(
                "no directory is open to the file tools; the user can allow one with --allow-dir "
                "or tools.allowed_dirs in the settings"
            )
        if "\0" in path:
            raise SandboxError(f"{path!r} is not a valid path (it holds a NUL byte)")
        candidate = Path(path).expanduser()
        target = Path(os.path.normpath(candidate if candidate.is_absolute() else self.roots[0] / candidate))
        for _ in range(MAX_LINKS):
            root = next((r for r in self.roots if target == r or target.is_relative_to(r)), None)
            if root is None:
                raise SandboxError(f"{path} is outside the allowed directories ({self.describe()})")
            opened = _walk(root, target.relative_to(root).parts, path)
            if isinstance(opened, Path):  # a symlink on the way: walk its target instead
                target = opened
                continue
            fd = opened
            _check_kind(fd, path, directory)
            return fd, target
        raise SandboxError(f"{path} goes through more than {MAX_LINKS} symbolic links")


def _walk(root: Path, parts: tuple[str, ...], shown: str) -> int | Path:
    """Open ``root/parts`` component by component without following links: the descriptor, or,
    where a component is a symlink, the lexically resolved path that link leads to."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_NONBLOCK if last else os.O_DIRECTORY)
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as error:
                link = _link_target(error, part, fd)
                if link is None:
                    raise _refusal(error, shown) from None
                here = root.joinpath(*parts[:index])
                rest = parts[index + 1 :]
                return Path(os.path.normpath(here / link)).joinpath(*rest)
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def _link_target(error: OSError, part: str, fd: int) -> str | None:
    """The target of ``part`` if opening it failed because it is a symlink."""
    if error.errno not in (errno.ELOOP, errno.ENOTDIR):
        return None
    try:
        return os.readlink(part, dir_fd=fd)
    except OSError:  # not a link after all (or swapped back meanwhile): the open's error stands
        return None


def _refusal(error: OSError, shown: str) -> SandboxError | OSError:
    if error.errno == errno.ENOENT:
        return FileNotFoundError(f"{shown}: no such file or directory")
    if error.errno == errno.ENOTDIR:
        return NotADirectoryError(f"{shown}: a part of the path is not a directory")
    if error.errno == errno.EACCES:
        return SandboxError(f"{shown}: permission denied")
    return OSError(f"{shown} cannot be opened ({error.strerror})")


def _check_kind(fd: int, shown: str, directory: bool | None) -> None:
    mode = os.fstat(fd).st_mode
    try:
        if directory is True and not stat.S_ISDIR(mode):
            raise NotADirectoryError(f"{shown} is not a directory")
        if directory is False and not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise FileNotFoundError(f"{shown} is not a file ({what})")
        links = os.fstat(fd).st_nlink
        if stat.S_ISREG(mode) and links > 1:
            raise SandboxError(
                f"{shown} has {links} hard links, so it may be a file outside the allowed directories; "
                "the file tools read only files with one link (the user can copy it instead)"
            )
    except OSError:
        os.close(fd)
        raise
