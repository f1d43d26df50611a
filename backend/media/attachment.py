"""An attachment as a value: kind, source, content hash, decoded payload, token cost.

``check_file`` refuses a file that cannot be one (missing, a directory, empty, unsupported);
the loaders in ``backend.media.load`` raise ``AttachmentError`` naming the file and the reason
for the rest, so nothing is sent and the caller keeps the prompt.
"""

from __future__ import annotations

import hashlib
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


def check_file(path: Path) -> str:
    """The kind of a readable, non-empty file of a supported type, or an AttachmentError."""
    if not path.exists():
        raise AttachmentError(f"{path}: no such file.", "Check the path.")
    if path.is_dir():
        raise AttachmentError(f"{path} is a directory, not a file.", "Attach a file.")
    kind = kind_of(path)
    if kind is None:
        raise AttachmentError(
            f"{path}: {path.suffix or 'files without an extension'} is not a supported type.",
            f"Attach one of {', '.join(SUPPORTED)}.",
        )
    try:
        size = path.stat().st_size
        with path.open("rb"):
            pass
    except OSError as error:
        raise AttachmentError(
            f"{path} cannot be read ({error.strerror}).", "Check its permissions."
        ) from None
    if size == 0:
        raise AttachmentError(f"{path} is empty (0 bytes).", "Attach a real file.")
    return kind


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
