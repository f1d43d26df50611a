"""The message box: Enter sends, Shift+Enter or Ctrl+J insert a newline."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from app.tui.paste_input import pasted_text
from backend.media.attachment import kind_of


def pasted_path(text: str) -> Path | None:
    """The media file a paste names (quoted, escaped or as a file:// URL, as terminals drop them)."""
    candidate = text.strip().strip("'\"")
    if "\n" in candidate or not candidate:
        return None
    if candidate.startswith("file://"):
        candidate = unquote(urlparse(candidate).path)
    candidate = candidate.replace("\\ ", " ")
    path = Path(candidate).expanduser()
    return path if kind_of(path) is not None and path.is_file() else None


def complete_path(partial: str) -> str:
    """Extend ``partial`` to the longest common prefix of the matching folders and media files."""
    typed = Path(partial).expanduser()
    folder, stem = (typed, "") if partial.endswith("/") else (typed.parent, typed.name)
    try:
        names = [
            p.name + ("/" if p.is_dir() else "")
            for p in folder.iterdir()
            if p.name.startswith(stem) and (p.is_dir() or kind_of(p) is not None)
        ]
    except OSError:
        return partial
    if not names:
        return partial
    common = os.path.commonprefix(names)  # noqa: RUF071 - a character prefix is what completes
    head = partial[: len(partial) - len(stem)] if stem else partial
    return head + common


class PromptInput(TextArea):
    @dataclass
    class Submitted(Message):
        text: str

    @dataclass
    class PathPasted(Message):
        """A pasted (or terminal-dropped) path to a media file: attach it instead of typing it."""

        path: Path

    @dataclass
    class ScrollChat(Message):
        """PageUp / PageDown in the prompt: the chat above scrolls a page (the prompt is a few lines)."""

        pages: int

    def __init__(self, **kwargs: object) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, **kwargs)  # type: ignore[arg-type]

    async def _on_paste(self, event: events.Paste) -> None:
        """A pasted path becomes an attachment; other text is TextArea's to insert — Textual calls
        its own ``_on_paste`` after this one (calling it here too pasted everything twice)."""
        path = pasted_path(event.text)
        if path is not None:
            event.prevent_default()
            event.stop()
            self.post_message(self.PathPasted(path))
            return
        text = pasted_text(event.text)  # escape sequences dropped, controls visible, in order
        if text != event.text:
            event.prevent_default()
            event.stop()
            if not self.read_only:
                done = self.replace(text, *self.selection, maintain_selection_offset=False)
                self.move_cursor(done.end_location)

    async def _on_key(self, event: events.Key) -> None:
        current: str = self.document.text
        if event.key == "enter":
            event.prevent_default()
            event.stop()
            if current.strip():
                self.post_message(self.Submitted(current.strip()))
            return
        if event.key == "tab" and current.startswith("/attach "):
            event.prevent_default()
            event.stop()
            self.load_text("/attach " + complete_path(current.removeprefix("/attach ")))
            self.move_cursor(self.document.end)
            return
        if event.key in ("pageup", "pagedown"):
            event.prevent_default()
            event.stop()
            self.post_message(self.ScrollChat(-1 if event.key == "pageup" else 1))
            return
        if event.key in ("shift+enter", "ctrl+j"):
            event.prevent_default()
            event.stop()
            self.insert("\n")
            return
        await super()._on_key(event)
