"""A reply's thinking: a collapsed, dimmed block above the answer that opens on click or Enter."""

from __future__ import annotations

from textual.widgets import Collapsible, Static

from backend.terminal_text import terminal_safe


class ThoughtBlock(Collapsible):
    """Gemma 4's thought channel, streamed live while collapsed; its title counts the tokens."""

    def __init__(self, text: str = "", tokens: int = 0) -> None:
        self.text = text
        self.tokens = tokens
        self.view = Static(terminal_safe(text), classes="thought-text", markup=False)
        super().__init__(self.view, title=self._heading(), collapsed=True)
        self.add_class("thought-block")
        self.display = bool(text)

    def _heading(self) -> str:
        counted = f" · {self.tokens} tokens" if self.tokens else ""
        return f"thought{counted}"

    def append(self, fragment: str) -> None:
        self.set(self.text + fragment)

    def set(self, text: str, tokens: int | None = None) -> None:
        self.text = text
        if tokens is not None:
            self.tokens = tokens
        self.view.update(terminal_safe(text))
        self.title = self._heading()
        self.display = bool(text)
