"""Where ``make-model`` writes: a folder gemma-chat may fill or replace, or a refusal by name.

gemma-chat deletes or overwrites only what it created: a folder that does not exist yet, an empty
one, or one holding a marker it wrote (a finished checkpoint's manifest, or ``BUILDING``, which it
writes first into a folder it starts filling and removes when done). Anything else — a file, a
folder of the user's files, a folder it cannot read — is refused by name before any work (no
download, no weights), so a mistyped ``DIR`` costs nothing.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from backend.errors import GemmaChatError

BUILDING = "gemma-chat-building"
"""Written first into a folder gemma-chat starts to fill; a folder holding it is gemma-chat's."""
SHOWN_ENTRIES = 3


class OutputFolderRefused(GemmaChatError):
    """``make-model``'s folder is not one gemma-chat may write into or replace."""


def claim(folder: Path, markers: tuple[str, ...]) -> bool:
    """Check that ``folder`` is gemma-chat's to fill or replace: absent (its nearest existing
    parent a folder), empty, or holding one of ``markers`` or ``BUILDING``. Returns whether it
    holds gemma-chat's files (so replacing it loses nothing of the user's); raises
    ``OutputFolderRefused`` naming the folder and why otherwise."""
    if not folder.exists() and not folder.is_symlink():
        _check_parent(folder)
        return False
    if not folder.is_dir():
        raise OutputFolderRefused(
            f"{folder} is a file, not a folder.", "Name a new or empty folder for the checkpoint."
        )
    try:
        entries = sorted(entry.name for entry in folder.iterdir())
    except OSError as error:
        raise OutputFolderRefused(
            f"{folder} cannot be read ({error.strerror or error}).", "Name a folder you can write to."
        ) from error
    if not entries:
        return False
    if any((folder / marker).is_file() for marker in (*markers, BUILDING)):
        return True
    shown = ", ".join(entries[:SHOWN_ENTRIES]) + (", …" if len(entries) > SHOWN_ENTRIES else "")
    raise OutputFolderRefused(
        f"{folder} already holds files gemma-chat did not write ({shown}); nothing was changed.",
        f"Name a new or empty folder: gemma-chat only replaces a folder it made itself "
        f"(one holding {markers[0]}).",
    )


def _check_parent(folder: Path) -> None:
    for parent in folder.parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputFolderRefused(
                    f"{folder} cannot be made: {parent} is a file, not a folder.",
                    "Name a folder whose parents are folders.",
                )
            return


def start_filling(folder: Path) -> None:
    """Make ``folder`` (claimed first) and mark it as gemma-chat's while it is being filled."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / BUILDING).write_text("gemma-chat is writing this folder; a failed build leaves it.\n")


def done_filling(folder: Path) -> None:
    (folder / BUILDING).unlink(missing_ok=True)


def remove_own(folder: Path, markers: tuple[str, ...]) -> None:
    """Delete ``folder`` only where it is gemma-chat's (empty, or holding a marker); otherwise
    raise ``OutputFolderRefused`` and delete nothing."""
    if not folder.exists() and not folder.is_symlink():
        return
    if claim(folder, markers):
        shutil.rmtree(folder)
    else:
        folder.rmdir()  # empty: nothing of anyone's is lost


def build_failure(error: BaseException, folder: Path) -> GemmaChatError | None:
    """The clear message for a build that failed for want of disk or memory, or could not write
    ``folder`` (any other ``OSError`` too, named); None for anything else (a bug, reported as one)."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return GemmaChatError(
            f"The disk holding {folder} is full (or over its quota): the checkpoint could not be written.",
            "Free disk space there, or name a folder on another disk.",
        )
    if isinstance(error, PermissionError | IsADirectoryError | NotADirectoryError | FileExistsError):
        return GemmaChatError(
            f"{folder} could not be written: {error.strerror or error}.",
            "Name a new folder in a place you can write to.",
        )
    if isinstance(error, OSError) and error.errno != errno.ENOMEM:
        return GemmaChatError(
            f"The checkpoint could not be built in {folder}: {error}.",
            "Check that folder and its disk, then run the command again.",
        )
    if isinstance(error, MemoryError | OSError) or (
        isinstance(error, RuntimeError) and "can't allocate memory" in str(error)
    ):
        return GemmaChatError(
            "There is not enough memory to build this checkpoint.",
            "Close other programs, or choose a smaller --size (tiny needs well under 1 GB).",
        )
    return None
