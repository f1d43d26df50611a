"""An attachment as you see it in the input area and in the sent message: an image as a picture, a
video as its first frame (``Picture``: Kitty graphics where the terminal draws them, half-blocks
elsewhere — ``app.tui.graphics``), audio as its duration and a waveform line."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from app.tui import graphics
from app.tui.widgets.thumbnail import half_blocks
from backend.media.attachment import Attachment
from backend.media.preview import audio_samples, still, waveform


class Picture(Static):
    """A picture at most ``columns`` x ``rows`` cells, its proportions kept."""

    def __init__(self, image: Any, columns: int, rows: int, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.image = image
        self.columns = min(columns, graphics.MAX_CELLS)
        self.rows = min(rows, graphics.MAX_CELLS)
        self.image_id: int | None = None
        """The picture's id in the terminal where it was sent with Kitty graphics."""
        self.drawn_with: graphics.Graphics = "halfblocks"
        self.drawing = Text()
        """The cells drawn: half-blocks, or the placeholders of the picture sent to the terminal."""

    def on_mount(self) -> None:
        driver = getattr(self.app, "_driver", None)
        # the image id is the cells' colour: only where Textual writes colours as they are
        truecolor = self.app.console.color_system == "truecolor"
        if getattr(self.app, "graphics", "halfblocks") == "kitty" and driver is not None and truecolor:
            width, height = self.image.size
            across, down = graphics.cells(width, height, self.columns, self.rows)
            self.image_id = graphics.next_image_id()
            driver.write(graphics.transmit(self.image, self.image_id, across, down))
            self.drawn_with = "kitty"
            self.drawing = graphics.placeholders(self.image_id, across, down)
        else:
            self.drawing = half_blocks(self.image, self.columns, self.rows)
        self.update(self.drawing)

    def on_unmount(self) -> None:
        driver = getattr(self.app, "_driver", None)
        if self.image_id is not None and driver is not None:
            driver.write(graphics.delete(self.image_id))


def preview(attachment: Attachment, columns: int, rows: int) -> Widget | None:
    """What shows of ``attachment``: its picture, or for audio its duration and waveform."""
    picture = still(attachment)
    if picture is not None:
        return Picture(picture, columns, rows, classes="preview")
    samples = audio_samples(attachment)
    if samples is not None:
        line = f"♪ {attachment.detail} {waveform(samples, columns)}"
        return Static(line, classes="preview waveform", markup=False)
    return None
