"""Images a tool returns (an MCP server's ``ImageContent``): kept as files, checked like attachments.

``keep_image(data, mime)`` decodes the base64 payload (refusing more than the image size limit
before decoding it), writes it once under ``data_dir()/tool-images/`` named by its content hash —
so the chat history can show it again — and loads it with the attachment loader, which refuses a
decompression bomb, a corrupt file or content that is not what its MIME type says. The result
is either the kept image (path, size) or the reason it was not kept; the caller describes the
block either way, so a bad image never fails the call.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from pathlib import Path

from backend.config import locations
from backend.config.settings import MediaSettings
from backend.media.attachment import AttachmentError

MIME_SUFFIXES = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/jpg": ".jpg",
    "image/webp": ".webp",
    "image/gif": ".gif",
    "image/bmp": ".bmp",
}


@dataclass(frozen=True)
class KeptImage:
    path: str
    """Where the image is kept (what a ``ToolRecord``'s ``images`` lists)."""
    detail: str
    """``640x480``."""


def images_dir() -> Path:
    return locations.data_dir() / "tool-images"


def keep_image(data: str, mime: str, limits: MediaSettings | None = None) -> KeptImage | str:
    """The image kept on disk, or why it was not (one short phrase)."""
    limits = limits or MediaSettings()
    suffix = MIME_SUFFIXES.get(mime.lower().split(";")[0].strip())
    if suffix is None:
        return f"{mime} is not an image type gemma-chat reads"
    if len(data) * 3 / 4 > limits.max_image_mb * 1e6:
        return f"over the {limits.max_image_mb:g} MB image limit"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "its data is not valid base64"
    if not raw:
        return "it is empty"
    directory = images_dir()
    path = directory / (hashlib.sha256(raw).hexdigest()[:32] + suffix)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            partial = path.with_suffix(path.suffix + ".part")
            partial.write_bytes(raw)
            partial.replace(path)
    except OSError as error:
        return f"it could not be saved ({error.strerror or error})"
    from backend.media import images

    try:
        loaded = images.load(path, limits)
    except AttachmentError as error:
        path.unlink(missing_ok=True)
        return error.problem.replace(str(path), "it").rstrip(".")
    return KeptImage(str(path), loaded.detail)
