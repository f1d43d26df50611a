"""Attachment chips above the message box: each attachment as you will send it (a picture, a
video's first frame, audio's waveform) over ``[Image #1 160x120 · 218 tok ✕]``; click a chip to
remove it."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button

from app.tui.untrusted import literal
from app.tui.widgets.preview import preview
from backend.media.attachment import Attachment

PREVIEW_COLUMNS = 20
PREVIEW_ROWS = 5
"""How large an attachment shows above the message box, in cells at most."""


def chip_label(attachment: Attachment, number: int) -> str:
    return f"{attachment.kind.capitalize()} #{number} {attachment.detail} · {attachment.tokens} tok ✕"


class AttachmentBar(Horizontal):
    @dataclass
    class Removed(Message):
        index: int

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.attachments: list[Attachment] = []

    def compose(self) -> ComposeResult:
        return iter(())

    async def show(self, attachments: list[Attachment]) -> None:
        self.attachments = list(attachments)
        await self.remove_children()
        counts: dict[str, int] = {}
        chips = []
        for index, attachment in enumerate(attachments):
            counts[attachment.kind] = counts.get(attachment.kind, 0) + 1
            button = Button(
                literal(chip_label(attachment, counts[attachment.kind])), id=f"chip-{index}", classes="chip"
            )
            shown = preview(attachment, PREVIEW_COLUMNS, PREVIEW_ROWS)
            chips.append(Vertical(*([shown] if shown else []), button, classes="chip-box"))
        await self.mount_all(chips)
        self.display = bool(attachments)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id and event.button.id.startswith("chip-"):
            self.post_message(self.Removed(int(event.button.id.removeprefix("chip-"))))
