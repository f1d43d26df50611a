"""Text gemma-chat did not write is shown as text, never markup (issue 64, item 2): a route at a
time, ``[/]`` (which made Textual raise ``MarkupError`` and end the app), ``[bold]`` and their kind
reach the screen exactly as written — notices, a chat's title, an attachment's name, a server's
error, an MCP server's palette entries, the approval dialog, a tool call's block, a reply's
figures and notes, the comparison's failure, a dialog's question, the status bar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.content import Content
from textual.widgets import Button, Label, OptionList, Static

from app.tui.screens.approval import ApprovalScreen
from app.tui.screens.chats import ChatsScreen
from app.tui.screens.file_picker import FilePickerScreen
from app.tui.screens.text_prompt import TextPromptScreen
from app.tui.untrusted import escaped, literal
from app.tui.widgets.attachment_bar import AttachmentBar
from app.tui.widgets.compare_view import CompareView
from app.tui.widgets.message_view import MessageView
from app.tui.widgets.tool_block import ToolBlock
from backend.gemma4.tool_call import ToolCall
from backend.terminal_text import terminal_safe
from backend.tools.mcp.host import ServerStatus
from backend.tools.spec import Tool
from tests.support.media_files import image_file
from tests.support.tui_pilot import make_app

HOSTILE = "x[/]y [bold]b[/bold] [B]c [$v] [@click=app.quit]q [/ a\\[/] [link=http://e]l[/link] \x1b[31mred"
"""What a file name, a title, a server or a tool may hold: each piece broke or restyled a line."""
SHOWN = terminal_safe(HOSTILE)


@pytest.mark.parametrize(
    "text", [HOSTILE, "[", "\\", "a\\", "\\[b]", "[[/]]", "[/]\\", "plain", "", "[B]", "[$x]"]
)
def test_escaped_reads_back_as_itself(text: str) -> None:
    assert Content.from_markup(escaped(text)).plain == terminal_safe(text)
    assert literal(text).plain == terminal_safe(text)


def _plain(widget: Any) -> str:
    if isinstance(widget, Button):
        return widget.label.plain
    visual = widget.render()
    return visual.plain if isinstance(visual, Content) else str(visual)


async def _alive(app: Any, pilot: Any) -> None:
    await pilot.pause()
    await pilot.pause()
    assert app.is_running and app.fatal is None, app.fatal


class _Host:
    """An MCP host whose server's name and error are hostile (the palette's entries)."""

    def statuses(self) -> list[ServerStatus]:
        return [ServerStatus(HOSTILE, "failed", "stdio", message=HOSTILE)]

    def restart(self, name: str) -> None: ...

    def disable(self, name: str) -> None: ...

    def close(self) -> None: ...


async def test_every_route_shows_hostile_text_as_written(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        # a notice (a server's error, a file's name): shown, the app goes on
        app.notify(HOSTILE, title=HOSTILE, severity="error")
        await _alive(app, pilot)
        assert Content.from_markup(list(app._notifications)[-1].message).plain == SHOWN

        # an attachment named with markup: the notice refusing it, the chip of one accepted
        (tmp_path / "x[").mkdir()
        named = tmp_path / "x[" / "]y [bold]b.txt"  # its path holds x[/]y
        named.write_text("not media")
        app.attach(named)
        await app.workers.wait_for_complete()
        await _alive(app, pilot)
        assert "x[/]y [bold]b.txt" in Content.from_markup(list(app._notifications)[-1].message).plain
        picture = image_file(tmp_path / "x[" / "]y.png")
        app.attach(picture)
        await app.workers.wait_for_complete()
        await _alive(app, pilot)
        assert _plain(app.query_one(AttachmentBar).query_one(Button)).startswith("Image #1")

        # the file picker, in a folder whose files are named with markup
        app.push_screen(FilePickerScreen(tmp_path / "x["))
        await _alive(app, pilot)
        app.pop_screen()

        # a tool call's block (the model's arguments in its title), a reply's figures, notes, errors
        view = MessageView("assistant", "hi", path=HOSTILE, status=HOSTILE)  # a path from the history
        await app.messages_view.mount(view)
        block = ToolBlock(call=ToolCall(HOSTILE, {HOSTILE: HOSTILE}))
        await app.messages_view.mount(block)
        await view.add_note(HOSTILE)
        await _alive(app, pilot)
        assert SHOWN in _plain(view.query_one(".figures", Static))
        assert SHOWN in _plain(view.query_one(".note", Static))
        assert SHOWN[:20] in block._title.label.plain
        view.show_note(HOSTILE)
        await _alive(app, pilot)

        # the comparison's failure, the status bar (a server's model id)
        compare = CompareView()
        await app.messages_view.mount(compare)
        compare.show_failure(HOSTILE)
        app.status.model = HOSTILE
        await _alive(app, pilot)
        assert SHOWN in _plain(compare.query_one(".verdict", Static))

        # the approval dialog: an MCP tool's name and description
        tool = Tool(HOSTILE, HOSTILE, lambda **_: None, None, side_effects=True, source="mcp: s")
        app.push_screen(ApprovalScreen(ToolCall(HOSTILE, {HOSTILE: HOSTILE}), tool))
        await _alive(app, pilot)
        title = app.screen.query_one(".title", Label)
        assert f"run {SHOWN}" in _plain(title)
        assert SHOWN in _plain(app.screen.query_one(".muted", Static))
        app.pop_screen()

        # a dialog's question, a chat's title in the chats list
        app.push_screen(TextPromptScreen(HOSTILE))
        await _alive(app, pilot)
        assert _plain(app.screen.query_one(Label)) == SHOWN
        app.pop_screen()
        assert app.store is not None
        chat = app.store.new_chat(HOSTILE)
        app.push_screen(ChatsScreen(app.store))
        await _alive(app, pilot)
        options = app.screen.query_one(OptionList)
        shown = [options.get_option_at_index(i).prompt for i in range(options.option_count)]
        assert any(isinstance(p, Content) and p.plain == SHOWN for p in shown), (chat, shown)
        app.pop_screen()

        # an MCP server's palette entries: the palette reads titles and help as markup
        app.mcp = _Host()  # type: ignore[assignment]
        entries = [c for c in app.get_system_commands(app.screen) if "MCP" in c.title]
        assert entries
        for entry in entries:
            assert SHOWN in Content.from_markup(entry.title).plain + Content.from_markup(entry.help).plain
        await pilot.press("ctrl+p")
        await _alive(app, pilot)
        await pilot.press(*"MCP")
        await pilot.pause(0.5)
        await _alive(app, pilot)
        app.mcp = None
