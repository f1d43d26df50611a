"""Compare mode: the baseline and the optimized reply side by side, then the verdict."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from app.tui.widgets.message_view import MessageView
from backend.chat.compare import CompareResult


class CompareView(Vertical):
    def __init__(self) -> None:
        super().__init__(classes="compare")
        self.panes = {
            "baseline": MessageView("assistant", path="baseline"),
            "optimized": MessageView("assistant", path="optimized"),
        }

    def compose(self) -> ComposeResult:
        with Horizontal(classes="panes"):
            yield self.panes["baseline"]
            yield self.panes["optimized"]
        yield Static("running the baseline, then the optimized path…", classes="verdict", markup=False)

    def show_result(self, result: CompareResult) -> None:
        """The verdict, and what the optimized path ran with that the baseline did not."""
        lines = [result.summary()] if result.same_paths else [result.summary(), result.differences_line()]
        self.query_one(".verdict", Static).update("\n".join(lines))

    def show_failure(self, message: str) -> None:
        self.query_one(".verdict", Static).update(f"comparison incomplete: {message}")
