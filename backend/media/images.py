"""Images for Gemma 4: Pillow, EXIF orientation applied, RGB; GIFs give their first frame."""

from __future__ import annotations

from pathlib import Path

from backend.media.attachment import IMAGE_EXTENSIONS, Attachment, AttachmentError, sha256_of
from backend.media.token_costs import image_tokens
from backend.settings import MediaSettings


def load(path: Path, limits: MediaSettings) -> Attachment:
    from PIL import Image, ImageOps, UnidentifiedImageError

    size_mb = path.stat().st_size / 1e6
    if size_mb > limits.max_image_mb:
        raise AttachmentError(
            f"{path} is {size_mb:.1f} MB, over the {limits.max_image_mb:g} MB image limit.",
            "Attach a smaller image or raise media.max_image_mb.",
        )
    expected = IMAGE_EXTENSIONS[path.suffix.lower()]
    try:
        with Image.open(path) as image:
            actual = image.format or "unknown"
            image.seek(0)
            image.load()
            rgb = ImageOps.exif_transpose(image).convert("RGB")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise AttachmentError(
            f"{path} is not a readable image ({error}).", "Attach a PNG, JPEG, WebP, GIF or BMP file."
        ) from None
    if actual != expected:
        raise AttachmentError(
            f"{path}: the content is {actual}, which does not match its {path.suffix} extension.",
            "Rename it to its real type or re-export it.",
        )
    width, height = rgb.size
    return Attachment("image", path, sha256_of(path), rgb, image_tokens(width, height), f"{width}x{height}")
