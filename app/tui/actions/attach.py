"""Attaching files in the app: ``/attach PATH``, a pasted or dropped path, the Ctrl+O picker, chips."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol

from textual import work

from app.tui.screens.file_picker import FilePickerScreen
from app.tui.widgets.attachment_bar import AttachmentBar
from app.tui.widgets.prompt_input import PromptInput
from app.tui.widgets.status_bar import StatusBar
from backend.config.settings import Settings
from backend.errors import GemmaChatError
from backend.media.attachment import Attachment
from backend.media.load import as_sent, load_attachments


class AttachHost(Protocol):
    """What attaching needs of the app it is mixed into."""

    settings: Settings
    pending: list[Attachment]
    status: StatusBar

    def notify(self, message: str, *, severity: str = ..., timeout: float | None = ...) -> None: ...
    def push_screen(self, screen: Any, callback: Any = ...) -> Any: ...
    def query_one(self, selector: Any, expect_type: Any = ...) -> Any: ...
    def call_from_thread(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...
    def attach(self, path: Path) -> Any: ...
    async def _add_pending(self, attachment: Attachment) -> None: ...
    async def _show_pending(self) -> None: ...


class AttachActions:
    """Mixed into ``GemmaChatApp``: files become chips above the input, checked off the event loop."""

    def on_prompt_input_path_pasted(self: AttachHost, message: PromptInput.PathPasted) -> None:
        self.attach(message.path)

    def action_attach(self: AttachHost) -> None:
        def chosen(path: Path | None) -> None:
            if path is not None:
                self.attach(path)

        self.push_screen(FilePickerScreen(Path.cwd()), chosen)

    @work(thread=True, group="attach", exit_on_error=False, description="reading the attachment")
    def attach(self: AttachHost, path: Path) -> None:
        """Decode and check a file off the event loop; errors leave the input untouched."""
        try:
            attachments = load_attachments(path, self.settings.media)
        except GemmaChatError as error:
            self.call_from_thread(self.notify, str(error), severity="error", timeout=10)
            return
        for attachment in attachments:
            self.call_from_thread(self._add_pending, attachment)

    async def _add_pending(self: AttachHost, attachment: Attachment) -> None:
        self.pending.append(attachment)
        for notice in attachment.notices:
            self.notify(notice, severity="warning")
        await self._show_pending()

    async def on_attachment_bar_removed(self: AttachHost, message: AttachmentBar.Removed) -> None:
        if 0 <= message.index < len(self.pending):
            self.pending.pop(message.index)
            await self._show_pending()

    async def _pending_as_sent(self: AttachHost) -> bool:
        """The attachments re-read where their file changed since attaching (the model and the
        history get the same content); False, with a notice, where one can no longer be sent."""
        if not self.pending:
            return True
        try:
            fresh, notices = await asyncio.to_thread(as_sent, self.pending, self.settings.media)
        except GemmaChatError as error:
            self.notify(f"Not sent: {error}", severity="error", timeout=10)
            return False
        for notice in notices:
            self.notify(notice, severity="warning")
        if notices:
            self.pending = fresh
            await self._show_pending()
        return True

    async def _show_pending(self: AttachHost) -> None:
        await self.query_one(AttachmentBar).show(self.pending)
        self.status.pending_tokens = sum(a.tokens for a in self.pending)
