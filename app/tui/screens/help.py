"""F1: every binding with what it does."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q", "dismiss", "Close")]

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self.rows = bindings

    def compose(self) -> ComposeResult:
        table = "\n".join(f"| `{key}` | {description} |" for key, description in self.rows)
        text = (
            "# gemma-chat — keys\n\n| key | action |\n| --- | --- |\n"
            f"{table}\n\n"
            "**Ctrl+P** opens the command palette with every action. "
            "Keys can be rebound in the `[keymap]` section of the config file, by binding id."
        )
        with VerticalScroll(id="help"):
            yield Markdown(text)
