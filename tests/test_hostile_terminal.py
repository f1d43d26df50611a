"""Text from a model or a tool never reaches the terminal raw (issue 37, item 9): the shared
sanitizer (``backend/terminal_text.py``), and the chat app drawing a reply and a tool result that
hold OSC 52 (clipboard), OSC 0 (title) and clear-screen. ``ask`` is in the hostile corpus
(``tests/hostile_remote_cases.py``: a server's reply through ``gemma-chat ask --server``)."""

from __future__ import annotations

from pathlib import Path

from backend.terminal_text import terminal_safe
from tests.fake_engine import FakeEngine
from tests.tui_pilot import make_app, replies, send

HOSTILE = "Look:\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned\x07 \x1b[2J\x1b[H \x9b31m \r\nend"


def test_control_characters_become_visible_and_lines_stay() -> None:
    safe = terminal_safe(HOSTILE)
    assert safe == "Look:␛]52;c;cm0gLXJmIH4=␇ ␛]0;pwned␇ ␛[2J␛[H <U+009B>31m \nend"
    assert terminal_safe("tabs\tand\nlines stay") == "tabs\tand\nlines stay"
    assert all(ord(c) >= 0x20 or c in "\n\t" for c in terminal_safe("".join(map(chr, range(0xA0)))))


async def test_the_chat_app_draws_no_escape_from_a_reply(tmp_path: Path) -> None:
    def factory(profile: str) -> FakeEngine:
        return FakeEngine(profile, reply=HOSTILE.replace(" ", "_"))

    app, _ = make_app(tmp_path, factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await send(app, pilot, "hi")
        (reply,) = replies(app)
        screen = app.export_screenshot()
        assert "␛]52;c;" in screen and "␛]0;pwned␇" in screen, "made visible"
        assert "\x1b" not in screen and "\x07" not in screen and "\x9b" not in screen
        assert reply.text.startswith("Look:\x1b]52"), "what is stored stays what the model said"


async def test_a_notice_quoting_a_server_shows_no_escape(tmp_path: Path) -> None:
    """Notices quote servers, tools and file names (an MCP server's failure, a server's model id)."""
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        app.notify("MCP server srv: failed — \x1b]0;pwned\x07 \x1b[2J", title="\x1b]52;c;eA==\x07")
        await pilot.pause()
        (notice,) = [n for n in app._notifications if "srv" in str(n.message)]
        assert "\x1b" not in str(notice.message) + str(notice.title)
        assert "␛]0;pwned␇" in str(notice.message) and "␛]52;c;" in str(notice.title)
