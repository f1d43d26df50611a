"""Images for Gemma 4: loaded with Pillow, EXIF orientation applied, converted to RGB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.errors import GemmaChatError


class AttachmentError(GemmaChatError):
    """An attachment that cannot be sent; the message names the file and the reason."""


def load_image(path_text: str | Path) -> Any:
    """The image at ``path_text`` as an RGB ``PIL.Image``, or an ``AttachmentError``."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    path = Path(path_text).expanduser()
    if not path.exists():
        raise AttachmentError(f"{path}: no such file.", "Check the path.")
    if path.is_dir():
        raise AttachmentError(f"{path} is a directory, not an image.", "Attach a file.")
    if path.stat().st_size == 0:
        raise AttachmentError(f"{path} is empty (0 bytes).", "Attach a real image.")
    try:
        with Image.open(path) as image:
            image.seek(0)
            image.load()
            return ImageOps.exif_transpose(image).convert("RGB")
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise AttachmentError(
            f"{path} is not a readable image ({error}).", "Attach a PNG, JPEG, WebP, GIF or BMP."
        ) from None
