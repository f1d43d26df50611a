"""Which tokens of a reply came from accepted drafts: the reply with those runs shaded, and a summary.

The engine's own figures only: each engine step's tokens and how many of them were drafts the
target accepted (``TurnMetrics.step_tokens``) and its scheduler's per-step counts of drafts
proposed and accepted (``draft_steps``). The summary wraps at the dialog's width, the reply
scrolls, and Gemma 4's special tokens (``<turn|>``, ``<eos>``…) are counted but never shown as text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from backend.engine.metrics import TurnMetrics, accepted_positions
from backend.gemma4.reply import MARKERS

DRAFTED_STYLE = "black on #8fbc8f"
"""How an accepted draft token is shaded (the target's own tokens stay plain)."""


def drafts_summary(metrics: TurnMetrics) -> str:
    """``48 of 64 tokens were accepted drafts (75%) · 17 steps verified drafts · 3.82 tokens a step``."""
    steps = metrics.step_tokens or ()
    accepted = len(accepted_positions(steps))
    total = sum(size for size, _ in steps)
    parts = [f"{accepted} of {total} tokens were accepted drafts ({accepted / total:.0%})" if total else ""]
    if metrics.draft_steps:
        proposed = sum(d for d, _ in metrics.draft_steps)
        taken = sum(a for _, a in metrics.draft_steps)
        parts.append(f"{len(metrics.draft_steps)} steps verified {proposed} drafts, {taken} accepted")
    if steps:
        parts.append(f"{total / len(steps):.2f} tokens a step over {len(steps)} steps")
    return " · ".join(part for part in parts if part)


def without_markers(piece: str) -> str:
    """A token's text with Gemma 4's special tokens taken out (the end of the turn decodes to
    ``<turn|>``: a token the engine counted, not text the model wrote)."""
    for marker in MARKERS:
        piece = piece.replace(marker, "")
    return piece


def shaded(pieces: Sequence[str], positions: Sequence[int]) -> Text:
    """The reply's token texts, those at ``positions`` (accepted drafts) shaded; markers left out."""
    drafted = set(positions)
    text = Text()
    for index, piece in enumerate(pieces):
        text.append(without_markers(piece), style=DRAFTED_STYLE if index in drafted else "")
    return text


class DraftsScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Close"), Binding("f7", "close", "Close", show=False)]

    def __init__(
        self, token_ids: Sequence[int], metrics: TurnMetrics, decode: Callable[[list[int]], str]
    ) -> None:
        super().__init__()
        self.token_ids = tuple(token_ids)
        self.metrics = metrics
        pieces = [decode([token]) for token in self.token_ids]
        self.shaded_text = shaded(pieces, accepted_positions(metrics.step_tokens or ()))
        """The reply's tokens, accepted drafts shaded."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Accepted drafts in the last reply (shaded) — Esc closes")
            yield Static(drafts_summary(self.metrics), id="drafts-summary", markup=False)
            with VerticalScroll(id="drafts-scroll"):
                yield Static(self.shaded_text, id="drafts-text")

    def action_close(self) -> None:
        self.dismiss(None)
