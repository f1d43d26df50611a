"""One tool call in a reply's timeline: a collapsible block with the call, its arguments, the result
(long results cut, with a button to show all), the duration and the status."""

from __future__ import annotations

import json

from textual.widgets import Button, Collapsible, Static

from backend.tools.runner import ToolRecord
from backend.tools.spec import ToolCall
from backend.tools.timeline import STATUS_MARKS, call_signature, duration_text

PREVIEW_CHARS = 600


class ToolBlock(Collapsible):
    def __init__(self, call: ToolCall | None = None, record: ToolRecord | None = None) -> None:
        name = record.name if record else call.name if call else "?"
        arguments = record.arguments if record else call.arguments if call else {}
        self.signature = call_signature(name or "?", arguments, width=70)
        self.record: ToolRecord | None = None
        self.full_result = ""
        self.arguments_view = Static(json.dumps(arguments, indent=2, ensure_ascii=False), classes="tool-args")
        self.result_view = Static("", classes="tool-result", markup=False)
        self.more = Button("Show all", classes="tool-more", compact=True)
        super().__init__(
            self.arguments_view,
            self.result_view,
            self.more,
            title=f"⚙ {self.signature} · running…",
            collapsed=True,
        )
        self.add_class("tool-block")
        if record is not None:
            self.finish(record)

    def on_mount(self) -> None:
        self.more.display = len(self.full_result) > PREVIEW_CHARS

    def finish(self, record: ToolRecord) -> None:
        self.record = record
        mark = STATUS_MARKS.get(record.status, "•")
        took = "reused from the other path" if record.reused else duration_text(record.duration_s)
        status = "ok" if record.ok else record.status.replace("_", " ")
        self.title = f"{mark} {self.signature} · {took} · {status}"
        self.full_result = (
            json.dumps(record.result, indent=2, ensure_ascii=False)
            if record.ok
            else f"error: {record.message}"
        )
        preview = self.full_result
        if len(preview) > PREVIEW_CHARS:
            preview = (
                preview[:PREVIEW_CHARS] + f"\n… ({len(self.full_result) - PREVIEW_CHARS} more characters)"
            )
        self.result_view.update(preview)
        self.more.display = len(self.full_result) > PREVIEW_CHARS
        self.set_class(not record.ok, "tool-failed")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button is self.more:
            event.stop()
            self.result_view.update(self.full_result)
            self.more.display = False
