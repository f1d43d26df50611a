"""An image drawn in the terminal with half-blocks: two pixels per cell (``▀``, top pixel as the
colour, bottom as the background), the way a tool's image result shows in its timeline block and
an attachment where the terminal has no graphics protocol (``app.tui.graphics``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.style import Style
from rich.text import Text

from backend.config.settings import MediaSettings
from backend.media import images
from backend.media.attachment import AttachmentError

MAX_COLUMNS = 48
MAX_ROWS = 16


def thumbnail(path: str, columns: int = MAX_COLUMNS, rows: int = MAX_ROWS) -> Text:
    """``path`` as coloured half-blocks at most ``columns`` x ``rows`` cells, or why it cannot be
    shown. The image is read with the attachment loader (its size limits and checks)."""
    try:
        rgb = images.load(Path(path), MediaSettings()).payload
    except (AttachmentError, OSError) as error:
        return Text(f"(image not shown: {getattr(error, 'problem', error)})", style="dim")
    return half_blocks(rgb, columns, rows)


def half_blocks(image: Any, columns: int = MAX_COLUMNS, rows: int = MAX_ROWS) -> Text:
    """``image`` (PIL) as coloured half-blocks at most ``columns`` x ``rows`` cells."""
    rgb = image.convert("RGB")
    rgb.thumbnail((columns, rows * 2))
    width, height = rgb.size
    pixels = rgb.load()
    text = Text()
    for top in range(0, height, 2):
        for x in range(width):
            upper = pixels[x, top]
            lower = pixels[x, top + 1] if top + 1 < height else None
            style = Style(color=_hex(upper), bgcolor=_hex(lower) if lower is not None else None)
            text.append("▀", style)
        if top + 2 < height:
            text.append("\n")
    return text


def _hex(pixel: tuple[int, ...]) -> str:
    red, green, blue = pixel[:3]
    return f"#{red:02x}{green:02x}{blue:02x}"
