"""An attachment as a value: kind, source, content hash, decoded payload, token cost.

``check_file`` refuses a file that cannot be one (missing, a directory, empty, unsupported);
the loaders in ``backend.media.load`` raise ``AttachmentError`` naming the file and the reason
for the rest, so nothing is sent and the caller keeps the prompt.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.errors import GemmaChatError

IMAGE_EXTENSIONS = {
    ".png": "PNG",
    ".jpg": "JPEG",
    ".jpeg": "JPEG",
    ".webp": "WEBP",
    ".gif": "GIF",
    ".bmp": "BMP",
}
AUDIO_EXTENSIONS = {".wav": "WAV", ".flac": "FLAC", ".ogg": "OGG", ".mp3": "MP3"}
VIDEO_EXTENSIONS = {".mp4", ".webm", ".mov", ".mkv"}
SUPPORTED = sorted([*IMAGE_EXTENSIONS, *AUDIO_EXTENSIONS, *VIDEO_EXTENSIONS])


class AttachmentError(GemmaChatError):
    """An attachment that cannot be sent; the message names the file and the reason."""


@dataclass(frozen=True)
class Attachment:
    kind: str
    """``image``, ``audio`` or ``video``."""
    path: Path
    sha256: str
    payload: Any
    """What vLLM takes: a PIL image; ``(samples, 16000)``; or ``(frames, metadata)``."""
    tokens: int
    """Prompt tokens this attachment adds (soft tokens and markers)."""
    detail: str
    """For chips: ``640x480``; ``0:12``; ``0:45, 16 frames``."""
    notices: tuple[str, ...] = ()


def media_payloads(attachments: list[Attachment]) -> dict[str, list[Any]]:
    """The attachments in vLLM's ``multi_modal_data`` form: payloads by kind, in prompt order."""
    data: dict[str, list[Any]] = {}
    for attachment in attachments:
        data.setdefault(attachment.kind, []).append(attachment.payload)
    return data


def kind_of(path: Path) -> str | None:
    suffix = path.suffix.lower()
    if suffix in IMAGE_EXTENSIONS:
        return "image"
    if suffix in AUDIO_EXTENSIONS:
        return "audio"
    if suffix in VIDEO_EXTENSIONS:
        return "video"
    return None


FILE_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def check_file(path: Path) -> str:
    """The kind of a readable, non-empty regular file of a supported type, or an AttachmentError.

    Nothing here can block: the file is stat'ed first, and only a regular file is ever opened (a
    FIFO named ``x.wav`` would wait for a writer forever)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise AttachmentError(f"{path}: no such file.", "Check the path.") from None
    except (OSError, ValueError) as error:  # ValueError: a NUL byte in the path
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise AttachmentError(f"{str(path)[:300]} cannot be read ({reason}).", "Check the path.") from None
    if stat.S_ISDIR(info.st_mode):
        raise AttachmentError(f"{path} is a directory, not a file.", "Attach a file.")
    if not stat.S_ISREG(info.st_mode):
        what = FILE_KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
        raise AttachmentError(f"{path} is {what}, not a regular file.", "Attach a file saved on disk.")
    kind = kind_of(path)
    if kind is None:
        raise AttachmentError(
            f"{path}: {path.suffix or 'files without an extension'} is not a supported type.",
            f"Attach one of {', '.join(SUPPORTED)}.",
        )
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as error:
        raise AttachmentError(
            f"{path} cannot be read ({error.strerror}).", "Check its permissions."
        ) from None
    if info.st_size == 0:
        raise AttachmentError(f"{path} is empty (0 bytes).", "Attach a real file.")
    return kind


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
