"""Copying in the app: a mouse selection (or the prompt's selected text) with Ctrl+C, the last
reply with F5, its last code block with F8 — each to the terminal's clipboard and primary
selection through OSC 52, and to the local clipboard where one can be reached
(``app.tui.clipboard``). Ctrl+C copies only where text is selected, and clears the selection it
copied, so the next Ctrl+C stops the reply or quits as before."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any, Protocol

from textual import work
from textual.widgets import TextArea
from textual.widgets.text_area import Selection

from app.tui.clipboard import copy_locally, local_targets, osc52_both


class CopyHost(Protocol):
    """What copying needs of the app it is mixed into."""

    _clipboard: str
    _driver: Any
    screen: Any
    focused: Any

    @property
    def is_headless(self) -> bool: ...
    def notify(self, message: str, *, severity: str = ..., timeout: float | None = ...) -> None: ...
    def copy_to_clipboard(self, text: str) -> None: ...
    def _copy_locally(self, text: str) -> Any: ...


class CopyActions:
    """Mixed into ``GemmaChatApp``, ahead of Textual's ``App``: every copy (a selection, F5, F8,
    the terminal's own copy key through Textual's ``screen.copy_text``) goes through
    ``copy_to_clipboard``."""

    def copy_to_clipboard(self: CopyHost, text: str) -> None:
        """``text`` to the clipboard and the primary selection (OSC 52), and to the local
        clipboard where there is one (off the event loop; not from a test's headless app)."""
        self._clipboard = text  # Textual's own record (``App.clipboard``)
        if self._driver is None:
            return
        self._driver.write(osc52_both(text))
        if not self.is_headless:
            self._copy_locally(text)

    @work(thread=True, group="clipboard", exit_on_error=False, description="copying to the local clipboard")
    def _copy_locally(self: CopyHost, text: str) -> None:
        copy_locally(text, local_targets(os.environ, shutil.which, sys.platform))

    def copy_selection(self: CopyHost) -> bool:
        """Copy the text selected with the mouse, or else in the focused text box, and clear that
        selection; False where nothing is selected."""
        text = self.screen.get_selected_text()
        box = self.focused if isinstance(self.focused, TextArea) else None
        if not text and box is not None and box.selected_text:
            text = box.selected_text
            box.selection = Selection.cursor(box.selection.end)
        if not text:
            return False
        self.copy_to_clipboard(text)
        self.screen.clear_selection()
        self.notify(f"Copied {len(text):,} characters.")
        return True
