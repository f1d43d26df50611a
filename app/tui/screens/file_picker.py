"""Ctrl+O: pick a file to attach; the tree shows folders and supported media only, and the
panel on the right shows what the highlighted file costs."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.color import Color
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import DirectoryTree, Label, Static

from backend.media.attachment import AttachmentError, kind_of
from backend.media.load import load_attachment


def half_block_preview(image: Any, width: int = 24) -> Text:
    """A terminal picture of ``image``: each cell shows two pixels (upper half ▀ fg, lower half bg)."""
    height = max(2, round(width * image.height / image.width / 2) * 2)
    pixels = image.convert("RGB").resize((width, height)).load()
    text = Text(no_wrap=True, overflow="crop")
    for y in range(0, height, 2):
        for x in range(width):
            top, bottom = pixels[x, y], pixels[x, y + 1]
            text.append("▀", style=Style(color=Color.from_rgb(*top), bgcolor=Color.from_rgb(*bottom)))
        text.append("\n")
    return text


class MediaTree(DirectoryTree):
    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [p for p in paths if not p.name.startswith(".") and (p.is_dir() or kind_of(p) is not None)]


class FilePickerScreen(ModalScreen[Path | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, start: Path) -> None:
        super().__init__()
        self.start = start

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Attach a file — images, audio, video · Enter attach · Esc cancel")
            with Horizontal(id="picker"):
                yield MediaTree(self.start, id="tree")
                yield Static("", id="preview")

    def on_directory_tree_file_selected(self, event: DirectoryTree.FileSelected) -> None:
        self.dismiss(event.path)

    def on_tree_node_highlighted(self, event: MediaTree.NodeHighlighted) -> None:  # type: ignore[name-defined]
        data = getattr(event.node, "data", None)
        path = getattr(data, "path", None)
        preview = self.query_one("#preview", Static)
        if path is None or Path(path).is_dir():
            preview.update("")
            return
        try:
            attachment = load_attachment(path)
        except AttachmentError as error:
            preview.update(Text(error.problem, style="red"))
            return
        summary = Text(f"{attachment.kind} · {attachment.detail}\n{attachment.tokens} prompt tokens\n\n")
        if attachment.kind == "image":
            summary.append_text(half_block_preview(attachment.payload))
        preview.update(summary)

    def action_cancel(self) -> None:
        self.dismiss(None)
