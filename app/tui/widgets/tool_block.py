"""One tool call in a reply's timeline: a collapsible block with the call, its arguments, the result
(long results cut, with a button to show all), the duration and the status."""

from __future__ import annotations

import json

from textual.containers import Vertical
from textual.widgets import Button, Collapsible, Static

from app.tui.untrusted import escaped
from app.tui.widgets.thumbnail import thumbnail
from backend.gemma4.tool_call import ToolCall
from backend.terminal_text import terminal_safe
from backend.tools.runner import ToolRecord
from backend.tools.timeline import STATUS_MARKS, call_signature, duration_text

PREVIEW_CHARS = 600
PREVIEW_LINES = 12


def preview_of(text: str) -> str:
    """The first lines/characters of a result, saying how much is left out."""
    cut = "\n".join(text.splitlines()[:PREVIEW_LINES])[:PREVIEW_CHARS]
    return text if cut == text else f"{cut}\n… ({len(text) - len(cut)} more characters)"


class ToolBlock(Collapsible):
    def __init__(self, call: ToolCall | None = None, record: ToolRecord | None = None) -> None:
        name = record.name if record else call.name if call else "?"
        arguments = record.arguments if record else call.arguments if call else {}
        self.signature = escaped(call_signature(name or "?", arguments, width=70))
        """The call as the block's title shows it: Textual markup, the model's text escaped."""
        self.record: ToolRecord | None = None
        self.full_result = ""
        self.arguments_view = Static(
            terminal_safe("arguments: " + json.dumps(arguments, indent=2, ensure_ascii=False)),
            classes="tool-args",
            markup=False,
        )
        self.result_view = Static("", classes="tool-result", markup=False)
        self.more = Button("Show all", classes="tool-more", compact=True)
        self.images_view = Vertical(classes="tool-images")
        super().__init__(
            self.arguments_view,
            self.result_view,
            self.more,
            self.images_view,
            title=f"⚙ {self.signature} · running…",
            collapsed=True,
        )
        self.add_class("tool-block")
        if record is not None:
            self.finish(record)

    def on_mount(self) -> None:
        self.more.display = preview_of(self.full_result) != self.full_result
        self._show_images()

    def _show_images(self) -> None:
        """A result's images, drawn in the block (which opens to show them), each with its file."""
        record = self.record
        self.images_view.display = bool(record and record.images)
        if record is None or not record.images or not self.images_view.is_attached:
            return
        self.images_view.remove_children()
        for number, path in enumerate(record.images, 1):
            self.images_view.mount(Static(thumbnail(path), classes="tool-image"))
            self.images_view.mount(Static(f"image {number}: {path}", classes="tool-image-path", markup=False))
        self.collapsed = False

    def finish(self, record: ToolRecord) -> None:
        self.record = record
        mark = STATUS_MARKS.get(record.status, "•")
        ran = record.status in ("ok", "error", "timeout", "cancelled")
        took = (
            "reused from the other path" if record.reused else duration_text(record.duration_s) if ran else ""
        )
        status = "ok" if record.ok else record.status.replace("_", " ")
        self.title = " · ".join(p for p in (f"{mark} {self.signature}", took, status) if p)
        result = "result: " + readable(record.result) if record.ok else f"error: {record.message}"
        self.full_result = terminal_safe(result)
        preview = preview_of(self.full_result)
        self.result_view.update(preview)
        self.more.display = preview_of(self.full_result) != self.full_result
        self.set_class(not record.ok, "tool-failed")
        if record.images:
            count = len(record.images)
            self.title += f" · {count} image{'s' if count != 1 else ''}"
        if record.full_chars:  # what the model read (and the history keeps) is the cut copy
            self.title += f" · model read {len(str(record.result)):,} of {record.full_chars:,} chars"
        self._show_images()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button is self.more:
            event.stop()
            self.result_view.update(self.full_result)
            self.more.display = False


def readable(value: object) -> str:
    """A result for people: text fields as text (a file's lines stay lines), the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
            lines.append(f"{key}:\n{text}" if "\n" in text else f"{key}: {text}")
        return "\n" + "\n".join(lines)
    return json.dumps(value, indent=2, ensure_ascii=False)
