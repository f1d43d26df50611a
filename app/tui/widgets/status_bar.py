"""The top line: model, active path, engine state and the context gauge."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static


def gauge(used: int, window: int, width: int = 10) -> str:
    filled = round(width * min(used / window, 1.0)) if window else 0
    return "█" * filled + "░" * (width - filled)


class StatusBar(Static):
    model: reactive[str] = reactive("")
    path: reactive[str] = reactive("optimized")
    engine: reactive[str] = reactive("starting")
    context_used: reactive[int] = reactive(0)
    pending_tokens: reactive[int] = reactive(0)
    """Tokens of attachments waiting in the input, shown in the gauge before sending."""
    context_window: reactive[int] = reactive(0)
    compare_next: reactive[bool] = reactive(False)

    def render(self) -> str:
        used = self.context_used + self.pending_tokens
        window = f"{used}/{self.context_window}" if self.context_window else f"{used}/?"
        compare = "  [b]compare next turn[/b]" if self.compare_next else ""
        parts = [
            f"[b]{self.model}[/b]",
            f"path [b]{self.path}[/b]",
            f"engine {self.engine}",
            f"ctx {gauge(used, self.context_window)} {window}{compare}",
        ]
        return " │ ".join(parts)
