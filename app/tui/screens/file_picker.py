"""Ctrl+O: pick a file to attach; the tree shows folders and supported media only, and the
panel on the right shows what the highlighted file costs."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import DirectoryTree, Label, Static

from backend.media.attachment import AttachmentError, kind_of, load_attachment


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
            preview.update(f"[red]{error.problem}[/red]")
            return
        preview.update(f"[b]{attachment.kind}[/b] {attachment.detail}\n{attachment.tokens} prompt tokens")

    def action_cancel(self) -> None:
        self.dismiss(None)
