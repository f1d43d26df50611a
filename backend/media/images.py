"""Images for Gemma 4: Pillow, EXIF orientation applied, RGB; GIFs give their first frame.

The pixel count is checked from the header before anything is decoded (a 370-byte PNG can
claim 100000×100000), JPEGs decode at a reduced scale where that is enough, and the image is
cut down to ``MAX_SIDE`` pixels on its long side: Gemma 4 sees at most 280 soft tokens (about
800×800 pixels), so nothing the model could use is lost, and vLLM never gets a huge tensor.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

from backend.config.settings import MediaSettings
from backend.media.attachment import IMAGE_EXTENSIONS, Attachment, AttachmentError, sha256_of
from backend.media.token_costs import image_tokens

MAX_SIDE = 2048
ORIENTATIONS = {
    2: "FLIP_LEFT_RIGHT",
    3: "ROTATE_180",
    4: "FLIP_TOP_BOTTOM",
    5: "TRANSPOSE",
    6: "ROTATE_270",
    7: "TRANSVERSE",
    8: "ROTATE_90",
}
"""EXIF orientation → the ``Image.Transpose`` that undoes it (as ``ImageOps.exif_transpose`` maps them)."""


def _too_many_pixels(path: Path, pixels: int, limits: MediaSettings, size: str = "") -> AttachmentError:
    megapixels = pixels / 1e6
    return AttachmentError(
        f"{path} is {size or f'{megapixels:.0f} megapixels'}"
        f"{f' ({megapixels:.0f} megapixels)' if size else ''}, over the "
        f"{limits.max_image_megapixels:g}-megapixel limit.",
        "Attach a smaller image or raise media.max_image_megapixels.",
    )


def _decode(path: Path, limits: MediaSettings) -> tuple[Any, str]:
    """The first frame as RGB, at most ``MAX_SIDE`` on its long side, and the detected format.

    One full-size copy at most: the decoded frame is box-reduced to near ``MAX_SIDE`` before
    anything else (orientation, the final resize) touches it."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        with Image.open(path) as opened:
            actual = opened.format or "unknown"
            width, height = opened.size
            if width * height > limits.max_image_megapixels * 1e6:
                raise _too_many_pixels(path, width * height, limits, f"{width}x{height}")
            if actual == "JPEG":
                opened.draft("RGB", (MAX_SIDE, MAX_SIDE))  # decode at 1/2, 1/4 or 1/8 scale
            opened.seek(0)
            opened.load()
            orientation = opened.getexif().get(0x0112, 1)
            image = opened if opened.mode == "RGB" else opened.convert("RGB")
            factor = max(image.size) // MAX_SIDE
            if factor > 1:
                image = image.reduce(factor)
            if image is opened:
                image = opened.copy()
    if orientation in ORIENTATIONS:  # EXIF orientation, applied to the small image
        image = image.transpose(Image.Transpose[ORIENTATIONS[orientation]])
    if max(image.size) > MAX_SIDE:
        image.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
    return image, actual


def load(path: Path, limits: MediaSettings) -> Attachment:
    from PIL import Image, UnidentifiedImageError

    size_mb = path.stat().st_size / 1e6
    if size_mb > limits.max_image_mb:
        raise AttachmentError(
            f"{path} is {size_mb:.1f} MB, over the {limits.max_image_mb:g} MB image limit.",
            "Attach a smaller image or raise media.max_image_mb.",
        )
    expected = IMAGE_EXTENSIONS[path.suffix.lower()]
    try:
        rgb, actual = _decode(path, limits)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        claimed = re.search(r"\((\d+) pixels\)", str(error))
        raise _too_many_pixels(path, int(claimed.group(1)) if claimed else 0, limits) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as error:
        raise AttachmentError(
            f"{path} is not a readable image ({error}).", "Attach a PNG, JPEG, WebP, GIF or BMP file."
        ) from None
    except MemoryError:
        raise AttachmentError(
            f"{path} needs more memory to decode than is free.", "Attach a smaller image."
        ) from None
    if actual != expected:
        raise AttachmentError(
            f"{path}: the content is {actual}, which does not match its {path.suffix} extension.",
            "Rename it to its real type or re-export it.",
        )
    width, height = rgb.size
    return Attachment("image", path, sha256_of(path), rgb, image_tokens(width, height), f"{width}x{height}")
