"""Copying what you select (issue 65, item 4): a mouse selection and Ctrl+C write it to the
clipboard and the primary selection through OSC 52 (read from a pty, and from Textual's driver),
with the local clipboard commands as a fallback; Ctrl+C with nothing selected still stops a reply
or quits; F5 and F8 copy through the same path."""

from __future__ import annotations

import base64
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.tui.clipboard import CopyTarget, copy_locally, local_targets, osc52, osc52_both
from app.tui.widgets.prompt_input import PromptInput
from tests.support.fake_engine import FakeEngine
from tests.support.terminal import APP, Terminal, reopened_chat
from tests.support.tui_pilot import make_app, replies, send, wait_until_streaming

ROOT = Path(__file__).resolve().parents[3]
REPLY = "alpha beta gamma delta\nsecond line here"


def test_osc52_sets_the_clipboard_and_the_primary_selection() -> None:
    assert osc52("hé", "c") == "\x1b]52;c;aMOp\x07"
    assert osc52_both("hé") == "\x1b]52;c;aMOp\x07\x1b]52;p;aMOp\x07"
    with pytest.raises(ValueError, match="not one of"):
        osc52("x", "s")


def test_local_targets_follow_what_is_there() -> None:
    def which(names: set[str]) -> Any:
        return lambda name: f"/usr/bin/{name}" if name in names else None

    assert local_targets({}, which({"tmux", "xclip", "pbcopy"}), "linux") == [], "a bare SSH session"
    in_tmux = local_targets({"TMUX": "/tmp/tmux-0/default,1,0"}, which({"tmux"}), "linux")
    assert [t.name for t in in_tmux] == ["tmux's buffer"]
    assert in_tmux[0].commands[0] == ("tmux", "load-buffer", "-w", "-")
    x11 = local_targets({"DISPLAY": ":0"}, which({"xsel"}), "linux")
    assert [(t.name, t.commands) for t in x11] == [
        ("the clipboard", (("xsel", "--clipboard", "--input"),)),
        ("the primary selection", (("xsel", "--primary", "--input"),)),
    ]
    wayland = local_targets(
        {"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, which({"wl-copy", "xclip"}), "linux"
    )
    assert wayland[0].commands == (("wl-copy",), ("xclip", "-selection", "clipboard"))
    assert [t.name for t in local_targets({}, which({"pbcopy"}), "darwin")] == ["the clipboard"]


def test_copy_locally_takes_each_targets_first_command_that_works(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    targets = [
        CopyTarget("first", (("false",), ("sh", "-c", f"cat > {kept}"))),
        CopyTarget("nowhere", (("/nonexistent/copy",),)),
    ]
    assert copy_locally("copied ✓", targets) == ["first"]
    assert kept.read_text() == "copied ✓"


def spy_on_terminal(app: Any) -> list[str]:
    """What the app writes to its (headless) terminal."""
    written: list[str] = []
    driver = app._driver
    original = driver.write

    def write(data: str) -> None:
        written.append(data)
        original(data)

    driver.write = write
    return written


async def select_reply(app: Any, pilot: Any) -> None:
    body = replies(app)[0].body
    await pilot.mouse_down(body, offset=(0, 0))
    await pilot.hover(body, offset=(10, 1))
    await pilot.mouse_up(body, offset=(10, 1))
    await pilot.pause()


async def test_ctrl_c_copies_a_mouse_selection_and_the_app_keeps_running(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, reply=REPLY, delay_s=0))
    async with app.run_test(size=(80, 30)) as pilot:
        await send(app, pilot, "hi")
        written = spy_on_terminal(app)
        await select_reply(app, pilot)
        assert app.screen.get_selected_text() == "alpha beta gamma delta\nsecond line"
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.clipboard == "alpha beta gamma delta\nsecond line"
        assert osc52_both(app.clipboard) in "".join(written), "both selections, by OSC 52"
        assert app.is_running and app.screen.get_selected_text() is None, "copied, selection cleared"
        await pilot.press("ctrl+c")  # nothing selected now: quit, as before
        await pilot.pause(0.5)
    assert app.return_code == 0 and app._shutting_down


async def test_the_terminals_copy_key_copies_to_both_selections_too(tmp_path: Path) -> None:
    """Super+C (Cmd+C where the terminal passes it on) is Textual's own copy binding: it goes
    through the same ``copy_to_clipboard``."""
    app, _ = make_app(tmp_path, lambda p: FakeEngine(p, reply=REPLY, delay_s=0))
    async with app.run_test(size=(80, 30)) as pilot:
        await send(app, pilot, "hi")
        written = spy_on_terminal(app)
        await select_reply(app, pilot)
        await pilot.press("super+c")
        await pilot.pause()
        assert app.clipboard == "alpha beta gamma delta\nsecond line"
        assert osc52_both(app.clipboard) in "".join(written)


async def test_ctrl_c_copies_the_prompts_selected_text(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.text = "keep this draft"
        prompt.focus()
        prompt.select_line(0)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.clipboard == "keep this draft" and app.is_running
        assert prompt.selected_text == "" and prompt.text == "keep this draft"


async def test_ctrl_c_without_a_selection_stops_a_streaming_reply(tmp_path: Path) -> None:
    engine = FakeEngine("optimized", reply="word " * 2000, delay_s=0.01)
    app, _ = make_app(tmp_path, lambda _: engine)
    async with app.run_test() as pilot:
        prompt = app.query_one(PromptInput)
        prompt.text = "a long one"
        await pilot.press("enter")
        await wait_until_streaming(pilot, lambda: bool(replies(app)) and len(replies(app)[0].text) > 20)
        await pilot.press("ctrl+c")
        await wait_until_streaming(pilot, lambda: app.turn is None)
        assert engine.aborted and app.is_running and replies(app)[0].status == "stopped"
        assert app.clipboard == "", "nothing was selected: nothing copied"


async def test_f5_and_f8_copy_to_both_selections(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "Code please")
        written = spy_on_terminal(app)
        await pilot.press("f5")
        await pilot.pause()
        assert app.clipboard == replies(app)[0].text
        await pilot.press("f8")
        await pilot.pause()
        assert app.clipboard == "print('hi')\n"
        assert "".join(written).count("\x1b]52;p;") == 2


SELECTED = base64.b64encode(b"alpha beta")


def select_and_copy(term: Terminal) -> None:
    term.wait_for("second line here", 60, "the reopened chat")
    term.pump(1.0)  # the first frames settle
    x, y = term.find("alpha beta")
    term.drag((x, y), (x + 9, y))
    term.press("ctrl+c")


def test_a_mouse_selection_and_ctrl_c_write_osc52_to_the_terminal(tmp_path: Path) -> None:
    """The done-when of item 4, on a real pty: the app reopens a chat, a mouse drag selects part of
    its reply, Ctrl+C writes both OSC 52 sequences, the app keeps running; Ctrl+C again quits."""
    term = Terminal(APP, reopened_chat(tmp_path, REPLY), cwd=str(ROOT))
    try:
        select_and_copy(term)
        term.wait_for(lambda _: b"\x1b]52;p;" + SELECTED + b"\x07" in term.received, 20, "OSC 52")
        assert b"\x1b]52;c;" + SELECTED + b"\x07" in term.received
        term.wait_for("Copied 10 characters", 10, "the notice")
        assert term.child.isalive(), "copying did not quit the app"
        term.press("ctrl+c")
        assert term.wait_exit(30) == 0
    finally:
        term.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_in_tmux_the_selection_reaches_tmux_and_the_outer_terminal(tmp_path: Path) -> None:
    """The same in tmux (its own server, ``set-clipboard on``): the mouse drag goes through tmux to
    the app, tmux keeps the copy as a paste buffer and passes OSC 52 on to the terminal outside."""
    env = reopened_chat(tmp_path, REPLY)
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g set-clipboard on\nset -g status off\n")
    tmux = ["tmux", "-S", str(tmp_path / "tmux.sock"), "-f", str(conf)]  # its own server, socket here
    term = Terminal([*tmux, "new-session", shlex.join(APP)], env, cwd=str(ROOT))
    try:
        select_and_copy(term)
        term.wait_for(lambda _: SELECTED in term.received, 20, "OSC 52 through tmux")
        buffers = subprocess.run([*tmux, "list-buffers", "-F", "#{buffer_sample}"], env=env, text=True,
                                 capture_output=True, check=True).stdout.splitlines()  # fmt: skip
        assert "alpha beta" in buffers and term.child.isalive()
        term.press("ctrl+c")
        assert term.wait_exit(30) == 0
    finally:
        term.close()
        subprocess.run([*tmux, "kill-server"], env=env, capture_output=True, check=False)
