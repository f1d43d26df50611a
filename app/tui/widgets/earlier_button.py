"""The first row of a long chat: a button that shows the turns before the ones on screen (issue
64, item 10). A chat opens showing its last ``SHOWN_PAGE`` turns; each press shows that many more
(from memory, or from the history once the turns held run out)."""

from __future__ import annotations

from textual.widgets import Button

SHOWN_PAGE = 50
"""Turns a chat shows when it opens, and shows more of at each press."""


class EarlierButton(Button):
    """``▲ Show earlier messages`` with how many are known to be there."""

    def __init__(self, held: int, more_stored: bool) -> None:
        super().__init__(label(held, more_stored), id="earlier", classes="earlier")


def label(held: int, more_stored: bool) -> str:
    count = f"{held:,}{'+' if more_stored else ''}" if held else "more"
    return f"▲ Show earlier messages ({count})"
