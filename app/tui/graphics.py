"""Pictures in the terminal: which way this terminal can draw them, and the Kitty graphics
protocol's sequences.

- **Kitty graphics, Unicode placeholders** (kitty, Ghostty): the picture is sent once as a PNG
  (``ESC _ G a=T,U=1,…``: a virtual placement of ``columns`` x ``rows`` cells), then drawn by
  ordinary text: each cell is ``U+10EEEE`` with two combining marks naming its row and column,
  coloured with the image's id. Textual lays the cells out, scrolls and clips them like text, so
  nothing is drawn outside the widget, and a cell drawn over simply stops showing the picture.
- **Half-blocks** everywhere else: ``▀`` cells, two pixels each (``thumbnail.half_blocks``). In
  tmux too: tmux passes neither Kitty graphics nor Sixel on unless told to (``allow-passthrough``),
  and what it does not pass would be drawn as garbage or not at all.

Sixel is not drawn: it paints pixels at the cursor, outside the cells Textual redraws, so every
repaint of the chat would wipe or smear it; a Sixel terminal gets half-blocks.
``GEMMA_CHAT_GRAPHICS=kitty|halfblocks`` overrides the detection.
"""

from __future__ import annotations

import base64
import io
import itertools
import os
import random
from collections.abc import Mapping
from typing import Any, Literal

from rich.style import Style
from rich.text import Text

from backend.config import switch_rules

Graphics = Literal["kitty", "halfblocks"]
KINDS: tuple[Graphics, ...] = ("kitty", "halfblocks")
OVERRIDE = switch_rules.GRAPHICS
PLACEHOLDER = "\U0010eeee"
DIACRITICS = (
    0x0305, 0x030D, 0x030E, 0x0310, 0x0312, 0x033D, 0x033E, 0x033F, 0x0346, 0x034A, 0x034B, 0x034C,
    0x0350, 0x0351, 0x0352, 0x0357, 0x035B, 0x0363, 0x0364, 0x0365, 0x0366, 0x0367, 0x0368, 0x0369,
    0x036A, 0x036B, 0x036C, 0x036D, 0x036E, 0x036F, 0x0483, 0x0484, 0x0485, 0x0486, 0x0487, 0x0592,
    0x0593, 0x0594, 0x0595, 0x0597, 0x0598, 0x0599, 0x059C, 0x059D, 0x059E, 0x059F, 0x05A0, 0x05A1,
)  # fmt: skip
"""The first entries of kitty's ``rowcolumn-diacritics.txt``: the mark for row or column ``i``."""
MAX_CELLS = len(DIACRITICS)
"""The most rows or columns a placeholder picture can have here."""
CHUNK = 4096
"""Kitty takes a transmission's base64 in chunks of at most 4096 bytes."""
SENT_SIDE = 512
"""A picture is sent at most this many pixels on its long side (it is shown a few cells wide)."""

_ids = itertools.count(random.randrange(1, 1 << 23))


def detect(env: Mapping[str, str] | None = None) -> Graphics:
    """How this terminal can draw pictures, from its environment."""
    env = os.environ if env is None else env
    forced = env.get(OVERRIDE, "").strip().lower()
    if forced in KINDS:
        return forced  # type: ignore[return-value]
    term = env.get("TERM", "").lower()
    if env.get("TMUX") or term.startswith(("screen", "tmux")):
        return "halfblocks"
    program = env.get("TERM_PROGRAM", "").lower()
    if env.get("KITTY_WINDOW_ID") or "kitty" in term or "ghostty" in term or program == "ghostty":
        return "kitty"
    return "halfblocks"


def next_image_id() -> int:
    """A new image id (24 bits, never 0: it is drawn as the cells' colour)."""
    return next(_ids) % ((1 << 24) - 1) + 1


def transmit(image: Any, image_id: int, columns: int, rows: int) -> str:
    """The sequences that send ``image`` (PIL) as ``image_id`` and place it virtually over
    ``columns`` x ``rows`` cells, quietly (``q=2``: the terminal answers nothing)."""
    picture = image.copy()
    picture.thumbnail((SENT_SIDE, SENT_SIDE))
    buffer = io.BytesIO()
    picture.convert("RGB").save(buffer, format="PNG")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)] or [""]
    head = f"a=T,U=1,f=100,t=d,q=2,i={image_id},c={columns},r={rows}"
    parts = []
    for index, chunk in enumerate(chunks):
        more = int(index < len(chunks) - 1)
        keys = f"{head},m={more}" if index == 0 else f"m={more}"
        parts.append(f"\x1b_G{keys};{chunk}\x1b\\")
    return "".join(parts)


def delete(image_id: int) -> str:
    """The sequence that frees ``image_id``'s picture in the terminal."""
    return f"\x1b_Ga=d,d=I,q=2,i={image_id}\x1b\\"


def placeholders(image_id: int, columns: int, rows: int) -> Text:
    """The cells that show ``image_id``'s virtual placement: ``rows`` lines of ``columns`` cells."""
    if not (0 < columns <= MAX_CELLS and 0 < rows <= MAX_CELLS):
        raise ValueError(f"a placeholder picture is 1 to {MAX_CELLS} cells a side, not {columns}x{rows}")
    colour = f"#{image_id >> 16 & 0xFF:02x}{image_id >> 8 & 0xFF:02x}{image_id & 0xFF:02x}"
    text = Text(style=Style(color=colour))
    for row in range(rows):
        mark = chr(DIACRITICS[row])
        text.append("".join(PLACEHOLDER + mark + chr(DIACRITICS[col]) for col in range(columns)))
        if row < rows - 1:
            text.append("\n")
    return text


def cells(width: int, height: int, columns: int, rows: int) -> tuple[int, int]:
    """The cells a ``width`` x ``height`` picture takes at most ``columns`` x ``rows`` (a cell is
    about twice as tall as wide), its proportions kept."""
    scale = min(columns / width, rows * 2 / height)
    across = max(1, min(columns, round(width * scale)))
    down = max(1, min(rows, round(height * scale / 2)))
    return across, down


def placeholder_cells(text: str) -> list[tuple[int, int]]:
    """Each placeholder cell's (row, column) in ``text`` (what a terminal reads back; tests)."""
    index = {chr(code): value for value, code in enumerate(DIACRITICS)}
    found = []
    for piece in text.split(PLACEHOLDER)[1:]:
        if len(piece) >= 2 and piece[0] in index and piece[1] in index:
            found.append((index[piece[0]], index[piece[1]]))
    return found
