"""The README's first command, as a new user runs it: ``python3 -m app --demo`` in a terminal.

Real engines on the shipped demo model, keys typed into a pseudo-terminal, the screen read back
as text: a reply with its tok/s, the baseline after F2, a comparison after F3, Esc mid-stream,
Ctrl+Q, and a relaunch that resumes the chat.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.app.test_cli import _leftovers
from tests.support.terminal import Terminal

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
LONG = "Write a function that reverses a linked list."
"""The demo model babbles on for its whole reply budget here: long enough to stop mid-stream."""
SHORT = "def fibonacci(n):"
BUDGET = 4096
START_S = 600.0
"""An engine start, compiling from nothing while the other lane compiles too (a CI run on a fresh
machine once took over 420 s here); the failure message ends with the engine log's tail."""


def _launch(home: Path) -> Terminal:
    python = shutil.which("python3") or sys.executable
    env = {**os.environ, "GEMMA_CHAT_HOME": str(home), "TERM": "xterm-256color", "COLUMNS": "120"}
    return Terminal([python, "-m", "app", "--demo"], env, cwd=str(ROOT))


def _context_used(screen: str) -> int | None:
    """The tokens the status bar's context gauge counts (``used/window``), None where not shown."""
    found = re.search(r"ctx \D*(\d+)/\d+", screen)
    return int(found.group(1)) if found else None


def _send(term: Terminal, text: str) -> None:
    """Send the first message of a new chat and wait for its turn to start."""
    term.wait_for(lambda screen: _context_used(screen) == 0, 30, "an empty chat")
    term.type(text)
    term.press("enter")
    # A turn that started shows "engine replying" until it ends. While the baseline's engine holds
    # both cores of a 2-core machine, this process (and the app) can get no CPU for seconds: the screen
    # read next may already show the turn over. The context gauge has moved then (the prompt was sized).
    term.wait_for(
        lambda screen: "engine replying" in screen or (_context_used(screen) or 0) > 0,
        30,
        "the turn to start",
    )


def _turn_done(term: Terminal, timeout_s: float = 180) -> str:
    return term.wait_for(r"engine ready", timeout_s, "the reply to end")


def _saved_branch(home: Path, title: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The (role, text) of each message the app saved for the chat titled ``title``, read from
    where the app with that home keeps its history."""
    from backend.chat.store import ChatStore
    from backend.config.settings import load_settings

    monkeypatch.setenv("GEMMA_CHAT_HOME", str(home))
    store = ChatStore(load_settings().history_path())
    try:
        chat = next(summary for summary in store.chats() if summary.title == title)
        return [(message.role, message.text) for message in store.branch(chat.id)]
    finally:
        store.close()


@pytest.mark.timeout(1800)
def test_the_readme_first_command_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A reply budget long enough that Esc lands while the engine still generates, even when the
    # screen lags behind the app on a loaded machine (the demo model babbles on for LONG).
    (tmp_path / "config").mkdir()
    # Speculation forced, not measured: in a clean-clone CI run, beside the other lane's engines, the
    # first start's measurement (tests/engine/speculation/test_first_start_engine.py tests it on a
    # real engine) twice kept the app at "engine starting" past 600 s; alone it takes seconds.
    settings = f'max_tokens = {BUDGET}\n\n[engine]\nspeculation = "mtp"\ndraft_tokens = 2\n'
    (tmp_path / "config" / "config.toml").write_text(settings)
    term = _launch(tmp_path)
    try:
        screen = term.wait_for(r"path optimized", 60, "the first paint")
        assert "demo" in screen
        term.wait_for(r"engine ready", START_S, "the optimized engine")

        _send(term, LONG)
        term.wait_for(lambda text: "self." in text or "'tix" in text, 60, "some streamed text")
        term.press("escape")
        # the footer may wrap (live draft counts make it long): its parts may span two lines
        screen = term.wait_for(r"tok/s [\s\S]*· stopped", 30, "the stopped reply")
        kept = re.search(
            r"optimized · [\d.]+ tok/s · TTFT \d+ ms[\s\S]* (\d+) tokens [\s\S]*· stopped", screen
        )
        assert kept and 0 < int(kept.group(1)) < BUDGET, f"the partial reply is kept: {screen}"
        # The prompt itself may have scrolled out of view (how far depends on how long the screen
        # lagged behind the stream before Esc): it is checked in the saved history below.
        _turn_done(term, 30)

        term.press("f2")
        term.wait_for(r"path baseline", 10)
        term.wait_for(r"path baseline │ engine ready", START_S, "the baseline engine")
        term.press("ctrl+n")
        _send(term, SHORT)
        screen = _turn_done(term)
        assert re.search(r"baseline · [\d.]+ tok/s", screen), screen

        term.press("ctrl+n", "f3")
        term.wait_for(r"compare next", 10)
        _send(term, SHORT)
        screen = term.wait_for(r"parity: ", 300, "the comparison's verdict")
        verdict = next(line for line in screen.splitlines() if "parity: " in line)
        assert "speed-up: decode" in verdict or "nothing applies" in verdict, verdict
        assert "identical (" in verdict or "diverges at token" in verdict, verdict
        _turn_done(term)

        term.press("ctrl+q")
        assert term.wait_exit(120) == 0
        assert not _leftovers(term.child.pid), "no engine process outlives the app"
        stopped = _saved_branch(tmp_path, LONG, monkeypatch)
        assert [role for role, _ in stopped] == ["user", "assistant"], stopped
        assert stopped[0][1] == LONG and stopped[1][1].strip(), "the prompt and the stopped reply were kept"

        again = _launch(tmp_path)
        try:
            # the chat reopens at its end (the compared reply may run to the whole budget), then
            # PageUp in the prompt scrolls back to the prompt that started it
            again.wait_for(r"optimized · [\d.]+ tok/s", 60, "the resumed chat's last reply, with its figures")
            for _ in range(60):
                if SHORT in again.text():
                    break
                again.press("pageup")
                again.pump()
            again.wait_for(re.escape(SHORT), 10, "the compared chat's prompt, scrolled back to")
            again.press("ctrl+q")
            assert again.wait_exit(120) == 0
            assert not _leftovers(again.child.pid), "quitting while the engine starts leaves nothing"
        finally:
            again.close()
    finally:
        term.close()
