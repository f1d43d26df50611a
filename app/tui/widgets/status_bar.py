"""The top line: model, active path, engine state, MCP servers (ready/enabled), the context gauge,
and whether the next turn compares the paths or thinks.

The line is shortened to fit, never cut: first the engine's stage detail goes, then the model
name is abbreviated, then the labels and the gauge's bar narrow; the context figures
(``used/window``) always stay.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.reactive import reactive
from textual.widgets import Static

from app.tui.untrusted import escaped


def gauge(used: int, window: int, width: int = 10) -> str:
    filled = round(width * min(used / window, 1.0)) if window else 0
    return "█" * filled + "░" * (width - filled)


def _abbreviate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Level:
    """How much of the status line to show."""

    model_chars: int | None
    """Longest model name shown (None: in full; 0: left out)."""
    engine_detail: bool
    labels: bool
    gauge_width: int
    path: bool = True
    """Show the path (and "compare" when the next turn compares)."""
    engine: bool = True


LEVELS = (
    Level(None, True, True, 10),
    Level(None, False, True, 10),
    Level(24, False, True, 10),
    Level(16, False, False, 6),
    Level(0, False, False, 4),
    Level(0, False, False, 0),
    Level(0, False, False, 0, engine=False),
    Level(0, False, False, 0, path=False, engine=False),
)
"""From the fullest line to the narrowest: at 20 columns only ``ctx used/window`` is left."""


@dataclass(frozen=True)
class StatusFigures:
    model: str
    path: str
    engine: str
    engine_detail: str
    used: int
    window: int
    compare_next: bool
    mcp: str = ""
    think: bool = False

    def parts(self, level: Level) -> list[tuple[str, str]]:
        """``(label, value)`` pairs; the value is shown in bold."""
        parts: list[tuple[str, str]] = []
        if level.model_chars != 0:
            name = self.model if level.model_chars is None else _abbreviate(self.model, level.model_chars)
            parts.append(("", name))
        if level.path:
            parts.append(("path " if level.labels else "", self.path))
        detailed = level.engine_detail and self.engine_detail
        engine = f"{self.engine} ({self.engine_detail})" if detailed else self.engine
        if level.engine:
            parts.append(("engine " if level.labels else "", engine))
        if self.mcp and level.gauge_width:
            parts.append(("", self.mcp))
        window = f"{self.used}/{self.window}" if self.window else f"{self.used}/?"
        bar = f"{gauge(self.used, self.window, level.gauge_width)} " if level.gauge_width else ""
        parts.append(("ctx ", f"{bar}{window}"))
        if self.compare_next and level.path:
            parts.append(("", "compare next" if level.labels else "compare"))
        if self.think and level.gauge_width:
            parts.append(("", "thinking" if level.labels else "think"))
        return parts

    def line(self, width: int) -> str:
        """The fullest line that fits ``width`` cells, as Textual markup."""
        for level in LEVELS:
            parts = self.parts(level)
            if len(" │ ".join(label + value for label, value in parts)) <= width:
                break
        return " │ ".join(f"{label}[b]{escaped(value)}[/b]" for label, value in parts)


class StatusBar(Static):
    model: reactive[str] = reactive("")
    path: reactive[str] = reactive("optimized")
    engine: reactive[str] = reactive("starting")
    engine_detail: reactive[str] = reactive("")
    """What the engine is doing now (shown when there is room)."""
    context_used: reactive[int] = reactive(0)
    pending_tokens: reactive[int] = reactive(0)
    """Tokens of attachments waiting in the input, shown in the gauge before sending."""
    context_window: reactive[int] = reactive(0)
    compare_next: reactive[bool] = reactive(False)
    mcp: reactive[str] = reactive("")
    """MCP servers ready of enabled (``mcp 1/2…`` while some start); empty without servers."""
    think: reactive[bool] = reactive(False)
    """This chat's turns ask for Gemma 4's thinking mode."""

    def figures(self) -> StatusFigures:
        return StatusFigures(
            self.model,
            self.path,
            self.engine,
            self.engine_detail,
            self.context_used + self.pending_tokens,
            self.context_window,
            self.compare_next,
            self.mcp,
            self.think,
        )

    def render(self) -> str:
        return self.figures().line(self.content_size.width or 80)
