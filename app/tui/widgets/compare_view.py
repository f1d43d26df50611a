"""Compare mode: the baseline and the optimized reply side by side, then the verdict
(backend.chat.verdict: the chat's compares' median and range, and this run's figures)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from app.tui.untrusted import literal
from app.tui.widgets.message_view import MessageView
from backend.chat.verdict import Verdict


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

    def show_order(self, first: str) -> None:
        """Which path this compare runs first (they alternate from one compare to the next)."""
        second = "optimized" if first == "baseline" else "baseline"
        self.query_one(".verdict", Static).update(f"running the {first}, then the {second} path…")

    def show_result(self, verdict: Verdict) -> None:
        """The verdict (this chat's compares, then this run), and what the optimized path ran with
        that the baseline did not."""
        result = verdict.result
        lines = [verdict.summary()] if result.same_paths else [verdict.summary(), result.differences_line()]
        self.query_one(".verdict", Static).update("\n".join(lines))

    def show_failure(self, message: str) -> None:
        self.query_one(".verdict", Static).update(literal(f"comparison incomplete: {message}"))
