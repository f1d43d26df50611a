"""Text from a model or a tool never reaches the terminal raw (issue 37, item 9): the shared
sanitizer (``backend/terminal_text.py``), and the chat app drawing a reply and a tool result that
hold OSC 52 (clipboard), OSC 0 (title) and clear-screen. ``ask`` is in the hostile corpus
(``tests/hostile/hostile_remote_cases.py``: a server's reply through ``gemma-chat ask --server``).
Hardening round 3, item 16: what a person types while the app starts reaches the prompt."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

from backend.terminal_text import terminal_safe
from tests.support.fake_engine import FakeEngine
from tests.support.terminal import Terminal
from tests.support.tui_pilot import make_app, replies, send

ROOT = Path(__file__).resolve().parents[2]

HOSTILE = "Look:\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned\x07 \x1b[2J\x1b[H \x9b31m \r\nend"


def test_control_characters_become_visible_and_lines_stay() -> None:
    safe = terminal_safe(HOSTILE)
    assert safe == "Look:␛]52;c;cm0gLXJmIH4=␇ ␛]0;pwned␇ ␛[2J␛[H <U+009B>31m \nend"
    assert terminal_safe("tabs\tand\nlines stay") == "tabs\tand\nlines stay"
    assert all(ord(c) >= 0x20 or c in "\n\t" for c in terminal_safe("".join(map(chr, range(0xA0)))))


async def test_the_chat_app_draws_no_escape_from_a_reply(tmp_path: Path) -> None:
    def factory(path: str) -> FakeEngine:
        return FakeEngine(path, reply=HOSTILE.replace(" ", "_"))

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


def test_text_typed_while_the_app_starts_reaches_the_prompt(tmp_path: Path) -> None:
    """Keys typed before the app has drawn anything (the terminal keeps them) and during its first
    frames were dropped by the chat's scroll view, focused first: ~0.7 s of typing was lost."""
    env = {**os.environ, "GEMMA_CHAT_HOME": str(tmp_path), "TERM": "xterm-256color"}
    argv = [sys.executable, "-m", "app.cli", "--server", "http://127.0.0.1:9"]  # nothing listens there
    term = Terminal(argv, env, cwd=str(ROOT))
    try:
        began = time.monotonic()
        for word in ("typed", "early", "still", "here"):
            term.child.send(word + " ")
            time.sleep(0.15)
        term.wait_for("Quit", 60, "the app's first frame")
        assert time.monotonic() - began > 0.6, "the words went out while the app started"
        screen = term.wait_for(r"typed early still here", 10, "every word in the prompt")
        assert re.search(r"│ typed early still here\s+", screen), screen
        term.press("ctrl+q")
        assert term.wait_exit(30) == 0
    finally:
        term.close()
